"""Slow learning tests of DreamerV3 size1m: issue 11 (Breakout-MinAtar from images) and issue
36 (equal budget against the official code)."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config


def _random_return(env_id: str, episodes: int = 256) -> float:
    """Mean return of uniform random actions over ``episodes`` episodes (the loop's evaluate)."""
    import jax

    from ajax.environments import make_env
    from ajax.training.loop import Policy, evaluate
    from ajax.training.rollout import random_actions

    env = make_env(env_id)
    act = lambda a, c, tick, k, d: (random_actions(env, k, tick.obs.shape[0]), c)
    policy = Policy(init=lambda n: (), act=act)
    run = jax.jit(lambda k: evaluate(env, policy, None, k, episodes))
    return float(run(jax.random.PRNGKey(0)))


@pytest.mark.slow  # ~56 minutes on 2 CPU cores: 3,121 updates of the CNN world model
def test_d3_beats_random_by_3x_on_breakout_minatar_within_50k_steps():
    """Issue 11: DreamerV3 size1m from Breakout-MinAtar's 10 x 10 x 4 images, inside one jitted
    run, one seed, train ratio 64 (3,121 updates in 50,000 env steps, the count ratio 32 gives
    in 100,000; one seed because two do not fit in an hour on 2 cores). The final
    deterministic eval (8 episodes) beats 3x the random policy's mean return (0.33 over 256
    episodes). Measured 2026-12-05 (3,359 s): eval 0, 0, 0.88, 0.25, 0.62, 0.5, 1.5, 3.0, 3.0,
    3.12 at 5k..50k env steps, so 9.4x random at the end (the threshold is 1.0)."""
    random = _random_return("Breakout-MinAtar")
    cfg = DreamerV3Config.preset("1m", train_ratio=64.0, eval_freq=5_000, eval_episodes=8)
    result = DreamerV3("Breakout-MinAtar", cfg).train(seed=0, total_steps=50_000)
    final = float(np.asarray(result.metrics["eval_return"])[-1])
    assert final > 3.0 * random, (final, random)


# Issue 10's absolute bars at train ratio 32 (CartPole mean eval > 400 at 50k env steps,
# Pendulum > -400 at 30k, 2 seeds) were far out of reach in the runs made here: CartPole eval
# at 5k..30k env steps [14, 15], [9, 10], [10, 8], [76, 52], [34, 65], [81, 50]; Pendulum at
# 5k..20k [-1152, -1183], [-1243, -791], [-1412, -1439], [-1747, -1241] (2 CPU cores, both runs
# cut short). At ratio 32 such a run holds 940-1,560 updates, about the learning-rate warm-up,
# so the budget is the limit, not the agent (at ratio 256, 2,484 updates, CartPole eval reached
# 254-267 by 10k env steps; 2026-12-05). Issue 36 replaced those two strict-xfail tests by the
# equal-budget comparison with the official code below, which asks whether Ajax learns as the
# official code does at the same budget rather than whether either clears a fixed number.
#
# Issue 36 item 4: the same budget for the official DreamerV3 and Ajax's, side by side
# (benchmarks/dreamerv3_vs_official.py with its recommended defaults: size1m, batch 8 x 32,
# train ratio 64, 6,400 env steps, 3 seeds each; about an hour per task on 2 idle cores).
# It needs the official interpreter (../shared/reference/make-official-envs.sh).
OFFICIAL_PYTHON = Path(
    os.environ.get("AJAX_OFFICIAL_DREAMERV3_PYTHON", "~/.cache/ajax-official/dreamerv3/bin/python")
).expanduser()
OFFICIAL_REPO = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "dreamerv3"


@pytest.mark.slow
@pytest.mark.skipif(
    not (OFFICIAL_PYTHON.is_file() and OFFICIAL_REPO.is_dir()),
    reason="needs the official DreamerV3 interpreter and ../shared/reference/dreamerv3",
)
@pytest.mark.parametrize("task", ["CartPole-v1", "Pendulum-v1"])
def test_d3_is_not_worse_than_the_official_at_equal_budget(task, tmp_path):
    """Ajax's mean final return is not below the official's mean minus one pooled standard
    deviation, and no Ajax seed is below the official's worst (issue 36's bar)."""
    bench = Path(__file__).resolve().parents[3] / "benchmarks" / "dreamerv3_vs_official.py"
    spec = importlib.util.spec_from_file_location("dreamerv3_vs_official", bench)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(bench.parent))  # it imports its sibling dreamerv3_official
    try:
        spec.loader.exec_module(module)
        argv = ["--official-python", str(OFFICIAL_PYTHON), "--official-repo", str(OFFICIAL_REPO),
                "--tasks", task, "--out", str(tmp_path)]  # fmt: skip
        assert module.main(argv) == 0
    finally:
        sys.path.remove(str(bench.parent))
    summary = json.loads((tmp_path / "dreamerv3_vs_official.json").read_text())
    bar = summary["tasks"][task]["summary"]
    print(json.dumps(bar, indent=1))
    assert bar["passes"], bar
