"""Environments: one factory, one typed interface, for JAX and host simulators.

``make_env(env_id, **options)`` returns a single env object (no separate params):

- a :class:`JaxEnv` for gymnax (bare ids: ``Pendulum-v1``, ``CartPole-v1``, ...), MuJoCo
  Playground's DM Control Suite in MJX (bare ids: ``CartpoleSwingup``, ``WalkerWalk``, ...)
  and brax (``brax:inverted_pendulum``);
- a :class:`HostEnv` for gymnasium (``gymnasium:Pendulum-v1``) and dm_control on native
  MuJoCo (``dmc:cartpole-swingup``), vectorised over ``n_envs`` in Python.

``is_jax_env(env)`` (or ``env.is_jax``) tells the training loop which path to take. Both kinds
return a :class:`TimeStep` (``state, obs, reward, terminated, truncated, final_obs, info``)::

    env = make_env("Pendulum-v1", n_envs=8, rescale_actions=True)
    ts = jax.jit(env.reset)(key)                      # JaxEnv: pure, jit/vmap/scan it
    ts = jax.jit(env.step)(key, ts.state, action)     # action: (8, 1) in [-1, 1]
    transition = (obs, action, ts.reward, ts.terminated, ts.final_obs)

    host = make_env("dmc:cartpole-swingup", n_envs=4)  # HostEnv: numpy in, numpy out
    ts = host.reset(seed=0); ts = host.step(np.zeros((4, 1)))

Contract (all families): flat float32 observations ``(obs_dim,)``; ``terminated`` (a terminal
state) is kept apart from ``truncated`` (the time limit, counted by Ajax in agent steps);
auto-reset on either, with ``obs`` the next episode's first observation and ``final_obs`` the
one actually reached; ``info`` has the same keys after reset and step. ``env.spec``
(:class:`EnvSpec`) gives the observation shape, the action space (:class:`Box` with low/high
or :class:`Discrete` with n), the time limit, ``dt`` and ``n_envs``.

Wrappers (each a small class, composed by ``make_env`` in this order, innermost first, over
a base :class:`SimEnv` batched over ``n_envs``): ``ActionRepeat`` -> ``PIDTermsWrapper`` ->
``EpisodeStatistics`` -> ``RescaleAction`` -> ``NormalizeObservation``. ``VmapEnv``
vectorises any other unbatched env. Host envs get ``HostRescaleAction`` and
``HostNormalizeObservation`` and always report episode statistics. ``list_envs()`` lists the
ids of each family and whether it is available here, building no env.

Family notes and measurements (2-core CPU machine shared with other jobs, n_envs=16, JAX
envs in one jitted ``lax.scan``, best of 3; compile times in CPU seconds):

- gymnax: import+make_env 3 s; Pendulum-v1 1.3M env-steps/s, CartPole-v1 0.5M; compiles
  in 1-3 s. Trajectories equal gymnax 1.0.1's own ``step`` (tested).
- playground (DM Control Suite, MJX): built with ``config_overrides={"impl": "jax"}``;
  CartpoleSwingup import+load 12 s, reset compile 26 s, step compile 42 s, 110k env-steps/s
  (raw playground ``step`` without auto-reset/time limit: 1.5x faster per step).
  ReacherEasy/ReacherHard (broken in playground 0.2.0 with mujoco 3.17) and
  locomotion/manipulation ids (would ``git clone`` mujoco_menagerie) raise a ValueError
  naming the cause, before anything is built.
- brax: ``generalized`` by default. inverted_pendulum: generalized 14.1k env-steps/s (step
  compile 29 s, 0.04 s per step), spring 18.2k (27 s, 0.02 s per step), positional 13.7k
  (44 s, 0.02 s). spring is 1.3x faster per step but each of its steps covers half the
  simulated time and its physics is the crudest, so generalized is fastest per simulated
  second and is the env's own default.
- host: gymnasium Pendulum-v1 5.6k env-steps/s, dm_control cartpole-swingup 1.1k.
"""

from ajax.environments.core import EnvState, SimEnv, SimStep, Simulator
from ajax.environments.host import HostVecEnv
from ajax.environments.host_wrappers import HostNormalizeObservation, HostRescaleAction
from ajax.environments.listing import FamilyInfo, format_env_listing, list_envs
from ajax.environments.normalize import NormalizeObservation, ObsMoments, obs_moments
from ajax.environments.pid_terms import PIDTermsWrapper
from ajax.environments.registry import FAMILIES, EnvConfig, make_env, resolve_env_id
from ajax.environments.types import (
    Box,
    Discrete,
    EnvSpec,
    HostEnv,
    JaxEnv,
    TimeStep,
    Wrapper,
    is_jax_env,
)
from ajax.environments.utils import agent_action_to_env, env_action_to_agent
from ajax.environments.wrappers import ActionRepeat, EpisodeStatistics, RescaleAction, VmapEnv

__all__ = [
    "FAMILIES",
    "ActionRepeat",
    "Box",
    "Discrete",
    "EnvConfig",
    "EnvSpec",
    "EnvState",
    "EpisodeStatistics",
    "FamilyInfo",
    "HostEnv",
    "HostNormalizeObservation",
    "HostRescaleAction",
    "HostVecEnv",
    "JaxEnv",
    "NormalizeObservation",
    "ObsMoments",
    "PIDTermsWrapper",
    "RescaleAction",
    "SimEnv",
    "SimStep",
    "Simulator",
    "TimeStep",
    "VmapEnv",
    "Wrapper",
    "agent_action_to_env",
    "env_action_to_agent",
    "format_env_listing",
    "is_jax_env",
    "list_envs",
    "make_env",
    "obs_moments",
    "resolve_env_id",
]
