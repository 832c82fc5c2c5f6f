"""Host rows of the sequence replay (``replay_on="host"``, ajax.buffers.host_store): the same
batches, write-backs and runs as the device replay, bitwise, with the rows in host memory;
checkpoints that carry the rows; the memory check split by where bytes live."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.buffers import sequence as sq
from ajax.buffers.host_store import HostStore, host_stores
from ajax.environments import make_env
from ajax.training import loop
from ajax.training.checkpoint import restore_checkpoint, save_checkpoint

N, C, L, H = 2, 32, 4, 3


def example_row():
    return {
        "obs": jnp.zeros((2,), jnp.uint8),
        "action": jnp.zeros((2,), jnp.float32),
        "reward": jnp.zeros((), jnp.float32),
        "is_first": jnp.zeros((), bool),
        "is_last": jnp.zeros((), bool),
        "is_terminal": jnp.zeros((), bool),
        "deter": jnp.zeros((3,), jnp.float32),
    }


def rows_at(t: int, scale: int = 1) -> dict:
    """Vector step t's rows (N envs): obs, reward and action name the env and step; an episode
    every 7 steps."""
    step = t + 100 * np.arange(N)
    return {
        "obs": np.stack([step % 256, (step * scale) % 256], -1).astype(np.uint8),
        "action": np.stack([step, -step], -1).astype(np.float32),
        "reward": (step * 0.5 * scale).astype(np.float32),
        "is_first": t % 7 == 0 + np.zeros(N, bool),
        "is_last": t % 7 == 6 + np.zeros(N, bool),
        "is_terminal": np.zeros(N, bool),
        "deter": np.zeros((N, 3), np.float32),
    }


def filled(host: bool, steps: int = 45):
    """A ring that has wrapped (45 rows in 32 slots per env)."""
    state = sq.init(example_row(), N, C, host=host)
    for t in range(steps):
        state = sq.add(state, rows_at(t))
    return state


def test_host_rows_are_the_device_replay_batch_for_batch():
    """Same rows added, same keys: every DreamerV3 batch (online queue first, then uniform),
    every index, every write-back and every TD-MPC2 slice are equal; the device part holds only
    the flags, and the host rings end equal to the device rows."""
    dev, host = filled(False), filled(True)
    assert set(host.rows) == set(sq.FLAG_FIELDS)
    assert set(sq.stored_fields(host)) == set(dev.rows)
    assert host_stores({"replay": host}) == [host.host]
    for i in range(6):
        key = jax.random.PRNGKey(i)
        b_dev, i_dev, dev = sq.sample_dreamerv3(dev, key, 5, L)
        b_host, i_host, host = sq.sample_dreamerv3(host, key, 5, L)
        np.testing.assert_array_equal(i_host.env_idx, i_dev.env_idx)
        np.testing.assert_array_equal(i_host.start_idx, i_dev.start_idx)
        for k in b_dev:
            np.testing.assert_array_equal(b_host[k], b_dev[k], err_msg=k)
        assert b_host["obs"].dtype == jnp.uint8
        latent = {"deter": jnp.full((5, L - 1, 3), float(i + 1))}
        dev = sq.write_back(dev, i_dev, latent, offset=1)
        host = sq.write_back(host, i_host, latent, offset=1)
        t2_dev, _ = sq.sample_tdmpc2(dev, key, 4, H)
        t2_host, _ = sq.sample_tdmpc2(host, key, 4, H)
        jax.tree.map(np.testing.assert_array_equal, t2_host, t2_dev)
    np.testing.assert_array_equal(host.online, dev.online)
    rings = host.host.slots[int(host.host_ref[0])]
    for k, ring in rings.items():
        np.testing.assert_array_equal(ring, dev.rows[k], err_msg=k)
    assert np.asarray(rings["deter"]).max() == 6.0  # the write-backs landed on the host


def test_vmapped_seeds_write_their_own_host_rings():
    """Under vmap each seed registers its own rings (by its key) and writes only those."""
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    init = jax.jit(jax.vmap(lambda k: sq.init(example_row(), N, C, host=True, seed_key=k)))
    state = init(keys)
    add = jax.jit(jax.vmap(sq.add))
    for t in range(5):
        per_seed = [rows_at(t, scale=s + 1) for s in range(3)]
        state = add(state, jax.tree.map(lambda *x: jnp.stack(x), *per_seed))
    slots = np.asarray(state.host_ref[:, 0])
    assert sorted(slots.tolist()) == [0, 1, 2]
    assert np.asarray(state.host_ref[:, 1]).tolist() == [5, 5, 5]  # one version per write
    for s in range(3):
        ring = state.host.slots[slots[s]]["reward"]
        want = np.stack([rows_at(t, scale=s + 1)["reward"] for t in range(5)], 1)
        np.testing.assert_array_equal(ring[:, :5], want)


def test_a_checkpoint_carries_the_host_rows(tmp_path):
    """Saved beside the device state and restored into a fresh replay's store: the restored
    state samples the same batch as the saved one."""
    state = filled(True)
    save_checkpoint(tmp_path / "ck", 1, {"replay": state})
    template = {"replay": sq.init(example_row(), N, C, host=True)}
    assert not template["replay"].host.slots[0]["obs"].any()
    restored = restore_checkpoint(tmp_path / "ck", template)["replay"]
    assert restored.host is template["replay"].host
    key = jax.random.PRNGKey(3)
    want, _, _ = sq.sample_dreamerv3(state, key, 4, L)
    got, _, _ = sq.sample_dreamerv3(restored, key, 4, L)
    jax.tree.map(np.testing.assert_array_equal, got, want)


def test_a_replay_that_only_fits_on_the_host_says_so(monkeypatch):
    """Host rows move the bytes off the device: the check counts them against the host's
    memory, and a device too small for the whole replay names --replay-on host as a fix."""
    cfg = DreamerV3Config.preset("1m", buffer_size=10**6)
    device_only = DreamerV3("CartPole-v1", cfg)
    on_host = DreamerV3("CartPole-v1", DreamerV3Config.preset("1m", buffer_size=10**6,
                                                              replay_on="host"))  # fmt: skip
    whole = device_only.replay_bytes(10**6)
    dev, host = on_host.replay_bytes(10**6)
    # the device keeps three bool flags per row, its positions (3 x int32) and the host ref
    assert dev == 3 * 10**6 + 3 * 4 + 2 * 4
    assert whole[1] == 0 and dev + host == whole[0] + 2 * 4
    import ajax.training.algorithm as algorithm

    class Accelerator:
        platform = "gpu"

    monkeypatch.setattr(algorithm.jax, "devices", lambda: [Accelerator()])
    monkeypatch.setattr(algorithm, "device_bytes", lambda: (whole[0] // 2, "gpu:0"))
    with pytest.raises(ValueError, match="or keep its rows in host memory with --replay-on host"):
        device_only.check_memory(10**6, 1)
    on_host.check_memory(10**6, 1)  # fits: the device holds the flags
    monkeypatch.setattr(algorithm, "host_bytes", lambda: host // 2)
    with pytest.raises(ValueError, match="but the host has"):
        on_host.check_memory(10**6, 1)


def test_host_store_refuses_an_unknown_slot():
    store = HostStore({"x": jax.ShapeDtypeStruct((), jnp.float32)}, 1, 4)
    with pytest.raises(RuntimeError, match="slot 0 is not held"):
        store._gather(np.asarray([0, 0]), np.zeros((1, 1), int), np.zeros((1, 1), int))


def same_branch(monkeypatch):
    """The device run's update branch as the host run's (``loop.when``): XLA compiles the update
    inside a ``lax.cond`` and inside a 0/1-trip loop with different rounding (parameters differ
    by up to 4.4e-11 at the end of the DreamerV3 run below), so only the same branch makes the runs comparable
    bitwise."""
    monkeypatch.setattr(loop, "cond", loop.when)


@pytest.mark.slow  # ~70 s idle: two DreamerV3 runs compile (the store's own tests stay)
def test_dreamerv3_run_with_host_rows_is_bitwise_the_device_run(monkeypatch):
    """Two vmapped seeds of DreamerV3 (online queue, latent write-back) through the jitted
    loop: with the rows on the host the run ends bitwise where the device run ends (same update
    branch, :func:`same_branch`), and the host rings hold bitwise the device replay's rows."""
    same_branch(monkeypatch)
    results = {}
    for where in ("device", "host"):
        cfg = DreamerV3Config.preset("1m", batch_size=2, batch_length=8, train_ratio=16.0,
                                     eval_freq=60, eval_episodes=1, replay_on=where)  # fmt: skip
        results[where] = DreamerV3(make_env("Pendulum-v1"), cfg).train(0, 120, n_seeds=2).state
    dev, host = results["device"], results["host"]
    assert int(host.agent.updates.min()) > 10
    for a, b in zip(jax.tree.leaves(dev.agent), jax.tree.leaves(host.agent), strict=True):
        np.testing.assert_array_equal(b, a)
    slots = np.asarray(host.replay.host_ref[:, 0])
    for k in host.replay.host.fields:
        rings = np.stack([host.replay.host.slots[s][k] for s in slots])
        np.testing.assert_array_equal(rings, dev.replay.rows[k], err_msg=k)


