"""Run in a subprocess by test_sharding.py: four forced CPU devices must be set before JAX starts.

``python sharded_runs.py AGENT OUT_DIR`` trains AGENT's tiny config with 4 seeds on one device
and sharded over 4 devices (a run directory), resumes that directory on 1 and on 2 devices, and
prints one JSON object of measurements (the test asserts on them). ``... AGENT OUT_DIR
bitwise`` compares 4 seeds on 4 devices with the same seeds on one device. ``... AGENT OUT_DIR
data`` trains 2 seeds on one device and in the data layout over 4 devices; ``data-flops`` also
measures each device's share of a chunk's FLOPs (XLA's cost analysis of the compiled chunk).
"""

from __future__ import annotations

import os

# added to the flags the suite runs with (conftest.py's LLVM -O1 comes through the environment)
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import dataclasses  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config  # noqa: E402
from ajax.agents.ppo import PPO, PPOConfig  # noqa: E402
from ajax.agents.sac import SAC, SACConfig  # noqa: E402
from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config  # noqa: E402
from ajax.training.io import read_jsonl  # noqa: E402
from ajax.training.run import execute
from ajax.training.run_dir import RunSpec, prepare_run_dir  # noqa: E402
from ajax.training.sharding import mesh_context, shard_seeds  # noqa: E402

AGENTS = {
    "sac": (SAC, "Pendulum-v1", 100, SACConfig(hidden=16, batch_size=32, learning_starts=32,
                                               buffer_size=256, eval_freq=50, eval_episodes=1)),
    "ppo": (PPO, "CartPole-v1", 128, PPOConfig(hidden=16, n_envs=2, n_steps=16, num_minibatches=2,
                                               eval_freq=64, eval_episodes=1)),
    "tdmpc2": (TDMPC2, "Pendulum-v1", 100, TDMPC2Config.preset(
        1, enc_dim=16, mlp_dim=16, latent_dim=16, batch_size=8, seed_steps=40, eval_freq=50,
        eval_episodes=1,
        planner=PlannerConfig(num_samples=16, num_pi_trajs=2, num_elites=4, iterations=2))),
    "dreamerv3": (DreamerV3, "Pendulum-v1", 100, DreamerV3Config.preset(
        "1m", batch_size=2, batch_length=8, train_ratio=0.5, eval_freq=50, eval_episodes=1)),
}  # fmt: skip


def _max_diff(a, b) -> float:
    """Largest float difference outside the optimiser moments. Those are left out because
    DreamerV3's LaProp (eps 1e-20) normalises gradients that are rounding noise (the hidden
    layers of its zero-initialised value head start with ~0 gradients) to +-(1 - beta1) of
    either sign, so one ulp can flip a moment by 2 x 0.17 while the parameters move by lr x that.
    """
    diffs = [
        float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)), initial=0.0))
        for (path, x), y in zip(
            jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b), strict=True
        )
        if np.asarray(x).dtype.kind == "f" and "opt" not in jax.tree_util.keystr(path)
    ]
    return max(diffs)


def _int_leaves_equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        if np.asarray(x).dtype.kind in "iub"
    )


def _bitwise_equal(a, b) -> bool:
    """Every leaf equal bit for bit, but the last update's logged metrics: a metric that is a
    reduction (TD-MPC2's ``pi_grad_norm``) can round differently in another compiled context
    (measured: 1.2e-10 on a norm whose gradients are equal) and feeds nothing back."""
    return all(
        np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
        for (path, x), y in zip(
            jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b), strict=True
        )
        if not jax.tree_util.keystr(path).startswith(".metrics")
    )


