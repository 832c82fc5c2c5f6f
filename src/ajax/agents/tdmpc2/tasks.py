"""The tasks of a multi-task TD-MPC2 model: their shapes, action masks, discounts and task sets.

arXiv:2310.16828v2 Sec. 4 and App. C (mt30, mt80); nicklashansen/tdmpc2 common/__init__.py
``TASK_SET``, common/parser.py (multi-task fields) and envs/wrappers/multitask.py. One model
serves every task: observations are zero-padded to the widest task's, actions have the widest
task's dimensions, and a task uses the first ``action_dims[i]`` of them (its action mask). Each
task keeps the discount of its own episode length (``cfg.discounts``, tdmpc2.py:57-70).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ajax.validation import ConfigError, Validated

# The official task sets (common/__init__.py:30-69 TASK_SET), in task-id order: the ids of an
# official dataset's ``task`` field index these tuples. Checked name for name against the file at
# e9f5932 (test_t2_mt_parity.py; deviations.md T56).
_DMC = (
    "walker-stand", "walker-walk", "walker-run", "cheetah-run", "reacher-easy", "reacher-hard",
    "acrobot-swingup", "pendulum-swingup", "cartpole-balance", "cartpole-balance-sparse",
    "cartpole-swingup", "cartpole-swingup-sparse", "cup-catch", "finger-spin", "finger-turn-easy",
    "finger-turn-hard", "fish-swim", "hopper-stand", "hopper-hop",
)  # fmt: skip
_DMC_CUSTOM = (
    "walker-walk-backwards", "walker-run-backwards", "cheetah-run-backwards", "cheetah-run-front",
    "cheetah-run-back", "cheetah-jump", "hopper-hop-backwards", "reacher-three-easy",
    "reacher-three-hard", "cup-spin", "pendulum-spin",
)  # fmt: skip
_METAWORLD = tuple(f"mw-{name}" for name in (
    "assembly", "basketball", "button-press-topdown", "button-press-topdown-wall", "button-press",
    "button-press-wall", "coffee-button", "coffee-pull", "coffee-push", "dial-turn",
    "disassemble", "door-open", "door-close", "drawer-close", "drawer-open", "faucet-open",
    "faucet-close", "hammer", "handle-press-side", "handle-press", "handle-pull-side",
    "handle-pull", "lever-pull", "peg-insert-side", "peg-unplug-side", "pick-out-of-hole",
    "pick-place", "pick-place-wall", "plate-slide", "plate-slide-side", "plate-slide-back",
    "plate-slide-back-side", "push-back", "push", "push-wall", "reach", "reach-wall",
    "shelf-place", "soccer", "stick-push", "stick-pull", "sweep-into", "sweep", "window-open",
    "window-close", "bin-picking", "box-close", "door-lock", "door-unlock", "hand-insert",
))  # fmt: skip
TASK_SETS: dict[str, tuple[str, ...]] = {
    "mt30": _DMC + _DMC_CUSTOM,
    "mt80": _DMC + _DMC_CUSTOM + _METAWORLD,
}


@dataclasses.dataclass(frozen=True)
class TaskSet(Validated):
    """The tasks one multi-task model is trained on, in task-id order.

    Frozen and hashable, so :class:`~ajax.agents.tdmpc2.networks.WorldModel` holds it as a field.

    Attributes:
        names: one name per task (its id is its position).
        obs_dims: each task's own observation width (before padding).
        action_dims: each task's own action dimensions (its mask's ones).
        episode_lengths: each task's episode length in agent steps (its discount).
    """

    names: tuple[str, ...]
    obs_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    episode_lengths: tuple[int, ...]

    def relations(self) -> None:
        n = len(self.names)
        if n < 2:
            raise ConfigError(
                f"TaskSet: a multi-task model needs >= 2 tasks, got {list(self.names)}; train one "
                "task with 'ajax train tdmpc2 --env ID'",
                "names",
            )
        if len(set(self.names)) != n:
            raise ConfigError(f"TaskSet: task names repeat: {list(self.names)}", "names")
        for field in ("obs_dims", "action_dims", "episode_lengths"):
            values = getattr(self, field)
            if len(values) != n or any(int(v) < 1 for v in values):
                raise ConfigError(
                    f"TaskSet: {field} needs one positive value per task ({n}), got {values}",
                    field,
                )

    @property
    def obs_dim(self) -> int:
        """The padded observation width: the widest task's."""
        return max(self.obs_dims)

    @property
    def action_dim(self) -> int:
        """The model's action dimensions: the widest task's."""
        return max(self.action_dims)

    def action_masks(self) -> np.ndarray:
        """[T, A] float32: row i holds action_dims[i] ones, then zeros (world_model.py:22-25)."""
        cols = np.arange(self.action_dim)[None, :]
        return (cols < np.asarray(self.action_dims)[:, None]).astype(np.float32)

    def mask(self, task) -> jax.Array:
        """Action masks [..., A] of task ids [...] (rows of :meth:`action_masks`)."""
        return jnp.asarray(self.action_masks())[jnp.asarray(task, jnp.int32)]

    def discounts(self, cfg) -> np.ndarray:
        """[T] float32: each task's discount from its episode length (``cfg.discount``)."""
        return np.asarray([cfg.discount(n) for n in self.episode_lengths], np.float32)

    def index(self, name: str) -> int:
        if name not in self.names:
            raise ValueError(f"task {name!r} is not one of this model's tasks {list(self.names)}")
        return self.names.index(name)