@pytest.mark.slow  # ~60 CPU s: two planner runs compile
def test_tdmpc2_run_with_host_rows_is_bitwise_the_device_run(monkeypatch):
    """TD-MPC2 (episode-filtered windows, obs and next_obs rows) with the rows on the host ends
    bitwise where the device run ends (same update branch), 2 envs, 2 vmapped seeds."""
    from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config

    same_branch(monkeypatch)
    plan = PlannerConfig(num_samples=16, num_pi_trajs=2, num_elites=4, iterations=2)
    results = {}
    for where in ("device", "host"):
        cfg = TDMPC2Config.preset(1, enc_dim=16, mlp_dim=16, latent_dim=16, batch_size=8,
                                  planner=plan, seed_steps=200, eval_freq=200, eval_episodes=2,
                                  n_envs=2, replay_on=where)  # fmt: skip
        results[where] = TDMPC2("Pendulum-v1", cfg).train(0, 400, n_seeds=2).state
    dev, host = results["device"], results["host"]
    for a, b in zip(jax.tree.leaves(dev.agent), jax.tree.leaves(host.agent), strict=True):
        np.testing.assert_array_equal(b, a)
    buffer = host.replay.buffer
    slots = np.asarray(buffer.host_ref[:, 0])
    for k in buffer.host.fields:
        rings = np.stack([buffer.host.slots[s][k] for s in slots])
        np.testing.assert_array_equal(rings, dev.replay.buffer.rows[k], err_msg=k)
