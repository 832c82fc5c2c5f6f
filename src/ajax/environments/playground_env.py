"""MuJoCo Playground (``playground`` 0.2.0, imported as ``mujoco_playground``) in MJX.

Only the DeepMind Control Suite family is loaded. Two kinds of id are refused before
anything is built, with the reason:

- locomotion and manipulation envs: their ``load`` calls ``ensure_menagerie_exists``, which
  ``git clone``s mujoco_menagerie when it is missing; that hangs or fails without network, so
  they are refused unless the assets are already at ``mjx_env.MENAGERIE_PATH``.
- ReacherEasy / ReacherHard: playground 0.2.0's ``reacher.py`` chooses between
  ``MjSpec.body`` and ``MjSpec.find_body`` by comparing version *strings*
  (``"3.17.0" >= "3.3.0"`` is False), and mujoco 3.17 has no ``find_body``.

Envs are built with ``config_overrides={"impl": "jax"}`` by default: the default ``"warp"``
takes tens of seconds to build and is slow on CPU.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ajax.environments.core import SimEnv, StateEnvSimulator
from ajax.environments.types import Box, EnvSpec

DEFAULT_OVERRIDES = {"impl": "jax"}


def playground_suites() -> dict[str, tuple[str, ...]]:
    """Ids per playground suite: ``dm_control_suite``, ``locomotion``, ``manipulation``."""
    from mujoco_playground import dm_control_suite, locomotion, manipulation

    return {
        "dm_control_suite": tuple(dm_control_suite.ALL_ENVS),
        "locomotion": tuple(locomotion.ALL_ENVS),
        "manipulation": tuple(manipulation.ALL_ENVS),
    }


def _reacher_loads() -> bool:
    import mujoco

    # The same test reacher.py makes, string comparison included (see module docstring).
    return mujoco.__version__ >= "3.3.0" or hasattr(mujoco.MjSpec, "find_body")


def playground_blocker(name: str) -> str | None:
    """Why the playground env ``name`` cannot be loaded here, or None if it can.

    Checks the registry and the installed versions only: nothing is built or cloned.
    """
    from mujoco_playground._src import mjx_env

    suites = playground_suites()
    if name in suites["locomotion"] + suites["manipulation"]:
        if mjx_env.MENAGERIE_PATH.exists():
            return None
        return (
            f"playground env {name!r} needs the mujoco_menagerie assets, which playground "
            f"would `git clone` at load time (no network here); clone "
            f"https://github.com/deepmind/mujoco_menagerie at commit "
            f"{mjx_env.MENAGERIE_COMMIT_SHA} into {mjx_env.MENAGERIE_PATH} to use it"
        )
    if name in ("ReacherEasy", "ReacherHard") and not _reacher_loads():
        import mujoco

        task = "easy" if name == "ReacherEasy" else "hard"
        return (
            f"playground 0.2.0 cannot build {name!r} with mujoco {mujoco.__version__} "
            f"(its reacher.py compares version strings and calls the removed "
            f"MjSpec.find_body); use 'dmc:reacher-{task}' (dm_control on the host) instead"
        )
    if name not in suites["dm_control_suite"]:
        return f"{name!r} is not a playground env"
    return None


def _action_space(env: Any) -> Box:
    model = env.mj_model
    limited = model.actuator_ctrllimited.astype(bool)
    low = np.where(limited, model.actuator_ctrlrange[:, 0], -np.inf)
    high = np.where(limited, model.actuator_ctrlrange[:, 1], np.inf)
    return Box.from_arrays(low, high, (env.action_size,))


def make_playground(
    name: str,
    max_episode_steps: int | None = None,
    config_overrides: dict[str, Any] | None = None,
) -> SimEnv:
    """The playground env ``name`` as a :class:`SimEnv`; ``config_overrides`` win over
    the default ``{"impl": "jax"}``. The time limit is the config's ``episode_length``
    (1000 for the control suite) unless ``max_episode_steps`` is given."""
    reason = playground_blocker(name)
    if reason is not None:
        raise ValueError(reason)
    from mujoco_playground import registry

    overrides = {**DEFAULT_OVERRIDES, **(config_overrides or {})}
    try:
        env = registry.load(name, config_overrides=overrides)
    except Exception as error:  # report which env failed and with what, not a deep trace
        raise ValueError(
            f"playground failed to build {name!r} with overrides {overrides}: "
            f"{type(error).__name__}: {error}"
        ) from error
    obs = jax.eval_shape(env.reset, jax.random.key(0)).obs
    if not hasattr(obs, "shape"):
        raise ValueError(
            f"playground env {name!r} has dict observations {jax.tree.map(lambda x: x.shape, obs)}; "
            "only flat-array observations are supported"
        )
    episode_length = overrides.get(
        "episode_length", registry.get_default_config(name).episode_length
    )
    spec = EnvSpec(
        env_id=name,
        family="playground",
        observation_shape=(int(obs.size),),
        action_space=_action_space(env),
        max_episode_steps=max_episode_steps or int(episode_length),
        dt=float(env.dt),
    )
    return SimEnv(StateEnvSimulator(env), spec)