def task_set_widths(task_set: str, model_size: int) -> dict[str, int]:
    """The widths the official parser gives a model of ``model_size`` trained on ``task_set``
    (common/parser.py:49-62): task_dim 96 for mt80 or sizes 1 and 317, else 64 ("slight
    inconsistency in task_dim for the mt30 experiments"), and latent_dim 512 for mt30 at size
    19. Pass them to :meth:`TDMPC2Config.preset` to load or reproduce official checkpoints."""
    if task_set not in TASK_SETS:
        raise ValueError(f"unknown task set {task_set!r}; known: {', '.join(TASK_SETS)}")
    out = {"task_dim": 96 if task_set == "mt80" or model_size in (1, 317) else 64}
    if task_set == "mt30" and model_size == 19:
        out["latent_dim"] = 512
    return out


def with_task_set_widths(config, task_set: str):
    """``config`` with the official widths of ``task_set`` at its ``model_size`` (see
    :func:`task_set_widths`), set as the official parser sets them (common/parser.py:62-75,
    over the config's own). A width the user chose that differs (a ``latent_dim``, or a
    ``task_dim`` other than config.yaml's 96) is refused rather than overwritten."""
    widths = task_set_widths(task_set, config.model_size)
    default = type(config).__dataclass_fields__["task_dim"].default
    for name, width in widths.items():
        chosen = getattr(config, name)
        if chosen not in (None, width) and not (name == "task_dim" and chosen == default):
            flag = name.replace("_", "-")
            raise ConfigError(
                f"--{flag} {chosen}: task set {task_set} at model size {config.model_size} has "
                f"{name} {width} (nicklashansen/tdmpc2 common/parser.py); drop --{flag}, or "
                "drop --task-set to train on the data without the official widths"
            )
    return dataclasses.replace(config, **widths)


def check_task_set(task_set: str, names) -> None:
    """``names`` (a dataset's tasks) must be exactly the official set ``task_set``'s; the error
    names the tasks missing from the dataset and those the set does not have."""
    if task_set not in TASK_SETS:
        raise ValueError(f"unknown task set {task_set!r}; known: {', '.join(TASK_SETS)}")
    want, have = TASK_SETS[task_set], set(names)
    missing = [t for t in want if t not in have]
    extra = sorted(have - set(want))
    if missing or extra:
        raise ValueError(
            f"the dataset does not hold task set {task_set}: missing {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''} ({len(missing)}), not in the set {extra}; "
            f"collect the missing tasks into it or drop --task-set"
        )
