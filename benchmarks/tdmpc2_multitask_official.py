"""The multi-task bar beside the official code (issue 37 item 5): the official offline TD-MPC2
and Ajax's ``MultitaskTDMPC2`` trained on one Ajax dataset at one budget, scored as
``tests/agents/tdmpc2/test_t2_multitask_learning.py`` scores Ajax.

``python benchmarks/tdmpc2_multitask_official.py --dataset DS --runs RUNS --official-python PY
--official-repo REPO [--updates 24000] [--ajax] [--out result.json]``

- ``DS`` is an Ajax dataset of the test's three tasks (``ajax collect --replay``); ``RUNS``
  holds the three SAC runs that collected it (``RUNS/<task>``), whose deterministic return
  over 10 episodes is R_collector, as in the test.
- ``tdmpc2_multitask_official_driver.py`` runs in the official interpreter ``PY`` on the
  checkout ``REPO`` (``shared/reference/make-official-envs.sh``): it converts ``DS`` to the
  official ``*.pt`` format and trains the official ``OfflineTrainer`` on it (its docstring
  lists what had to be adapted). Its ``eval`` plays Ajax's envs (each task's env padded to
  the model's spaces, as ``MultitaskTDMPC2`` evaluates), stepped here, one JSON line per
  ``reset``/``step`` over a pipe.
- ``--ajax`` also trains ``MultitaskTDMPC2`` on ``DS`` with the same settings and updates
  (the test's ``CONFIG`` at 24,000 updates; evaluations every ``updates / 6``).
- Each task's score is (R - R_random) / (R_collector - R_random), R the best of the last two
  evaluations (the official's at ``--eval-at``, by default the last two of its schedule), and
  R_random the uniform-random policy's mean return over 10 episodes (the test's
  ``random_return``, same key).

The official trainer evaluates after the update of iteration i when i % eval_freq == 0, i
counting from 0; it is run for ``updates + 1`` iterations, so its evaluations come after
4,001 ... 24,001 updates where Ajax's come after 4,000 ... 24,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ajax.agents.tdmpc2.config import PlannerConfig, TDMPC2Config
from ajax.agents.tdmpc2.multitask import MultitaskTDMPC2
from ajax.cli import _config_from, _make_algo
from ajax.training import loop
from ajax.training.evaluation import evaluate_run
from ajax.training.rollout import to_env_action

DRIVER = Path(__file__).resolve().parent / "tdmpc2_multitask_official_driver.py"


def config(updates: int, args) -> TDMPC2Config:
    """The slow test's CONFIG at ``updates`` (evaluations every updates / 6)."""
    planner = PlannerConfig(iterations=args.iterations, num_samples=args.num_samples,
                            num_pi_trajs=args.num_pi_trajs, num_elites=args.num_elites)  # fmt: skip
    return TDMPC2Config(
        model_size=1, enc_dim=args.enc_dim, mlp_dim=args.mlp_dim, latent_dim=args.latent_dim,
        batch_size=args.batch_size, eval_freq=updates // 6, eval_episodes=args.eval_episodes,
        planner=planner,
    )  # fmt: skip


def random_return(env, episodes: int = 10) -> float:
    """Mean return of uniform random actions in [-1, 1], key 7 (the test's ``random_return``)."""
    return float(jax.jit(lambda k: loop.random_return(env, k, episodes))(jax.random.key(7)))


def serve(envs, rx, tx, seed: int) -> dict:
    """Answer the driver's ``reset``/``step`` lines on Ajax's ``envs`` until ``close``."""
    resets = [jax.jit(env.reset) for env in envs]
    steps = [
        jax.jit(lambda k, s, a, env=env: env.step(k, s, to_env_action(env, a))) for env in envs
    ]
    key, task, state, t, served = jax.random.key(seed), 0, None, 0, 0
    for line in rx:
        msg = json.loads(line)
        key, k = jax.random.split(key)
        if msg["cmd"] == "close":
            break
        if msg["cmd"] == "reset":
            task, t = msg["task"], 0
            ts = resets[task](k)
            reply = {"obs": np.asarray(ts.obs).tolist()}
        else:
            ts = steps[task](k, state, jnp.asarray(msg["action"], jnp.float32))
            t += 1
            done = bool(ts.terminated | ts.truncated) or t >= envs[task].spec.max_episode_steps
            reply = {"obs": np.asarray(ts.obs).tolist(), "reward": float(ts.reward),
                     "done": done}  # fmt: skip
            served += 1
        state = ts.state
        tx.write(json.dumps(reply) + "\n")
        tx.flush()
    return {"env_steps": served}


