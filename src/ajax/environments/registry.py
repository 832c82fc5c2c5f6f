"""Env ids, families and :func:`make_env`: one entry point for every simulator.

Ids: a bare gymnax id (``Pendulum-v1``), a bare playground DM Control Suite id
(``CartpoleSwingup``, also ``playground:CartpoleSwingup``), ``brax:<name>``,
``gymnasium:<id>``, ``dmc:<domain>-<task>`` (``gymnax:<id>`` also works).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
from collections.abc import Callable
from typing import Any

import jax

from ajax.environments.core import SimEnv
from ajax.environments.expert_action import ExpertActionWrapper
from ajax.environments.host import make_dmc, make_gymnasium
from ajax.environments.host_wrappers import (
    HostFrameStack,
    HostNormalizeObservation,
    HostRescaleAction,
)
from ajax.environments.image_wrappers import FrameStack, GrayscaleImage, ResizeImage
from ajax.environments.normalize import NormalizeObservation
from ajax.environments.pid_terms import PIDTermsWrapper
from ajax.environments.types import HostEnv, JaxEnv
from ajax.environments.wrappers import ActionRepeat, EpisodeStatistics, RescaleAction
from ajax.validation import (
    ConfigError,
    Rule,
    Validated,
    at_least,
    field_error,
    require,
)

FAMILIES = ("gymnax", "playground", "brax", "craftax", "gymnasium", "dmc", "atari")
HOST_FAMILIES = ("gymnasium", "dmc", "atari")
_MODULES = {
    "gymnax": "gymnax",
    "playground": "mujoco_playground",
    "brax": "brax.envs",
    "craftax": "craftax.craftax_env",
    "gymnasium": "gymnasium",
    "dmc": "dm_control.suite",
    "atari": "ale_py",
}
_FORMATS = {
    "gymnax": "gymnax (bare id, e.g. 'Pendulum-v1')",
    "playground": "playground (bare DM Control Suite id or 'playground:<Name>', e.g. 'CartpoleSwingup')",
    "brax": "brax:<name> (e.g. 'brax:inverted_pendulum')",
    "craftax": "craftax:<id> (e.g. 'craftax:Craftax-Classic-Pixels-v1')",
    "gymnasium": "gymnasium:<id> (host, e.g. 'gymnasium:Pendulum-v1')",
    "dmc": "dmc:<domain>-<task> (host, e.g. 'dmc:cartpole-swingup')",
    "atari": "atari:<Game> (host, ALE, e.g. 'atari:Pong')",
}


@dataclasses.dataclass(frozen=True)
class EnvConfig(Validated):
    """Options of :func:`make_env` (its keyword arguments).

    Attributes:
      n_envs: vectorise over this many envs (a leading axis on every TimeStep field);
        ``None``: one unbatched JAX env, or one host env.
      action_repeat: repeat each action this many times, rewards summed, stopping at the
        episode's end; the time limit is then counted in agent steps.
      rescale_actions: the agent acts in [-1, 1], mapped onto the env box (Box envs only).
        Leave False when the agent maps actions itself with ``agent_action_to_env``.
      normalize_obs: running-moment observation normalisation shared by all envs.
      episode_stats: add ``episode_return``/``episode_length``/``episode_done`` to ``info``
        (host envs always do).
      max_episode_steps: time limit in simulator steps (truncation); default: the family's.
      pid_error_fn: prepend the PID error terms of this function of the raw observation
        (:class:`~ajax.environments.pid_terms.PIDTermsWrapper`; JAX envs only).
      pid_dt: the PID terms' step duration; default: the spec's ``dt``.
      expert_action_fn: prepend this expert's action (agent units) for each raw observation
        (:class:`~ajax.environments.expert_action.ExpertActionWrapper`; JAX envs only).
      resize: image envs: resize the images to (height, width)
        (:class:`~ajax.environments.image_wrappers.ResizeImage`).
      grayscale: image envs: RGB to one luma channel (atari: DreamerV3's weights, truncated).
      frame_stack: image envs: stack the last k frames on the channel axis (1: none).
      pixels: dmc only: 64 x 64 RGB camera images as the observation (``image_shape`` set).
      proprio: dmc with ``pixels`` only: the task's state features after the image (a mixed
        observation, ``spec.vector_dim`` of them; DreamerV3 reads both).
      atari_settings: atari only: DreamerV3's env block, "atari" (the default: 96 x 96 gray,
        sticky actions, 18 actions) or "atari100k" (64 x 64 RGB, not sticky, the minimal action
        set); :mod:`ajax.environments.atari`.
      backend: brax only: the physics pipeline (default ``generalized``).
      config_overrides: playground only: merged over ``{"impl": "jax"}``.
    """

    n_envs: int | None = None
    action_repeat: int = 1
    rescale_actions: bool = False
    normalize_obs: bool = False
    episode_stats: bool = True
    max_episode_steps: int | None = None
    pid_error_fn: Callable[[jax.Array], jax.Array] | None = None
    pid_dt: float | None = None
    expert_action_fn: Callable[[jax.Array], jax.Array] | None = None
    resize: tuple[int, int] | None = None
    grayscale: bool = False
    frame_stack: int = 1
    pixels: bool = False
    proprio: bool = False
    atari_settings: str | None = None
    backend: str | None = None
    config_overrides: dict[str, Any] | None = None

    ARGUMENT = "make_env(..., {field}=...)"
    RULES = {
        "n_envs": at_least(1, optional=True),
        "max_episode_steps": at_least(1, optional=True),
        "atari_settings": Rule(choices=("atari", "atari100k"), optional=True),
    }

    def relations(self) -> None:
        super().relations()
        require(
            self,
            not self.proprio or self.pixels,
            "proprio",
            "False without pixels=True",
            "proprio= adds the state features to rendered images: add pixels= (dmc ids), "
            "or drop proprio (without pixels the observation is the state already)",
        )
        require(
            self,
            self.pid_dt is None or self.pid_error_fn is not None,
            "pid_dt",
            "None without pid_error_fn=",
            "pid_dt= needs pid_error_fn=: add it, or drop pid_dt",
        )

    def _refuse(self, field: str, requirement: str, fix: str) -> ConfigError:
        return field_error("EnvConfig", field, getattr(self, field), requirement, fix,
                           argument=self.ARGUMENT)  # fmt: skip

    def check(self, family: str) -> None:
        """Reject options the family cannot take."""
        if self.backend is not None and family != "brax":
            raise self._refuse(
                "backend",
                f"None for {family} envs: backend= is a brax option",
                "drop backend=, or use a brax:<name> id",
            )
        if self.config_overrides is not None and family != "playground":
            raise self._refuse(
                "config_overrides",
                f"None for {family} envs: config_overrides= is a playground option",
                "drop config_overrides=, or use a playground id",
            )
        for fn in ("pid_error_fn", "expert_action_fn"):
            if getattr(self, fn) is not None and family in HOST_FAMILIES:
                raise self._refuse(
                    fn,
                    f"None for {family} envs: {fn}= needs a JAX env; host envs do not support it",
                    f"drop {fn}=, or use a JAX env id (gymnax, playground, brax)",
                )
        if (self.resize is not None or (self.grayscale and family != "atari")) and (
            family in HOST_FAMILIES
        ):
            raise self._refuse(
                "resize" if self.resize is not None else "grayscale",
                f"unset for {family} envs: resize= and grayscale= apply to JAX image envs (e.g. "
                "Breakout-MinAtar)",
                "host envs render 64 x 64 RGB (pixels=True) and take only frame_stack=: drop them",
            )
        if self.action_repeat != 1 and family == "atari":
            raise self._refuse(
                "action_repeat",
                "1 for atari envs: they already play 4 frames per step (DreamerV3's setting)",
                "drop action_repeat",
            )
        if self.pixels and family != "dmc":
            raise self._refuse(
                "pixels",
                f"False for {family} envs: pixels= renders dm_control cameras "
                f"(dmc:<domain>-<task>) and {family} envs have no renderer here",
                "drop it (MinAtar ids already give images)",
            )
        if self.atari_settings is not None and family != "atari":
            raise self._refuse(
                "atari_settings",
                f"None for {family} envs",
                f"atari_settings={self.atari_settings!r} picks DreamerV3's Atari env block: "
                "'atari' or 'atari100k', on atari:<Game> ids only",
            )


@functools.cache
def family_import_error(family: str) -> str | None:
    """None if the family's simulator imports here, else the import error (cached)."""
    try:
        importlib.import_module(_MODULES[family])
    except Exception as error:  # any failure makes the family unavailable, with the reason
        return f"{type(error).__name__}: {error}"
    return None


