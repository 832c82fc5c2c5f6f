"""``ajax eval``: deterministic evaluation of a run's newest checkpoint."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

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
    algo = make_algo(spec.agent, spec.env, config_from(spec.agent, spec.config))
    chunks = algo.make_chunks(spec.steps)
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(spec.seed, spec.seed + spec.n_seeds))
    template = jax.jit(jax.vmap(chunks.init))(keys)
    step, state = restore_newest_good(ckpt, template, move_damaged=False, warn=warn)
    if step is None:
        raise FileNotFoundError(f"{out} has no good checkpoint to evaluate ('ajax check {out}')")
    policy = algo.policy()

    @jax.jit
    @jax.vmap
    def run(agent_state, env_state, key):
        return evaluate(algo.eval_env, policy, agent_state, key, episodes, env_state)

    eval_keys = jax.vmap(lambda k: jax.random.fold_in(k, 12345))(keys)
    env_state = getattr(state, "env_state", None)  # the training env's: its obs moments
    return np.asarray(run(state.agent, env_state, eval_keys)).tolist()
