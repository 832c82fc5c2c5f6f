"""``ajax eval``: deterministic evaluation of a run's newest checkpoint (and its video)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from ajax.environments import make_env
from ajax.training import driver
from ajax.training.checkpoint import latest_step


class Restored(NamedTuple):
    """A run rebuilt from ``run.json`` with its newest good checkpoint (leading seed axis)."""

    spec: Any
    algo: Any
    state: Any
    host_run: Any  # the HostRun the state was restored into (host envs), else None


def restore_run(out: Path, make_algo, config_from) -> Restored:
    """The run in ``out`` and its newest good checkpoint (FileNotFoundError if none), rebuilt
    by the run driver (:func:`~ajax.training.driver.start`, :func:`~ajax.training.driver.restore`)
    on one device; nothing in ``out`` is moved or cut."""
    from ajax.training.run import warn
    from ajax.training.run_dir import check_identity, load_spec

    spec = load_spec(out)
    ckpt = out / "checkpoints"
    if latest_step(ckpt) is None:
        raise FileNotFoundError(f"{out} has no checkpoint to evaluate yet")
    check_identity(spec, ckpt, ignore_version=True)
    algo = make_algo(spec.agent, spec.env, config_from(spec.agent, spec.config), spec.env_options)
    plan = driver.plan(algo, spec.steps, spec.seed, spec.n_seeds)
    start = driver.start(algo, spec.steps, plan)
    step, start = driver.restore(ckpt, start, plan, move_damaged=False, warn=warn)
    if step is None:
        if start.host is not None:
            start.host.close()
        raise FileNotFoundError(f"{out} has no good checkpoint to evaluate ('ajax check {out}')")
    return Restored(spec, algo, start.state, start.host)


def _eval_keys(spec) -> jax.Array:
    keys = driver.seed_keys(range(spec.seed, spec.seed + spec.n_seeds))
    return jax.vmap(lambda k: jax.random.fold_in(k, 12345))(keys)


def evaluate_run(out: Path, episodes: int, make_algo, config_from) -> list[float]:
    """Mean return of ``episodes`` deterministic episodes per seed of the run in ``out``."""
    run = restore_run(out, make_algo, config_from)
    if run.host_run is not None:
        return _evaluate_host(run, episodes)
    algo = run.algo

    @algo.jit  # rounds as the run did
    @jax.vmap
    def evaluate_seed(agent_state, env_state, key):
        return algo.evaluate(agent_state, env_state, key, episodes)

    env_state = getattr(run.state, "env_state", None)  # the training env's: its obs moments
    return np.asarray(evaluate_seed(run.state.agent, env_state, _eval_keys(run.spec))).tolist()


def _evaluate_host(run: Restored, episodes: int) -> list[float]:
    """:func:`evaluate_run` on a host env: one episode on each of ``episodes`` simulators per
    seed (:func:`~ajax.training.host_loop.host_evaluate`). Host runs keep no observation
    moments in their checkpoints, so a ``normalize_obs`` run evaluates with fresh ones."""
    from ajax.training.host_loop import host_evaluate

    algo, host = run.algo, run.host_run
    eval_env = make_env(algo.env_id, n_envs=episodes, **algo.env_options)
    try:
        returns = host_evaluate(eval_env, host.policy, host._act, run.state.agent,
                                _eval_keys(run.spec), run.spec.n_seeds)  # fmt: skip
    finally:
        eval_env.close()
        host.close()
    return returns.tolist()


def record_video(out: Path, make_algo, config_from, max_frames: int = 500) -> Path:
    """``out/eval.gif``: one deterministic episode of the first seed's policy."""
    from ajax.training.video import record_episode, to_rgb, write_gif

    run = restore_run(out, make_algo, config_from)
    if run.host_run is not None:
        run.host_run.close()
    agent = jax.tree.map(lambda x: x[0], run.state.agent)
    frames = record_episode(run.algo, agent, _eval_keys(run.spec)[0], max_frames)
    path = out / "eval.gif"
    write_gif(path, to_rgb(frames))
    return path