def family_ids(family: str) -> tuple[str, ...]:
    """Every id of an available family, as :func:`make_env` accepts it (no env is built)."""
    if family == "gymnax":
        from ajax.environments.gymnax_env import gymnax_ids

        return gymnax_ids()
    if family == "playground":
        from ajax.environments.playground_env import playground_suites

        return sum(playground_suites().values(), ())
    if family == "brax":
        from ajax.environments.brax_env import brax_ids

        return tuple(f"brax:{name}" for name in brax_ids())
    if family == "craftax":
        from ajax.environments.craftax_env import CRAFTAX_IDS

        return tuple(f"craftax:{name}" for name in CRAFTAX_IDS)
    if family == "gymnasium":
        import gymnasium

        return tuple(f"gymnasium:{name}" for name in gymnasium.registry)
    if family == "dmc":
        from dm_control import suite

        return tuple(f"dmc:{domain}-{task}" for domain, task in suite.ALL_TASKS)
    if family == "atari":
        from ajax.environments.atari import atari_ids

        return atari_ids()
    raise ValueError(f"unknown family {family!r}; families: {FAMILIES}")


def _known_ids(families=FAMILIES) -> tuple[str, ...]:
    return sum((family_ids(f) for f in families if family_import_error(f) is None), ())


def unknown_env_error(env_id: str, families=FAMILIES) -> ValueError:
    """The error for an id no family knows: closest known ids and the id formats."""
    known = _known_ids(families)
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(env_id.lower(), list(by_lower), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(by_lower[c]) for c in close)}?" if close else ";"
    formats = ", ".join(
        _FORMATS[f] + ("" if family_import_error(f) is None else " [not installed]")
        for f in FAMILIES
    )
    return ValueError(f"unknown env id {env_id!r}{hint} families: {formats}")


