"""``ajax eval``: deterministic evaluation of a run's newest checkpoint."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ajax.environments import make_env
from ajax.training.checkpoint import latest_step, restore_newest_good
from ajax.training.loop import evaluate


def evaluate_run(out: Path, episodes: int, make_algo, config_from) -> list[float]:
    """Mean return of ``episodes`` deterministic episodes per seed of the run in ``out``."""
    from ajax.training.run import check_identity, load_spec, warn

    spec = load_spec(out)
    ckpt = out / "checkpoints"
    if latest_step(ckpt) is None:
        raise FileNotFoundError(f"{out} has no checkpoint to evaluate yet")
    check_identity(spec, ckpt, ignore_version=True)
    algo = make_algo(spec.agent, spec.env, config_from(spec.agent, spec.config), spec.env_options)
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(spec.seed, spec.seed + spec.n_seeds))
    eval_keys = jax.vmap(lambda k: jax.random.fold_in(k, 12345))(keys)
    if not algo.is_jax:
        return _evaluate_host(algo, spec, ckpt, episodes, eval_keys)
    chunks = algo.make_chunks(spec.steps)
    template = jax.jit(jax.vmap(chunks.init))(keys)
    step, state = restore_newest_good(ckpt, template, move_damaged=False, warn=warn)
    if step is None:
        raise FileNotFoundError(f"{out} has no good checkpoint to evaluate ('ajax check {out}')")
    policy = algo.policy()

    @jax.jit
    @jax.vmap
    def run(agent_state, env_state, key):
        return evaluate(algo.eval_env, policy, agent_state, key, episodes, env_state)

    env_state = getattr(state, "env_state", None)  # the training env's: its obs moments
    return np.asarray(run(state.agent, env_state, eval_keys)).tolist()


def _evaluate_host(algo, spec, ckpt: Path, episodes: int, keys) -> list[float]:
    """:func:`evaluate_run` on a host env: the run's learner restored into a fresh
    :meth:`~ajax.training.algorithm.Algorithm.host_run`, one episode on each of ``episodes``
    simulators per seed (:func:`~ajax.training.host_loop.host_evaluate`). Host runs keep no
    observation moments in their checkpoints, so a ``normalize_obs`` run evaluates with fresh
    ones."""
    from ajax.training.host_loop import host_evaluate
    from ajax.training.run import warn

    seeds = list(range(spec.seed, spec.seed + spec.n_seeds))
    run = algo.host_run(spec.steps, seeds)
    step, state = restore_newest_good(ckpt, run.state, move_damaged=False, warn=warn)
    if step is None:
        raise FileNotFoundError(f"{ckpt.parent} has no good checkpoint to evaluate")
    eval_env = make_env(algo.env_id, n_envs=episodes, **algo.env_options)
    try:
        returns = host_evaluate(eval_env, run.policy, run._act, state.agent, keys, len(seeds))
    finally:
        eval_env.close()
        run.close()
    return returns.tolist()
