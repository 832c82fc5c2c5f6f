"""``ajax collect``: a trained run's policy writes whole episodes into an offline dataset.

The episodes are what offline agents (multi-task TD-MPC2) train on, in the format of
:mod:`ajax.buffers.dataset`. Episode i of E acts with Gaussian noise of std
``noise * i / (E - 1)`` added to the deterministic policy's action (clipped to [-1, 1]), so the
data runs from the policy itself to a noisy version of it: expert-only data would show the
critic none of the actions the planner tries.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ajax.buffers.dataset import DatasetError, Episodes, TaskMeta, write_task
from ajax.training.loop import Policy, Tick
from ajax.training.rollout import to_env_action


def collect_episodes(env, policy: Policy, agent_state, key, episodes: int, noise: float):
    """``episodes`` parallel episodes of ``policy`` on the JAX ``env`` (one seed's state), each
    cut at its first end or at ``max_episode_steps``: :class:`Episodes` of device arrays."""
    length = env.spec.max_episode_steps
    if length is None:
        raise DatasetError(f"{env.spec.env_id} has no time limit: episodes need one to be stored")
    if env.spec.discrete:
        raise DatasetError(f"{env.spec.env_id} has discrete actions; the datasets are continuous")
    k_reset, k_run = jax.random.split(key)
    ts = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
    sigma = noise * jnp.arange(episodes, dtype=jnp.float32) / max(episodes - 1, 1)

    def step(c, k):
        tick, carry, env_state, alive = c
        k_act, k_noise, k_env = jax.random.split(k, 3)
        action, carry = policy.act(agent_state, carry, tick, k_act, True)
        action = jnp.clip(action + sigma[:, None] * jax.random.normal(k_noise, action.shape), -1, 1)
        out = jax.vmap(env.step)(
            jax.random.split(k_env, episodes), env_state, to_env_action(env, action)
        )
        live = alive.astype(jnp.float32)
        row = dict(obs=tick.obs, action=action * live[:, None], reward=out.reward * live,
                   terminated=out.terminated & alive, next_obs=out.final_obs * live[:, None],
                   alive=alive)  # fmt: skip
        return (Tick.of(out), carry, out.state, alive & ~out.done), row

    c = (Tick.reset(ts), policy.init(episodes), ts.state, jnp.ones((episodes,), bool))
    _, rows = jax.lax.scan(step, c, jax.random.split(k_run, length))
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


def collect_run(
    run, run_dir: Path, out: Path, task: str, episodes: int, noise: float, seed: int
) -> TaskMeta:
    """Write ``episodes`` episodes of the first seed of the run restored from ``run_dir``
    (``evaluation.Restored``) into the dataset at ``out`` as task ``task``; returns what
    ``dataset.json`` records."""
    algo, spec = run.algo, run.spec
    if not algo.is_jax:
        raise DatasetError(f"collect runs on JAX envs; {spec.env!r} is a host env")
    agent = jax.tree.map(lambda x: x[0], run.state.agent)
    env = algo.eval_env
    fn = jax.jit(lambda a, k: collect_episodes(env, algo.policy(), a, k, episodes, noise))
    eps = Episodes(*(np.asarray(x) for x in fn(agent, jax.random.PRNGKey(seed))))
    returns = eps.reward.sum(axis=1)
    meta = TaskMeta(
        name=task,
        env=spec.env,
        obs_dim=int(eps.obs.shape[-1]),
        action_dim=int(eps.action.shape[-1]),
        episode_length=int(eps.action.shape[1]),
        episodes=episodes,
        env_options=dict(spec.env_options),
        action_repeat=int(getattr(algo.config, "action_repeat", 1)),
        source={
            "run": str(Path(run_dir).resolve()),
            "agent": spec.agent,
            "noise": noise,
            "seed": seed,
            "return_mean": float(returns.mean()),
            "return_noiseless": float(returns[0]),
        },  # fmt: skip
    )
    write_task(out, meta, eps)
    return meta