def resolve_env_id(env_id: str) -> tuple[str, str]:
    """``(family, name)`` of an id, or ValueError naming the closest known ids."""
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}")
    prefix, sep, name = env_id.partition(":")
    if sep:
        if prefix not in FAMILIES:
            raise unknown_env_error(env_id)
        error = family_import_error(prefix)
        if error is not None:
            raise ValueError(f"{env_id!r}: the {prefix} family is not available here ({error})")
        if env_id not in family_ids(prefix) and name not in family_ids(prefix):
            raise unknown_env_error(env_id, (prefix,))
        return prefix, name
    for family in ("gymnax", "playground"):
        if family_import_error(family) is None and env_id in family_ids(family):
            return family, env_id
    raise unknown_env_error(env_id)


def make_env(env_id: str, **options: Any) -> JaxEnv | HostEnv:
    """Build the env ``env_id`` with the :class:`EnvConfig` ``options``.

    Returns a :class:`~ajax.environments.types.JaxEnv` (gymnax, playground, brax) or a
    :class:`~ajax.environments.types.HostEnv` (gymnasium, dmc); tell them apart with
    :func:`~ajax.environments.types.is_jax_env`. Unknown ids, unknown options and options
    the family cannot take raise ValueError (bad options a :class:`~ajax.validation.ConfigError`
    naming the option).
    """
    fields = {f.name for f in dataclasses.fields(EnvConfig)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ValueError(f"unknown make_env options {unknown}; valid options: {sorted(fields)}")
    config = EnvConfig(**options)
    family, name = resolve_env_id(env_id)
    config.check(family)
    if family in HOST_FAMILIES:
        return _make_host(family, name, config)
    env = _make_base(family, name, config)
    if config.n_envs is not None:
        env = env.batched(config.n_envs)
    if config.action_repeat != 1:
        env = ActionRepeat(env, config.action_repeat)
    if config.resize is not None:
        env = ResizeImage(env, config.resize)
    if config.grayscale:
        env = GrayscaleImage(env)
    if config.frame_stack != 1:
        env = FrameStack(env, config.frame_stack)
    if config.pid_error_fn is not None:
        env = PIDTermsWrapper(env, config.pid_error_fn, config.pid_dt)
    if config.expert_action_fn is not None:
        env = ExpertActionWrapper(env, config.expert_action_fn)
    if config.episode_stats:
        env = EpisodeStatistics(env)
    if config.rescale_actions:
        env = RescaleAction(env)
    if config.normalize_obs:
        env = NormalizeObservation(env)
    return env


def _make_base(family: str, name: str, config: EnvConfig) -> SimEnv:
    limit = config.max_episode_steps
    if family == "gymnax":
        from ajax.environments.gymnax_env import make_gymnax

        return make_gymnax(name, limit)
    if family == "playground":
        from ajax.environments.playground_env import make_playground

        return make_playground(name, limit, config.config_overrides)
    if family == "craftax":
        from ajax.environments.craftax_env import make_craftax

        return make_craftax(name, limit)
    from ajax.environments.brax_env import make_brax

    return make_brax(name, limit, config.backend)


def _make_host(family: str, name: str, config: EnvConfig) -> HostEnv:
    n, repeat, limit = config.n_envs or 1, config.action_repeat, config.max_episode_steps
    if family == "gymnasium":
        env: HostEnv = make_gymnasium(name, n, repeat, limit)
    elif family == "atari":
        from ajax.environments.atari import make_atari

        env = make_atari(name, n, limit, config.grayscale, config.atari_settings)
    else:
        domain, _, task = name.partition("-")
        env = make_dmc(domain, task, n, repeat, limit, config.pixels, config.proprio)
    if config.frame_stack != 1:
        env = HostFrameStack(env, config.frame_stack)
    if config.rescale_actions:
        env = HostRescaleAction(env)
    if config.normalize_obs:
        env = HostNormalizeObservation(env)
    return env
