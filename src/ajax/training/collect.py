"""``ajax collect``: a trained run's experience or policy writes whole episodes into a dataset.

The episodes are what offline agents (multi-task TD-MPC2) train on, in the format of
:mod:`ajax.buffers.dataset`. Two sources:

- ``--replay`` (:func:`replay_episodes`): the run's own replay buffer, cut into its episodes:
  everything the run saw, from its random first steps to its last policy. This is how the
  official TD-MPC2 datasets were made (the replay buffers of single-task runs).
- the policy (:func:`collect_episodes`): episode i of E acts with Gaussian noise of std
  ``noise * i / (E - 1)`` added to the deterministic policy's action (clipped to [-1, 1]), so
  the data runs from the policy itself to a noisy version of it: expert-only data would show
  the critic none of the actions the planner tries.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ajax.buffers.dataset import DatasetError, Episodes, TaskMeta, write_task
from ajax.training.types import Policy, Transition
from ajax.training.unroll import unroll


def collect_episodes(env, policy: Policy, agent_state, key, episodes: int, noise: float):
    """``episodes`` parallel episodes of ``policy`` on the JAX ``env`` (one seed's state), each
    cut at its first end or at ``max_episode_steps``: :class:`Episodes` of device arrays."""
    length = env.spec.max_episode_steps
    if length is None:
        raise DatasetError(f"{env.spec.env_id} has no time limit: episodes need one to be stored")
    if env.spec.discrete:
        raise DatasetError(f"{env.spec.env_id} has discrete actions; the datasets are continuous")
    sigma = noise * jnp.arange(episodes, dtype=jnp.float32) / max(episodes - 1, 1)

    def perturb(action, k):
        return jnp.clip(action + sigma[:, None] * jax.random.normal(k, action.shape), -1, 1)

    def observe(acc, step):
        live, out = step.alive.astype(jnp.float32), step.out
        row = dict(obs=step.tick.obs, action=step.action * live[:, None],
                   reward=out.reward * live, terminated=out.terminated & step.alive,
                   next_obs=out.final_obs * live[:, None], alive=step.alive)  # fmt: skip
        return acc, row

    _, rows = unroll(env, policy, agent_state, key, episodes, length, observe, perturb=perturb)
    rows = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), rows)  # [E, L, ...]
    # o_{t+1} is the observation step t reached: within an episode the next row's obs; rows
    # past an episode's end are zero (next_obs is masked by alive)
    obs = jnp.concatenate([rows["obs"][:, :1], rows["next_obs"]], axis=1)
    return Episodes(
        obs=obs,
        action=rows["action"],
        reward=rows["reward"],
        terminated=rows["terminated"],
        length=jnp.sum(rows["alive"], axis=1).astype(jnp.int32),
    )


def replay_episodes(experience, count: int, full: bool, n_envs: int) -> Episodes:
    """The episodes in a transition replay (numpy): ``experience`` holds ``obs``, ``action``,
    ``reward``, ``terminated`` and ``next_obs`` rows [M, ...] in the order
    :mod:`ajax.training.off_policy` adds them (each vector step's ``n_envs`` rows together);
    ``count`` rows are filled, the oldest at ``count % M`` once ``full``.

    Each env's rows are cut where an episode ended: on termination, or where the next row
    does not start from this row's arrival state (the env reset: a time limit). The newest,
    unfinished episode of each env is kept as far as it goes; a ring that wrapped starts with
    a partial one.
    """
    rows = {k: np.asarray(v) for k, v in experience.items()}
    m = rows["obs"].shape[0]
    if full:
        rows = {k: np.roll(v, -(count % m), axis=0) for k, v in rows.items()}
    else:
        rows = {k: v[:count] for k, v in rows.items()}
    episodes = []
    for e in range(n_envs):
        env = {k: v[e::n_envs] for k, v in rows.items()}
        n = env["obs"].shape[0]
        if n == 0:
            continue
        ends = np.asarray(env["terminated"], bool).reshape(n).copy()
        ends[:-1] |= np.any(env["next_obs"][:-1] != env["obs"][1:], axis=-1)
        ends[-1] = True
        start = 0
        for stop in np.flatnonzero(ends) + 1:
            episodes.append({k: v[start:stop] for k, v in env.items()})
            start = stop
    if not episodes:
        raise DatasetError("the run's replay holds no transitions yet")
    steps = max(len(ep["reward"]) for ep in episodes)
    out = Episodes(
        obs=np.zeros((len(episodes), steps + 1, rows["obs"].shape[-1]), np.float32),
        action=np.zeros((len(episodes), steps, rows["action"].shape[-1]), np.float32),
        reward=np.zeros((len(episodes), steps), np.float32),
        terminated=np.zeros((len(episodes), steps), bool),
        length=np.asarray([len(ep["reward"]) for ep in episodes], np.int32),
    )
    for i, ep in enumerate(episodes):
        n = len(ep["reward"])
        out.obs[i, :n] = ep["obs"]
        out.obs[i, n] = ep["next_obs"][-1]
        out.action[i, :n] = ep["action"]
        out.reward[i, :n] = ep["reward"].reshape(n)
        out.terminated[i, :n] = np.asarray(ep["terminated"], bool).reshape(n)
    return out


def run_replay(run) -> Episodes:
    """The first seed's replay of the restored off-policy ``run``, as episodes."""
    replay = getattr(run.state, "replay", None)
    experience = getattr(replay, "experience", None)
    if not isinstance(experience, Transition):
        raise DatasetError(
            f"a {run.spec.agent} run keeps no transition replay to export; drop --replay to "
            "collect episodes of its policy"
        )
    first = jax.tree.map(lambda x: np.asarray(x[0]), replay)
    rows = {k: v[0] for k, v in first.experience._asdict().items()}  # flat buffer: batch 1
    return replay_episodes(rows, int(first.current_index), bool(first.is_full),
                           run.algo.config.n_envs)  # fmt: skip


def collect_run(
    run, run_dir: Path, out: Path, task: str, episodes: int, noise: float, seed: int,
    replay: bool = False,
) -> TaskMeta:  # fmt: skip
    """Write ``episodes`` episodes of the first seed of the run restored from ``run_dir``
    (``evaluation.Restored``), or with ``replay`` its whole replay, into the dataset at ``out``
    as task ``task``; returns what ``dataset.json`` records."""
    algo, spec = run.algo, run.spec
    if not algo.is_jax:
        raise DatasetError(f"collect runs on JAX envs; {spec.env!r} is a host env")
    env = algo.eval_env
    if env.spec.discrete:
        raise DatasetError(f"{env.spec.env_id} has discrete actions; the datasets are continuous")
    if replay:
        eps = run_replay(run)
        source = {"replay": True}
    else:
        agent = jax.tree.map(lambda x: x[0], run.state.agent)
        fn = algo.jit(lambda a, k: collect_episodes(env, algo.policy(), a, k, episodes, noise))
        eps = Episodes(*(np.asarray(x) for x in fn(agent, jax.random.PRNGKey(seed))))
        source = {"noise": noise, "seed": seed, "return_noiseless": float(eps.reward[0].sum())}
    returns = eps.reward.sum(axis=1)
    meta = TaskMeta(
        name=task,
        env=spec.env,
        obs_dim=int(eps.obs.shape[-1]),
        action_dim=int(eps.action.shape[-1]),
        episode_length=int(eps.action.shape[1]),
        episodes=int(eps.obs.shape[0]),
        env_options=dict(spec.env_options),
        action_repeat=int(getattr(algo.config, "action_repeat", 1)),
        source={
            "run": str(Path(run_dir).resolve()),
            "agent": spec.agent,
            **source,
            "return_mean": float(returns.mean()),
        },
    )
    write_task(out, meta, eps)
    return meta
