"""TD-MPC2's agent-local blocks (spec 000 B7, B9, B12-B14, B17, B19; nicklashansen/tdmpc2).

- :mod:`.config`: TDMPC2Config (model sizes as presets, optimisation and discount constants)
  and PlannerConfig.
- :mod:`.networks`: SimNorm, the reference's mlp, the WorldModel (encode, next, reward, pi, Q),
  parameter counts and the latent rollout with given actions.
- :mod:`.ensemble`: the vmapped Q ensemble and its random-pair 'min' / 'avg' reductions.
- :mod:`.policy`: the tanh-Gaussian policy prior and its HEAD and paper-era log-probabilities.
- :mod:`.planner`: MPPI with explicit noise (PlanNoise), jit- and vmap-able over environments.
- :mod:`.optim`: the world model's grouped Adam after one global clip, and the policy's Adam.
"""

from ajax.agents.tdmpc2.config import PlannerConfig, TDMPC2Config
from ajax.agents.tdmpc2.ensemble import Ensemble, pair_q, random_pair, reduce_pair
from ajax.agents.tdmpc2.networks import (
    MLP,
    WorldModel,
    latent_rollout,
    param_counts,
    simnorm,
)
from ajax.agents.tdmpc2.optim import adam_grouped, component_labels, pi_adam
from ajax.agents.tdmpc2.planner import (
    PlanNoise,
    PlanResult,
    draw_plan_noise,
    mppi_update,
    plan,
    sample_elite,
    warm_start,
)
from ajax.agents.tdmpc2.policy import (
    PolicySample,
    SquashedGaussian,
    bounded_log_std,
    gaussian_logprob,
    head_log_prob,
    head_scaled_entropy,
    pe_log_pi,
    sample_squashed,
    tanh_squash_logdet,
)

__all__ = [
    "MLP",
    "Ensemble",
    "PlanNoise",
    "PlanResult",
    "PlannerConfig",
    "PolicySample",
    "SquashedGaussian",
    "TDMPC2Config",
    "WorldModel",
    "adam_grouped",
    "bounded_log_std",
    "component_labels",
    "draw_plan_noise",
    "gaussian_logprob",
    "head_log_prob",
    "head_scaled_entropy",
    "latent_rollout",
    "mppi_update",
    "pair_q",
    "param_counts",
    "pe_log_pi",
    "pi_adam",
    "plan",
    "random_pair",
    "reduce_pair",
    "sample_elite",
    "sample_squashed",
    "simnorm",
    "tanh_squash_logdet",
    "warm_start",
]