def main(agent: str, out: Path) -> dict:
    """One-device ``train`` as the reference; a 4-device run directory (the sharded run), then
    copies of it without the newest checkpoint resumed on 1 and on 2 devices."""
    cls, env, steps, config = AGENTS[agent]
    one = cls(env, config).train(seed=0, total_steps=steps, n_seeds=4)
    spec = RunSpec(agent=agent, env=env, steps=steps, n_seeds=4, checkpoint_every=1,
                   config=dataclasses.asdict(config))  # fmt: skip
    prepare_run_dir(out / "full", spec, overwrite=False)
    _, four = execute(cls(env, config), spec, out / "full", progress=False, devices=4)
    leaves = jax.tree.leaves(four)
    evals = [r["eval_returns"] for r in read_jsonl(out / "full" / "metrics.jsonl")]
    result = {
        "devices": len(jax.devices()),
        "sharded_leaves": sum(len(x.sharding.device_set) == 4 for x in leaves),
        "leaves": len(leaves),
        "shard_seeds": sorted({x.addressable_shards[0].data.shape[0] for x in leaves}),
        "param_diff": _max_diff(one.state.agent, four.agent),
        "eval_one": np.asarray(one.metrics["eval_return"]).T.tolist(),  # [chunks, seeds]
        "eval_four": evals,
        "ints_equal": _int_leaves_equal(one.state, four),
        # one seed per device runs unbatched (sharding.per_seed): seed 3 as it runs alone
        "alone_bitwise": _bitwise_equal(
            cls(env, config).train(seed=3, total_steps=steps).state,
            jax.tree.map(lambda x: np.asarray(x)[3], four),
        ),
    }
    # --seed-batching map: every seed unbatched, so one device holding all four seeds, two
    # devices holding two each, and the four-device run are bitwise the same
    _, mapped = execute(cls(env, config), spec, None, progress=False, seed_batching="map")
    halves = cls(env, config).train(
        seed=0, total_steps=steps, n_seeds=4, devices=2, seed_batching="map"
    )
    result["map_one_device_bitwise"] = _bitwise_equal(mapped, four)
    result["map_two_devices_bitwise"] = _bitwise_equal(halves.state, four)
    result["map_diff"] = max(_max_diff(mapped.agent, four.agent),
                             _max_diff(halves.state.agent, four.agent))  # fmt: skip
    for devices in (1, 2):
        cut = out / f"resume{devices}"
        shutil.copytree(out / "full", cut)
        shutil.rmtree(cut / "checkpoints" / str(len(evals)))
        summary, resumed = execute(
            cls(env, config), spec, cut, progress=False, resume=True, devices=devices
        )
        result[f"resume{devices}_steps"] = summary["steps"]
        result[f"resume{devices}_diff"] = _max_diff(four.agent, resumed.agent)
        result[f"resume{devices}_devices"] = len(jax.tree.leaves(resumed)[0].sharding.device_set)
    return result


def bitwise(agent: str) -> dict:
    """4 seeds sharded over 4 devices (one seed each) against one device running the same 4
    seeds one after another (``seed_batching="map"``): the default run's bitwise check."""
    cls, env, steps, config = AGENTS[agent]
    four = cls(env, config).train(seed=0, total_steps=steps, n_seeds=4, devices=4)
    one = cls(env, config).train(seed=0, total_steps=steps, n_seeds=4, seed_batching="map")
    return {
        "devices": len(jax.devices()),
        "shard_seeds": sorted({x.addressable_shards[0].data.shape[0]
                               for x in jax.tree.leaves(four.state)}),
        "bitwise": _bitwise_equal(one.state, four.state),
        "param_diff": _max_diff(one.state.agent, four.state.agent),
    }  # fmt: skip


def _chunk_flops(algo, chunks, devices: int | None) -> float:
    """FLOPs one device runs in a compiled chunk of 2 vmapped seeds (data layout over
    ``devices``, or one device)."""
    mesh = algo.mesh(devices, 2, "data")
    keys = jax.vmap(jax.random.PRNGKey)(np.arange(2))
    state = shard_seeds(jax.jit(jax.vmap(chunks.init))(keys), mesh)
    with mesh_context(mesh):
        cost = jax.jit(jax.vmap(chunks.run_chunk)).lower(state).compile().cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


def data_parallel(agent: str, flops: bool) -> dict:
    """2 seeds on one device against the data layout over 4 devices (update batch and env
    batch split, parameters replicated)."""
    cls, env, steps, config = AGENTS[agent]
    if agent in ("dreamerv3", "tdmpc2"):  # a batch that splits over 4 devices and, for
        # TD-MPC2, outweighs the (replicated) planning of its single env
        config = dataclasses.replace(config, batch_size={"dreamerv3": 4, "tdmpc2": 32}[agent])
    if not flops:  # four envs, so that the env batch splits too
        config = dataclasses.replace(
            config, n_envs=4, **({"batch_size": 8} if agent == "tdmpc2" else {})
        )
    one = cls(env, config).train(seed=0, total_steps=steps, n_seeds=2)
    four = cls(env, config).train(seed=0, total_steps=steps, n_seeds=2, devices=4, parallel="data")
    result = {
        "devices": len(jax.devices()),
        "param_diff": _max_diff(one.state.agent, four.state.agent),
        "ints_equal": _int_leaves_equal(one.state, four.state),
        "eval_one": np.asarray(one.metrics["eval_return"]).tolist(),
        "eval_four": np.asarray(four.metrics["eval_return"]).tolist(),
        # envs per device of every [seeds, envs, ...] env-state leaf (4 envs split: [1])
        "env_shard": sorted({x.addressable_shards[0].data.shape[1]
                             for x in jax.tree.leaves(four.state.env_state) if x.ndim >= 2}),
    }  # fmt: skip
    if flops:
        algo = cls(env, config)
        chunks = algo.make_chunks(steps)
        result["flops_share"] = _chunk_flops(algo, chunks, 4) / _chunk_flops(algo, chunks, None)
    return result


if __name__ == "__main__":
    if sys.argv[3:4] == ["bitwise"]:
        print("RESULT " + json.dumps(bitwise(sys.argv[1])))
    elif sys.argv[3:4] in (["data"], ["data-flops"]):
        print("RESULT " + json.dumps(data_parallel(sys.argv[1], sys.argv[3] == "data-flops")))
    else:
        print("RESULT " + json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
