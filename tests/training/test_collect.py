"""``ajax collect`` and ``ajax train tdmpc2 --multitask --dataset`` (issue 13 item 5)."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.buffers.dataset import DatasetError, load_dataset
from ajax.cli import main
from ajax.environments import make_env
from ajax.training.collect import collect_episodes, replay_episodes, run_replay
from ajax.training.loop import stateless
from ajax.training.rollout import to_env_action


def test_collected_episodes_chain_the_envs_steps_with_the_noise_schedule():
    """Row t + 1's observation is where step t went; episode 0 acts without noise, the last
    with std ``noise``; an episode's rows stop at its end."""
    env = make_env("Pendulum-v1")
    policy = stateless(lambda agent, obs, key, det: jnp.full(obs.shape[:-1] + (1,), 0.3))
    eps = jax.jit(lambda k: collect_episodes(env, policy, None, k, 3, 0.5))(jax.random.key(0))
    assert eps.obs.shape == (3, 201, 3) and eps.action.shape == (3, 200, 1)
    np.testing.assert_array_equal(eps.length, [200, 200, 200])
    np.testing.assert_allclose(eps.action[0], 0.3)
    noise = np.asarray(eps.action[2] - 0.3)
    assert 0.35 < noise.std() < 0.6 and np.all(np.abs(eps.action) <= 1.0)
    # replay episode 1's actions through the env from its own first state: same observations
    k_reset, _ = jax.random.split(jax.random.key(0))
    state = jax.vmap(env.reset)(jax.random.split(k_reset, 3)).state
    state = jax.tree.map(lambda x: x[1], state)
    np.testing.assert_allclose(eps.obs[1, 0], env.reset(jax.random.split(k_reset, 3)[1]).obs)
    for t in range(5):
        ts = env.step(jax.random.key(t), state, to_env_action(env, eps.action[1, t]))
        np.testing.assert_allclose(eps.obs[1, t + 1], ts.final_obs, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(eps.reward[1, t], ts.reward, rtol=1e-5, atol=1e-6)
        state = ts.state


def _ring(rows: list[dict], size: int) -> tuple[dict, int, bool]:
    """``rows`` (in the order they were added) written into a ring of ``size`` rows."""
    ring = {k: np.zeros((size, 1), np.float32) for k in rows[0]}
    for i, row in enumerate(rows):
        for k, v in row.items():
            ring[k][i % size] = v
    return ring, len(rows) % size if len(rows) >= size else len(rows), len(rows) >= size


def _rows(obs, next_obs, terminated):
    return [{"obs": o, "next_obs": n, "terminated": d, "action": 0.5 * o, "reward": o}
            for o, n, d in zip(obs, next_obs, terminated, strict=True)]  # fmt: skip


def test_replay_episodes_cut_a_wrapped_two_env_ring_at_terminations_and_resets():
    """Hand case: two envs interleaved row by row, 6 steps each into a ring of 8 rows, so the
    ring holds steps 2-5 with its oldest row at index 4. Env 0 terminates at step 2, then
    starts again at 10; env 1 is reset by a time limit after step 3 (its next row starts at 30,
    not at 24)."""
    env0 = _rows([0, 1, 2, 10, 11, 12], [1, 2, 3, 11, 12, 13], [0, 0, 1, 0, 0, 0])
    env1 = _rows([20, 21, 22, 23, 30, 31], [21, 22, 23, 24, 31, 32], [0] * 6)
    ring, count, full = _ring([r for pair in zip(env0, env1, strict=True) for r in pair], 8)
    assert (count, full) == (4, True)
    eps = replay_episodes(ring, count, full, n_envs=2)
    np.testing.assert_array_equal(eps.length, [1, 3, 2, 2])
    assert eps.obs.shape == (4, 4, 1) and eps.action.shape == (4, 3, 1)
    np.testing.assert_array_equal(eps.obs[..., 0], [[2, 3, 0, 0], [10, 11, 12, 13],
                                                    [22, 23, 24, 0], [30, 31, 32, 0]])  # fmt: skip
    np.testing.assert_array_equal(eps.terminated, [[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(eps.reward, [[2, 0, 0], [10, 11, 12], [22, 23, 0], [30, 31, 0]])
    np.testing.assert_array_equal(eps.action[1, :, 0], [5, 5.5, 6])
    # a ring not yet full: its first 3 steps, one episode per env, env 0's terminated
    ring, count, full = _ring([r for pair in zip(env0[:3], env1[:3], strict=True) for r in pair], 8)
    eps = replay_episodes(ring, count, full, n_envs=2)
    np.testing.assert_array_equal(eps.length, [3, 3])
    np.testing.assert_array_equal(eps.obs[..., 0], [[0, 1, 2, 3], [20, 21, 22, 23]])
    np.testing.assert_array_equal(eps.terminated, [[0, 0, 1], [0, 0, 0]])
    with pytest.raises(DatasetError, match="no transitions"):
        replay_episodes(ring, 0, False, n_envs=2)


def test_replay_export_refuses_a_run_without_a_transition_replay():
    from types import SimpleNamespace

    run = SimpleNamespace(state=SimpleNamespace(agent=None), spec=SimpleNamespace(agent="ppo"))
    with pytest.raises(DatasetError, match="a ppo run keeps no transition replay.*drop --replay"):
        run_replay(run)


TINY_SAC = [
    "--hidden", "16", "--batch-size", "32", "--learning-starts", "32", "--buffer-size", "256",
    "--eval-freq", "100", "--eval-episodes", "1", "--no-progress", "--steps", "100",
]  # fmt: skip
TINY_T2 = [
    "--model-size", "1", "--enc-dim", "16", "--mlp-dim", "16", "--latent-dim", "16",
    "--task-dim", "8", "--batch-size", "8", "--planner.num-samples", "16",
    "--planner.num-pi-trajs", "2", "--planner.num-elites", "4", "--planner.iterations", "1",
    "--eval-freq", "10", "--eval-episodes", "1", "--checkpoint-every", "1", "--no-progress",
]  # fmt: skip


def _error(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: ")
    return err[0]


@pytest.mark.slow  # ~110 s on 2 cores: a SAC run, three collects, a multi-task run, eval
def test_collect_then_train_multitask_and_eval(tmp_path, capsys):
    """A SAC run collects two tasks into one dataset; the multi-task run trains on both and
    logs each task's return; ``ajax eval`` scores it; bad input is one line and exit 2."""
    ds = tmp_path / "ds"
    run = tmp_path / "pend"
    assert main(["train", "sac", "--env", "Pendulum-v1", "--out", str(run), *TINY_SAC]) == 0
    # one run collected twice (two tasks, one env): a second SAC run costs ~15 s of compiles;
    # tasks of different widths are test_t2_multitask.py's
    for task, seed in (("pend", "0"), ("pend-b", "1")):
        capsys.readouterr()
        argv = ["collect", str(run), "--out", str(ds), "--task", task, "--episodes", "3",
                "--seed", seed]  # fmt: skip
        assert main(argv) == 0
        assert f"task {task}: 3 episodes" in capsys.readouterr().out
    # its replay: the 100 steps of one unfinished Pendulum episode, chained row to row
    argv = ["collect", str(run), "--out", str(tmp_path / "replay"), "--replay"]
    assert main(argv) == 0
    assert "task Pendulum-v1: 1 episodes of up to 100 steps" in capsys.readouterr().out
    replay = load_dataset(tmp_path / "replay")
    (eps,) = replay.episodes.values()
    assert replay.tasks[0].source["replay"] and eps.length.tolist() == [100]
    assert np.all(np.abs(eps.action) <= 1.0) and np.all(np.abs(eps.obs[0, :, :2]) <= 1.0)
    assert "drop --episodes, --seed" in _error(
        capsys, argv[:-1] + ["--out", str(tmp_path / "r2"), "--replay", "--episodes", "2",
                             "--seed=1"]
    )  # fmt: skip
    data = load_dataset(ds)
    assert data.names == ("pend", "pend-b")
    assert data.tasks[1].source["agent"] == "sac" and data.tasks[1].action_dim == 1
    assert not np.array_equal(data.episodes["pend"].obs, data.episodes["pend-b"].obs)
    assert json.loads((ds / "dataset.json").read_text())["tasks"]["pend"]["episode_length"] == 200

    out = tmp_path / "mt"
    argv = ["train", "tdmpc2", "--multitask", "--dataset", str(ds), "--steps", "20",
            "--out", str(out), *TINY_T2]  # fmt: skip
    assert main(argv) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [10, 20]
    assert np.isfinite(lines[-1]["eval_return/pend"]) and np.isfinite(
        lines[-1]["eval_return/pend-b"]
    )
    spec = json.loads((out / "run.json").read_text())
    assert spec["env"] == f"dataset:{ds}" and spec["env_options"] == {"dataset": str(ds)}

    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "1"]) == 0
    assert "eval return over 1 episodes" in capsys.readouterr().out

    # bad input: one line, exit 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "dataset.json").write_text("{}")
    bad = ["train", "tdmpc2", "--multitask", "--steps", "10"]
    assert "not an Ajax episode dataset" in _error(
        capsys, bad + ["--dataset", str(tmp_path / "bad")]
    )
    assert "missing ['walker-stand'" in _error(
        capsys, bad + ["--dataset", str(ds), "--task-set", "mt30"]
    )
    one = tmp_path / "one"
    assert main(["collect", str(tmp_path / "pend"), "--out", str(one), "--episodes", "1"]) == 0
    assert ">= 2 tasks" in _error(capsys, bad + ["--dataset", str(one)])
    assert "needs --dataset" in _error(capsys, bad)
    assert "add --multitask" in _error(capsys, ["train", "tdmpc2", "--dataset", str(ds)])
    assert "drop --env" in _error(capsys, bad + ["--dataset", str(ds), "--env", "Pendulum-v1"])
    assert "the image options" in _error(capsys, bad + ["--dataset", str(ds), "--proprio"])
    assert "needs --out" in _error(capsys, ["collect", str(tmp_path / "pend")])
    nothing = ["collect", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]
    assert "is not a run directory" in _error(capsys, nothing)


@pytest.mark.slow  # ~55 s: the run, then its resume, each compiles the update and both evals
def test_multitask_run_resumes_to_the_same_end(tmp_path):
    from ajax.buffers.dataset import Episodes, TaskMeta, write_task

    rng = np.random.default_rng(0)
    for name, env, obs, act, length in (("pend", "Pendulum-v1", 3, 1, 200),
                                        ("reach", "Reacher-misc", 8, 2, 100)):  # fmt: skip
        eps = Episodes(
            obs=rng.normal(size=(3, length + 1, obs)).astype(np.float32),
            action=rng.uniform(-1, 1, size=(3, length, act)).astype(np.float32),
            reward=rng.normal(size=(3, length)).astype(np.float32),
            terminated=np.zeros((3, length), bool),
            length=np.full((3,), length, np.int32),
        )
        write_task(tmp_path / "ds", TaskMeta(name, env, obs, act, length, 3), eps)
    out = tmp_path / "mt"
    argv = ["train", "tdmpc2", "--multitask", "--dataset", str(tmp_path / "ds"), "--steps", "20",
            "--out", str(out), *TINY_T2]  # fmt: skip
    assert main(argv) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    shutil.rmtree(out / "checkpoints" / "2")
    (out / "metrics.jsonl").write_text(json.dumps(lines[0]) + "\n")
    assert main(["resume", str(out)]) == 0
    resumed = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resumed] == [10, 20]
    for key in ("total_loss", "pi_loss", "eval_return/pend", "eval_return/reach"):
        assert resumed[-1][key] == lines[-1][key], key


def test_collect_records_the_runs_action_repeat_and_evaluates_with_it(tmp_path):
    """A SAC run with --action-repeat 2 acts every 2 Pendulum steps: its 100 agent steps are
    one whole episode, which the dataset records with repeat 2, and the multi-task model's
    evaluation env of that task repeats too (its time limit, 100 agent steps, matches)."""
    from ajax.agents.tdmpc2.multitask import MultitaskTDMPC2

    run, ds = tmp_path / "pend", tmp_path / "ds"
    argv = ["train", "sac", "--env", "Pendulum-v1", "--action-repeat", "2", "--out", str(run)]
    assert main(argv + TINY_SAC) == 0
    for task in ("a", "b"):
        assert main(["collect", str(run), "--out", str(ds), "--task", task, "--replay"]) == 0
    data = load_dataset(ds)
    meta = data.tasks[0]
    assert (meta.action_repeat, meta.episode_length) == (2, 100)
    assert data.episodes["a"].length.tolist() == [100]
    algo = MultitaskTDMPC2(ds)
    assert [e.spec.max_episode_steps for e in algo.eval_envs] == [100, 100]
