"""brax (0.14.2) envs, ids ``brax:<name>``, as a :class:`~ajax.environments.core.Simulator`.

brax's own ``create`` adds an episode wrapper and an auto-reset that replays the *first*
state of the env slot; Ajax uses the raw ``get_environment`` and its own :class:`SimEnv`,
so every reset draws a fresh initial state. brax policies act in [-1, 1] (envs such as
inverted_pendulum rescale onto their actuator range themselves), so the action space is the
unit box. brax has no time limit of its own; ``create`` defaults to 1000 steps and so does
Ajax.
"""

from __future__ import annotations

import jax

from ajax.environments.core import SimEnv, StateEnvSimulator
from ajax.environments.types import Box, EnvSpec

# Fastest per simulated second on CPU for inverted_pendulum (numbers in the package docstring).
DEFAULT_BACKEND = "generalized"
BACKENDS = ("generalized", "positional", "spring", "mjx")
DEFAULT_EPISODE_STEPS = 1000


def brax_ids() -> tuple[str, ...]:
    """The names brax registers (importing ``brax.envs`` builds no env)."""
    from brax import envs

    # brax exposes its registry only as this module-level dict.
    return tuple(sorted(envs._envs))


def make_brax(
    name: str, max_episode_steps: int | None = None, backend: str | None = None
) -> SimEnv:
    """The brax env ``name`` on ``backend`` (default :data:`DEFAULT_BACKEND`)."""
    backend = backend or DEFAULT_BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"unknown brax backend {backend!r}; choose one of {BACKENDS}")
    from brax import envs

    env = envs.get_environment(name, backend=backend)
    obs = jax.eval_shape(env.reset, jax.random.key(0)).obs
    spec = EnvSpec(
        env_id=f"brax:{name}",
        family="brax",
        observation_shape=(int(obs.size),),
        action_space=Box((-1.0,) * env.action_size, (1.0,) * env.action_size),
        max_episode_steps=max_episode_steps or DEFAULT_EPISODE_STEPS,
        dt=float(env.dt),
    )
    return SimEnv(StateEnvSimulator(env), spec)
