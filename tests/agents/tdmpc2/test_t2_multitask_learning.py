"""Multi-task offline TD-MPC2 learns three tasks from one dataset (issue 13 item 5; slow).

Three SAC runs (gymnax Pendulum-v1 and Reacher-misc, playground DMC CartpoleBalance) are
collected with ``ajax collect --replay`` into one dataset (each run's whole replay, as the
official TD-MPC2 datasets are; 30 episodes of the final policy with noise up to 1.0 scored
pendulum 1.03, cartpole-balance -0.31 and reacher 0.46); one multi-task TD-MPC2 trains
offline on it. The tasks differ in observation width (3, 5, 8) and action dimensions (1, 1, 2), so padding and
action masks are on. CartpoleSwingup, tried first as the third task, stayed near random within
this budget (13-170 against SAC's 730 after 12-18k updates), so Reacher-misc replaced it.
Returns of different tasks live on different scales, and Pendulum's are negative, so each
task is scored as (R - R_random) / (R_collector - R_random), with R the best of the last two
evaluations, R_random the uniform-random policy's return and R_collector the SAC run's
deterministic return, both measured here. The issue first asked 0.8 ("80% of the collecting
agent's return") on every task.

The bar is the official code's (issue 37 item 5; fixtures/MULTITASK_BAR.md has the commands,
settings and numbers). The official nicklashansen/tdmpc2 offline trainer, trained on one such
dataset converted to its format with this test's model, batch and planner
(``benchmarks/tdmpc2_multitask_official.py``), evaluated on Ajax's envs the way this test
evaluates (8 episodes per task, best of the last two evaluations), scored at 12,000 updates
(24,000 would take about 1 h 40 min on this machine): pendulum 0.96, cartpole-balance -0.36,
reacher 0.90; Ajax at 12k on the same dataset, seeds 0 and 1: 1.03 / 1.05, -0.27 / -0.30,
0.51 / 1.00 (Ajax at 24k here scored 1.03, -0.26, 0.84). The official too plans
cartpole-balance below random, so 0.8 on every task is not what the reference reaches here;
each task's bar is the official score minus 0.3 (one official seed; see the note for the
spread).
"""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

from ajax.agents.tdmpc2.config import PlannerConfig, TDMPC2Config
from ajax.agents.tdmpc2.multitask import MultitaskTDMPC2
from ajax.cli import _config_from, _make_algo, main
from ajax.training import loop
from ajax.training.evaluation import evaluate_run

SAC = ["--hidden", "64", "--batch-size", "128", "--learning-rate", "1e-3", "--no-progress"]
TASKS = {  # task: (env, SAC steps)
    "pendulum": ("Pendulum-v1", 12_000),
    "cartpole-balance": ("CartpoleBalance", 30_000),
    "reacher": ("Reacher-misc", 20_000),
}
UPDATES = 24_000
OFFICIAL = {"pendulum": 0.96, "cartpole-balance": -0.36, "reacher": 0.90}  # at 12k updates
MARGIN = 0.3
CONFIG = TDMPC2Config(
    model_size=1, enc_dim=128, mlp_dim=128, latent_dim=64, batch_size=128,
    eval_freq=UPDATES // 6, eval_episodes=8,
    planner=PlannerConfig(iterations=4, num_samples=256, num_pi_trajs=16, num_elites=32),
)  # fmt: skip


def random_return(env, episodes: int = 10) -> float:
    """Mean return of uniform random actions in [-1, 1] (the normalisation's floor), key 7."""
    return float(jax.jit(lambda k: loop.random_return(env, k, episodes))(jax.random.key(7)))


# ~20 min on 2 cores: three SAC runs, then 24k updates and 6 evaluations. Measured
# 2026-12-05 (--replay datasets, 974 s in all, 869 s of TD-MPC2): pendulum 1.03,
# cartpole-balance -0.26 (277.3 vs SAC 861.8, random 397.1), reacher 0.84; xfail (bar 0.8)
# until the official code was measured at -0.36 on cartpole-balance (module docstring).
# Rerun 2026-12-07 with the official bar (AJAX_TEST_XLA_OPT=, idle 2 cores, 2,002 s; 24k
# updates 1,812 s): pendulum 1.02, cartpole-balance -0.29, reacher 0.66 (its bar 0.60, the
# thinnest margin; 0.84 in the 2026-12-05 run).
@pytest.mark.slow
def test_multitask_offline_scores_what_the_official_code_does(tmp_path, capsys):
    ds = tmp_path / "ds"
    collector = {}
    for task, (env, steps) in TASKS.items():
        run = tmp_path / task
        argv = ["train", "sac", "--env", env, "--steps", str(steps), "--buffer-size", str(steps),
                "--eval-freq", str(steps // 4), "--out", str(run), *SAC]  # fmt: skip
        assert main(argv) == 0
        collector[task] = float(np.mean(evaluate_run(run, 10, _make_algo, _config_from)))
        argv = ["collect", str(run), "--out", str(ds), "--task", task, "--replay"]
        assert main(argv) == 0
    algo = MultitaskTDMPC2(ds, CONFIG)
    start = time.time()
    result = algo.train(seed=0, total_steps=UPDATES)
    seconds = time.time() - start
    report = []
    for i, task in enumerate(algo.tasks.names):
        floor = random_return(algo.eval_envs[i].env)
        best = float(np.max(result.metrics[f"eval_return/{task}"][-2:]))
        score = (best - floor) / (collector[task] - floor)
        report.append((task, best, collector[task], floor, score))
    with capsys.disabled():
        print(
            f"\n{UPDATES} updates and {len(result.metrics['step'])} evaluations in {seconds:.0f} s"
        )
        for task, best, coll, floor, score in report:
            print(
                f"{task}: multi-task {best:.1f}, SAC {coll:.1f}, random {floor:.1f} -> {score:.2f}"
            )
    assert all(score >= OFFICIAL[task] - MARGIN for task, *_, score in report), report
