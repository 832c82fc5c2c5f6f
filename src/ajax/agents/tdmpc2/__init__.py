"""TD-MPC2's agent-local blocks (spec 000 B7, B9, B12-B14, B17, B19; nicklashansen/tdmpc2).

- :mod:`.config`: TDMPC2Config (model sizes as presets, optimisation and discount constants)
  and PlannerConfig.
- :mod:`.networks`: SimNorm, the reference's mlp, the WorldModel (encode, next, reward, pi, Q),
  parameter counts and the latent rollout with given actions.
- :mod:`.ensemble`: the vmapped Q ensemble and its random-pair 'min' / 'avg' reductions.
- :mod:`.policy`: the tanh-Gaussian policy prior and its HEAD and paper-era log-probabilities.
- :mod:`.planner`: MPPI with explicit noise (PlanNoise), jit- and vmap-able over environments.
- :mod:`.optim`: the world model's grouped Adam after one global clip, and the policy's Adam.
- :mod:`.losses`, :mod:`.update`: the losses, the TD target and one full update with explicit
  noise (UpdateNoise).
- :mod:`.act`, :mod:`.agent`: planning with per-env planner state, and the jitted training loop.
- :mod:`.protocols`: the official run protocol ("dmc": action repeat 2, 500-step episodes,
  evaluation every 50,000 steps, the published curves' length) as data.

The public agent is :class:`TDMPC2` (Hansen et al., arXiv:2310.16828), continuous actions only.
"""

from ajax.agents.tdmpc2 import protocols
from ajax.agents.tdmpc2.act import ActNoise, ActState, ValueNoise, draw_act_noise
from ajax.agents.tdmpc2.agent import episode_length, make_loop, replay_agent  # noqa: F401
from ajax.agents.tdmpc2.agent import policy as agent_policy
from ajax.agents.tdmpc2.config import Architecture, PlannerConfig, TDMPC2Config
from ajax.agents.tdmpc2.ensemble import Ensemble, pair_q, random_pair, reduce_pair
from ajax.agents.tdmpc2.networks import (
    MLP,
    WorldModel,
    latent_rollout,
    param_counts,
    simnorm,
)
from ajax.agents.tdmpc2.optim import adam_grouped, component_labels, pi_adam
from ajax.agents.tdmpc2.pixels import PixelEncoder
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
from ajax.agents.tdmpc2.update import (
    TDMPC2State,
    UpdateNoise,
    draw_update_noise,
    update_with_noise,
)
from ajax.training.api import ReplayAgent, ReplayAlgorithm


def check_pixel_latent(cfg: TDMPC2Config, image_shape) -> None:
    """The pixel encoder's output is the latent: its size must be ``latent_dim``."""
    n = PixelEncoder(tuple(image_shape), cfg.num_channels).latent_dim
    if n != cfg.arch.latent_dim:
        raise ValueError(
            f"tdmpc2's pixel encoder gives {n} features for {image_shape} frames (num_channels "
            f"{cfg.num_channels}) but latent_dim is {cfg.arch.latent_dim}: use --model-size 5 "
            f"(latent 512) or --latent-dim {n}, on 64 x 64 frames"
        )


class TDMPC2(ReplayAlgorithm):
    """TD-MPC2 (world model + MPPI planning) on continuous action spaces, JAX or host envs.

    ``TDMPC2("Pendulum-v1", TDMPC2Config.preset(1)).train(seed, total_steps, n_seeds)``; the
    whole run (env, planning, updates, evaluation) is one jitted scan, vmapped over seeds.
    A config from the official protocol (``TDMPC2Config.from_protocol("dmc")``) adds the
    protocol's env settings (500-step episodes) under the ``env_options`` given and refuses an
    env of another kind with a ValueError naming the fix.
    """

    name = "tdmpc2"

    config_cls = TDMPC2Config
    continuous = True
    discrete = False
    images = True  # the conv encoder of pixels.py (64 x 64 frames)
    multitask = "ajax.agents.tdmpc2.multitask:MultitaskTDMPC2"  # offline, from a dataset

    def __init__(self, env="Pendulum-v1", config=None, **env_options):
        config, env_options = self.auto_config(env, config, env_options)
        protocol = getattr(config, "protocol", None)
        if protocol is not None and isinstance(env, str):
            # the protocol's env settings (envs/dmcontrol.py:110) under the ones given
            family = protocols.check_env_id(protocol, env)
            env_options = {**protocols.env_options(protocol, family), **env_options}
        super().__init__(env, config, **env_options)  # action_repeat: an option of the env id
        spec = self.env.spec
        if protocol is not None:  # an env object: its spec says the family
            protocols.check_family(protocol, self.env_id, spec.family)
            protocols.check_observation(protocol, self.env_id, spec.image_shape is not None)
        if self.env.spec.image_shape is not None:
            check_pixel_latent(self.config, self.env.spec.image_shape)

    def agent(self, total_steps: int) -> ReplayAgent:
        return replay_agent(self.config, self.env, total_steps)

    def first_update(self) -> tuple[int, str]:
        return self.config.seed_steps_for(episode_length(self.env)), "--seed-steps"

    def policy(self):
        """The planner with its per-env warm start (:func:`ajax.agents.tdmpc2.agent.policy`)."""
        return agent_policy(self.config, self.env)


__all__ = [
    "MLP",
    "TDMPC2",
    "ActNoise",
    "ActState",
    "Architecture",
    "TDMPC2State",
    "UpdateNoise",
    "ValueNoise",
    "draw_act_noise",
    "draw_update_noise",
    "make_loop",
    "update_with_noise",
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
