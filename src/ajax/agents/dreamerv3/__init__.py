"""DreamerV3 (Hafner et al., arXiv:2301.04104): ``ajax.DreamerV3`` and its agent-local blocks.

- :mod:`.config`: DreamerV3Config with the official size presets ("1m" ... "400m").
- :mod:`.protocols`: the official run protocols ("atari100k", "dmc_proprio", ...) as data.
- :mod:`.model`: encoder, decoder, reward / continue / value heads and the actor (Nets).
- :mod:`.losses`: world_model_loss, imagine_loss, replay_value_loss, total_loss.
- :mod:`.update`: the learner state, one train step, the acting step.
- :mod:`.agent`: hold-tick rows, the train-ratio clock and learning for the shared loop.

- :mod:`.latents`: unimix categorical latents, straight-through samples, KL, free bits, dyn/rep losses.
- :mod:`.networks`: BlockLinear, the block-GRU RSSM core, prior and posterior heads, RSSMConfig.
- :mod:`.rssm`: the pure observe/imagine steps and their time-major scans.
- :mod:`.policy`: the bounded_normal policy head and the continue-head target.
- :mod:`.optim`: per-tensor AGC and the LaProp chain.
"""

from ajax.agents.dreamerv3 import protocols
from ajax.agents.dreamerv3.agent import policy as agent_policy
from ajax.agents.dreamerv3.agent import replay_agent
from ajax.agents.dreamerv3.config import MODEL_SIZES, DreamerV3Config
from ajax.agents.dreamerv3.conv import ConvDecoder, ConvEncoder, image_stages
from ajax.agents.dreamerv3.latents import (
    categorical_entropy,
    categorical_kl,
    dyn_loss,
    free_bits,
    onehot_st_sample,
    rep_loss,
    unimix_logits,
)
from ajax.agents.dreamerv3.model import Nets
from ajax.agents.dreamerv3.networks import RSSM, BlockLinear, RSSMConfig, block_gru_gates
from ajax.agents.dreamerv3.optim import clip_by_agc_per_tensor, laprop_agc, warmup_constant
from ajax.agents.dreamerv3.policy import (
    BoundedNormal,
    BoundedNormalHead,
    bounded_normal,
    continue_loss,
    continue_target,
)
from ajax.agents.dreamerv3.protocols import PROTOCOLS, Protocol
from ajax.agents.dreamerv3.rssm import (
    RSSMFeatures,
    RSSMState,
    embed_action,
    imagine,
    imagine_actions,
    imagine_step,
    initial_state,
    observe,
    observe_step,
)
from ajax.environments.host import HostExplicitReset
from ajax.environments.wrappers import ExplicitReset
from ajax.training.api import SAME_ON_ANY_LAYOUT, Chunks, ReplayAgent, ReplayAlgorithm, make_loop


class DreamerV3(ReplayAlgorithm):
    """DreamerV3 on vector or image observations, discrete or continuous actions.

    ``DreamerV3("CartPole-v1", DreamerV3Config.preset("1m")).train(seed, total_steps,
    n_seeds)``: on a JAX env the whole run (acting, hold ticks, replay, updates, evaluation) is
    one jitted scan, vmapped over seeds; on a host env (``gymnasium:``, ``dmc:``) the same
    ticks run around the host simulators, one jitted policy and one jitted train call each.
    A config from an official protocol (``DreamerV3Config.from_protocol("dmc_vision")``) adds
    the protocol's env settings under the ``env_options`` given (e.g. rendered images for
    ``dmc:`` ids) and refuses an env of the wrong kind with a ValueError naming the fix.
    """

    name = "dreamerv3"
    config_cls = DreamerV3Config
    continuous = True
    discrete = True
    images = True  # the CNN encoder and decoder of conv.py
    mixed = True  # an image with vector features: both paths (mixed.py)
    host_wrap = HostExplicitReset  # hold ticks on host simulators too
    # size1m's train step: 110k page faults and 0.38 s kernel time a step without (README)
    keeps_host_buffers = True
    # the same rounding on one device and on several (seed sharding bitwise)
    compiler_options = SAME_ON_ANY_LAYOUT

    def __init__(self, env="CartPole-v1", config=None, **env_options):
        config, env_options = self.auto_config(env, config, env_options)
        protocol = getattr(config, "protocol", None)
        if protocol is not None and isinstance(env, str):
            # the protocol's env settings (configs.yaml env.<suite>) under the ones given
            family = protocols.check_env_id(protocol, env)
            env_options = {**protocols.env_options(protocol, family), **env_options}
        super().__init__(env, config, **env_options)
        spec = self.env.spec
        if protocol is not None:  # an env object: its spec says the family
            protocols.check_family(protocol, self.env_id, spec.family)
            protocols.check_observation(protocol, self.env_id, spec.image_shape is not None)
        if len(spec.observation_shape) != 1:
            raise ValueError(
                f"dreamerv3 takes flat observations (vectors, or images flattened with "
                f"spec.image_shape set); {self.env_id!r} gives shape {spec.observation_shape}"
            )
        if spec.image_shape is not None:
            image_stages(*spec.image_shape[:2])  # refuses images too small for the CNN
        self.policy()  # builds the modules: refuses enc_spaces/dec_spaces that select nothing
        if self.is_jax:
            self.train_env = ExplicitReset(self.env)

    def agent(self, total_steps: int) -> ReplayAgent:
        return replay_agent(self.config, self.env, total_steps)

    def first_update(self) -> tuple[int, str]:
        # the replay first holds --batch-size x --batch-length steps (embodied/run/train.py:71)
        return self.config.first_train_step, "--batch-size x --batch-length"

    def make_chunks(self, total_steps: int) -> Chunks:
        self.require_jax_env()
        agent = replay_agent(self.config, self.train_env, total_steps)
        loop = make_loop(self.config, self.train_env, self.eval_env, agent)
        return Chunks.of(loop, total_steps)

    def policy(self):
        spec = self.env.spec
        nets = Nets.create(
            self.config, spec.obs_dim, spec.action_dim, spec.discrete, spec.image_shape
        )
        return agent_policy(self.config, nets, spec.action_dim, spec.discrete)


__all__ = [
    "MODEL_SIZES",
    "PROTOCOLS",
    "Protocol",
    "DreamerV3",
    "DreamerV3Config",
    "RSSM",
    "BlockLinear",
    "ConvDecoder",
    "ConvEncoder",
    "BoundedNormal",
    "BoundedNormalHead",
    "RSSMConfig",
    "RSSMFeatures",
    "RSSMState",
    "block_gru_gates",
    "bounded_normal",
    "categorical_entropy",
    "categorical_kl",
    "clip_by_agc_per_tensor",
    "continue_loss",
    "continue_target",
    "dyn_loss",
    "embed_action",
    "free_bits",
    "imagine",
    "imagine_actions",
    "imagine_step",
    "initial_state",
    "laprop_agc",
    "observe",
    "observe_step",
    "onehot_st_sample",
    "rep_loss",
    "unimix_logits",
    "warmup_constant",
]
