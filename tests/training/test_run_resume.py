"""Resuming an interrupted run ends bitwise where the uninterrupted run ends."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import ajax.training.run as run_module
from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.agents.sac import SAC, SACConfig
from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config
from ajax.buffers.host_store import host_stores
from ajax.training.checkpoint import restore_checkpoint
from ajax.training.io import read_jsonl
from ajax.training.run import execute
from ajax.training.run_dir import RunSpec, prepare_run_dir

CONFIG = SACConfig(
    hidden=16, batch_size=32, learning_starts=32, buffer_size=256, eval_freq=50, eval_episodes=1
)
# Tiny TD-MPC2: seed steps end inside chunk 2, so the resumed half holds the pretraining
# updates, planning with warm starts and the running scale.
T2_CONFIG = TDMPC2Config.preset(
    1,
    enc_dim=16,
    mlp_dim=16,
    latent_dim=16,
    batch_size=8,
    planner=PlannerConfig(num_samples=16, num_pi_trajs=2, num_elites=4, iterations=2),
    seed_steps=60,
    eval_freq=50,
    eval_episodes=1,
)
# Tiny DreamerV3 with a low train ratio, so fresh windows pile up in the online queue faster
# than updates pop them: the checkpoint after chunk 2 falls with the queue non-empty.
D3_CONFIG = DreamerV3Config.preset(
    "1m", batch_size=2, batch_length=8, train_ratio=0.5, eval_freq=50, eval_episodes=1
)
AGENTS = {
    "sac": (SAC, CONFIG),
    "tdmpc2": (TDMPC2, T2_CONFIG),
    "dreamerv3": (DreamerV3, D3_CONFIG),
    # the replay rows in host memory: the checkpoint carries them beside the state
    "dreamerv3-host": (DreamerV3, dataclasses.replace(D3_CONFIG, replay_on="host")),
}


def _pending_fresh_windows(replay, length: int) -> np.ndarray:
    """Fresh (online-queue) windows not yet handed out, per seed and env."""
    added, online = np.asarray(replay.added), np.asarray(replay.online)
    lo = np.maximum(online, np.maximum(added - replay.capacity, 0))
    first = lo + np.mod(1 - lo, length)
    return np.maximum(0, (added - first - length) // length + 1)


def _spec(agent: str) -> RunSpec:
    return RunSpec(
        agent=agent.split("-")[0],
        env="Pendulum-v1",
        steps=200,
        checkpoint_every=1,
        n_seeds=2,
        config=dataclasses.asdict(AGENTS[agent][1]),
    )


class Stop(Exception):
    """The simulated interruption."""


# Each ~175-195 CPU s (three executes, each compiles), so all slow: the default run's bitwise
# resume check is SAC's in tests/training/test_integrity.py (resume over a damaged file).
@pytest.mark.parametrize(
    "agent",
    [
        pytest.param("sac", marks=pytest.mark.slow),
        pytest.param("tdmpc2", marks=pytest.mark.slow),
        pytest.param("dreamerv3", marks=pytest.mark.slow),
        pytest.param("dreamerv3-host", marks=pytest.mark.slow),
    ],
)
def test_resume_is_bitwise_identical(agent, tmp_path, monkeypatch):
    """Stop a 4-chunk run (2 vmapped seeds) after chunk 2's checkpoint; resume; compare every
    leaf of the final state and the logged eval returns with the uninterrupted run."""
    cls, config = AGENTS[agent]
    spec = _spec(agent)
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    prepare_run_dir(full_dir, spec, overwrite=False)
    _, full = execute(cls("Pendulum-v1", config), spec, full_dir, progress=False)

    prepare_run_dir(cut_dir, spec, overwrite=False)
    save = run_module.save_checkpoint

    def save_then_stop(directory, step, state, **kw):
        save(directory, step, state, **kw)
        if step == 2:
            raise Stop

    monkeypatch.setattr(run_module, "save_checkpoint", save_then_stop)
    with pytest.raises(Stop):
        execute(cls("Pendulum-v1", config), spec, cut_dir, progress=False)
    monkeypatch.setattr(run_module, "save_checkpoint", save)
    assert [r["step"] for r in read_jsonl(cut_dir / "metrics.jsonl")] == [50, 100]
    if agent.startswith("dreamerv3"):
        algo = cls("Pendulum-v1", config)
        keys = jax.vmap(jax.random.PRNGKey)(jax.numpy.arange(2))
        template = jax.vmap(algo.make_chunks(spec.steps).init)(keys)
        saved = restore_checkpoint(cut_dir / "checkpoints", template, 2)
        assert _pending_fresh_windows(saved.replay, config.window).min() > 0
        assert int(saved.agent.updates.min()) > 0

    summary, resumed = execute(
        cls("Pendulum-v1", config), spec, cut_dir, progress=False, resume=True
    )
    assert summary["steps"] == 200
    full_leaves = jax.tree_util.tree_leaves_with_path(full)
    resumed_leaves = jax.tree.leaves(resumed)
    assert len(full_leaves) == len(resumed_leaves)
    for (path, a), b in zip(full_leaves, resumed_leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=str(path))
    full_rings, resumed_rings = (
        [store.arrays() for store in host_stores(x)] for x in (full, resumed)
    )
    assert len(full_rings) == (agent == "dreamerv3-host")
    jax.tree.map(np.testing.assert_array_equal, resumed_rings, full_rings)
    full_log, cut_log = (
        read_jsonl(full_dir / "metrics.jsonl"),
        read_jsonl(cut_dir / "metrics.jsonl"),
    )
    assert [r["step"] for r in cut_log] == [50, 100, 150, 200]
    assert [r["eval_returns"] for r in cut_log] == [r["eval_returns"] for r in full_log]
