"""DreamerV3's agent-local blocks (spec 000 B6, B8, B12, B14-B17).

- :mod:`.latents`: unimix categorical latents, straight-through samples, KL, free bits, dyn/rep losses.
- :mod:`.networks`: BlockLinear, the block-GRU RSSM core, prior and posterior heads, RSSMConfig.
- :mod:`.rssm`: the pure observe/imagine steps and their time-major scans.
- :mod:`.policy`: the bounded_normal policy head and the continue-head target.
- :mod:`.optim`: per-tensor AGC and the LaProp chain.
"""

from ajax.agents.dreamerv3.latents import (
    categorical_entropy,
    categorical_kl,
    dyn_loss,
    free_bits,
    onehot_st_sample,
    rep_loss,
    unimix_logits,
)
from ajax.agents.dreamerv3.networks import RSSM, BlockLinear, RSSMConfig, block_gru_gates
from ajax.agents.dreamerv3.optim import clip_by_agc_per_tensor, laprop_agc, warmup_constant
from ajax.agents.dreamerv3.policy import (
    BoundedNormal,
    BoundedNormalHead,
    bounded_normal,
    continue_loss,
    continue_target,
)
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

__all__ = [
    "RSSM",
    "BlockLinear",
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