def run_official(algo, args) -> dict:
    """The driver in the official interpreter, its envs served here."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    out = args.work / "official.json"
    cmd = [
        str(args.official_python), str(DRIVER), "--repo", str(args.official_repo),
        "--dataset", str(args.dataset), "--out", str(out), "--fd-in", str(to_child_r),
        "--fd-out", str(from_child_w), "--threads", str(args.threads),
        "--updates", str(args.updates), "--eval-freq", str(args.updates // 6),
        "--eval-at", *[str(i) for i in (args.eval_at or [args.updates * 5 // 6, args.updates])],
        "--save-agent", str(args.work),
        *[x for name in ("enc_dim", "mlp_dim", "latent_dim", "batch_size", "iterations",
                         "num_samples", "num_pi_trajs", "num_elites", "eval_episodes", "seed")
          for x in (f"--{name.replace('_', '-')}", str(getattr(args, name)))],
    ]  # fmt: skip
    print(" ".join(cmd), flush=True)
    start = time.time()
    child = subprocess.Popen(cmd, pass_fds=(to_child_r, from_child_w))
    os.close(to_child_r), os.close(from_child_w)
    with os.fdopen(from_child_r, "r") as rx, os.fdopen(to_child_w, "w") as tx:
        served = serve(algo.eval_envs, rx, tx, args.seed)
    if child.wait() != 0:
        raise SystemExit(f"the official driver failed ({child.returncode})")
    result = json.loads(out.read_text())
    result["wall_s"] = time.time() - start
    result.update(served)
    return result


def run_ajax(algo, args) -> dict:
    start = time.time()
    result = algo.train(seed=args.seed, total_steps=args.updates)
    names = algo.tasks.names
    steps = [int(s) for s in np.asarray(result.metrics["step"]).reshape(-1)]
    evals = [
        {"updates": s, "returns": {n: float(np.asarray(result.metrics[f"eval_return/{n}"])
                                            .reshape(-1)[j]) for n in names}}
        for j, s in enumerate(steps)
    ]  # fmt: skip
    return {"wall_s": time.time() - start, "evals": evals}


def scores(evals: list[dict], floor: dict, collector: dict) -> dict:
    """Per task: best of the last two evaluations and its normalised score."""
    out = {}
    for task in floor:
        best = max(e["returns"][task] for e in evals[-2:])
        out[task] = {"best": best, "score": (best - floor[task]) / (collector[task] - floor[task])}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--runs", type=Path, required=True, help="the SAC runs, RUNS/<task>")
    parser.add_argument("--official-python", type=Path)
    parser.add_argument("--official-repo", type=Path)
    parser.add_argument("--ajax", action="store_true", help="also train Ajax's MultitaskTDMPC2")
    parser.add_argument("--work", type=Path, default=Path("mt_official_work"))
    parser.add_argument("--out", type=Path, help="result JSON")
    parser.add_argument("--updates", type=int, default=24_000)
    parser.add_argument("--eval-at", type=int, nargs="*", help="official iterations to play")
    parser.add_argument("--threads", type=int, default=1, help="official torch threads")
    for name, default in (("enc-dim", 128), ("mlp-dim", 128), ("latent-dim", 64),
                          ("batch-size", 128), ("iterations", 4), ("num-samples", 256),
                          ("num-pi-trajs", 16), ("num-elites", 32), ("eval-episodes", 8),
                          ("seed", 0)):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    algo = MultitaskTDMPC2(args.dataset, config(args.updates, args))
    names = algo.tasks.names
    floor = {n: random_return(algo.eval_envs[i].env) for i, n in enumerate(names)}
    sac = lambda n: float(np.mean(evaluate_run(args.runs / n, 10, _make_algo, _config_from)))  # noqa: E731
    collector = {n: sac(n) for n in names}
    report = {"updates": args.updates, "random": floor, "collector": collector}
    print(json.dumps(report), flush=True)
    if args.official_python:
        official = run_official(algo, args)
        report["official"] = official | {"scores": scores(official["evals"], floor, collector)}
        print(json.dumps({"official": report["official"]["scores"]}), flush=True)
    if args.ajax:
        ajax = run_ajax(algo, args)
        report["ajax"] = ajax | {"scores": scores(ajax["evals"], floor, collector)}
        print(json.dumps({"ajax": report["ajax"]["scores"]}), flush=True)
    for side in ("official", "ajax"):
        if side in report:
            for task, s in report[side]["scores"].items():
                print(f"{side} {task}: {s['best']:.1f} (SAC {collector[task]:.1f}, random "
                      f"{floor[task]:.1f}) -> {s['score']:.2f}")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
