"""ajax.experiments.stats: hand-worked aggregates, probability of improvement and bootstrap
intervals (Agarwal et al. 2021), pinned for fixed seeds; cross-checked against rliable where it
imports (its ``library`` needs ``arch``, which fails under pandas 3 in this project's venv; run
2026-12-07 with rliable 1.2.0, arch 7.2.0, pandas 2.3.3 on PYTHONPATH, it passed: IQM interval
0.5749-1.1795 here against rliable's 0.5769-1.1803 at 20k replicates)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from ajax.experiments import stats

# 4 runs x 2 tasks; the 8 scores sorted: 1 2 3 4 10 20 30 40.
SCORES = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])


def test_hand_worked_aggregates():
    # IQM drops the lowest 2 and highest 2 of the 8 scores: mean(3, 4, 10, 20) = 9.25.
    assert stats.iqm(SCORES) == pytest.approx(9.25)
    # mean of the task means (2.5, 25) = 13.75; median of the 8 scores = (4 + 10) / 2 = 7.
    assert stats.mean(SCORES) == pytest.approx(13.75)
    assert stats.median(SCORES) == pytest.approx(7.0)
    # one task as a vector; 8 runs 0..7: IQM = mean(2, 3, 4, 5) = 3.5
    assert stats.iqm(np.arange(8.0)) == pytest.approx(3.5)
    # 10 seeds with an outlier: IQM trims it, the mean does not
    seeds = [5.0, 6, 7, 8, 9, 10, 11, 12, 13, 1000]
    assert stats.iqm(stats.as_scores(seeds)) == pytest.approx(scipy.stats.trim_mean(seeds, 0.25))
    assert stats.iqm(stats.as_scores(seeds)) == pytest.approx((7 + 8 + 9 + 10 + 11 + 12) / 6)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 10, 13])
def test_iqm_is_scipys_trim_mean(n):
    scores = np.random.default_rng(n).normal(size=(n, 3))
    assert stats.iqm(scores) == pytest.approx(scipy.stats.trim_mean(scores, 0.25, axis=None))


def test_aggregates_take_a_batch():
    batch = np.stack([SCORES, 2 * SCORES])
    np.testing.assert_allclose(stats.iqm(batch), [9.25, 18.5])
    np.testing.assert_allclose(stats.mean(batch), [13.75, 27.5])
    np.testing.assert_allclose(stats.median(batch), [7.0, 14.0])


def test_hand_worked_probability_of_improvement():
    # x = (3, 5, 2) vs y = (1, 3): pairs 3>1, 3=3 (1/2), 5>1, 5>3, 2>1, 2<3 -> 4.5 / 6
    x, y = np.array([[3.0], [5], [2]]), np.array([[1.0], [3]])
    assert stats.probability_of_improvement(x, y) == pytest.approx(0.75)
    assert stats.probability_of_improvement(y, x) == pytest.approx(0.25)
    # a second task where x always loses: averaged over tasks (0.75 + 0) / 2
    x2 = np.hstack([x, np.zeros((3, 1))])
    y2 = np.hstack([y, np.ones((2, 1))])
    assert stats.probability_of_improvement(x2, y2) == pytest.approx(0.375)
    # identical samples: one half
    assert stats.probability_of_improvement(x, x) == pytest.approx(0.5)


def test_probability_of_improvement_is_the_mann_whitney_statistic():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 5, (7, 1)).astype(float), rng.integers(0, 5, (4, 1)).astype(float)
    u = scipy.stats.mannwhitneyu(x[:, 0], y[:, 0], alternative="greater").statistic
    assert stats.probability_of_improvement(x, y) == pytest.approx(u / (7 * 4))


def test_percentile_interval_hand_worked():
    low, high = stats.percentile_interval(np.arange(101.0), 0.95)
    assert (low, high) == pytest.approx((2.5, 97.5))


def test_bootstrap_of_two_runs_hand_worked():
    # runs (0, 1): a replicate's mean is 0 (1/4), 0.5 (1/2) or 1 (1/4). The 30th and 70th
    # percentiles (level 0.4) both fall on 0.5; the 2.5th and 97.5th on 0 and 1.
    ci = stats.bootstrap_ci([0.0, 1.0], "mean", reps=4000, level=0.4, seed=0)
    assert (ci.point, ci.low, ci.high) == (0.5, 0.5, 0.5)
    ci = stats.bootstrap_ci([0.0, 1.0], "mean", reps=4000, level=0.95, seed=0)
    assert (ci.low, ci.high) == (0.0, 1.0)


def test_bootstrap_is_stratified_by_task():
    # task 0's runs are 1..4 and task 1's are 10..40: a resampled task-0 column only ever
    # holds task-0 scores, so its mean's interval stays inside [1, 4]
    task0 = lambda s: s[..., :, 0].mean(axis=-1)
    ci = stats.bootstrap_ci(SCORES, task0, reps=2000, seed=1)
    assert 1 <= ci.low <= ci.point <= ci.high <= 4
    draws = stats.stratified_resample(SCORES, 50, np.random.default_rng(0))
    assert draws.shape == (50, 4, 2)
    assert set(np.unique(draws[..., 0])) <= {1.0, 2.0, 3.0, 4.0}
    assert set(np.unique(draws[..., 1])) <= {10.0, 20.0, 30.0, 40.0}


def test_constant_scores_have_a_point_interval():
    ci = stats.bootstrap_ci([5.0, 5.0, 5.0], "iqm", reps=100, seed=0)
    assert (ci.point, ci.low, ci.high) == (5.0, 5.0, 5.0)


# Pinned: numpy's default_rng(seed) (PCG64) and Generator.integers fix every replicate.
TEN = [12.0, 15, 9, 20, 11, 17, 14, 8, 16, 13]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("iqm", (13.5, 10.833333333333334, 16.0)),
        ("mean", (13.5, 11.4, 15.7)),
        ("median", (13.5, 10.5, 16.0)),
    ],
)
def test_bootstrap_interval_pinned(name, expected):
    ci = stats.bootstrap_ci(TEN, name, reps=2000, level=0.95, seed=0)
    assert (ci.point, ci.low, ci.high) == pytest.approx(expected, abs=1e-9)
    assert ci.level == 0.95


def test_bootstrap_interval_pinned_two_tasks():
    ci = stats.bootstrap_ci(SCORES, "mean", reps=1000, seed=7)
    assert (ci.point, ci.low, ci.high) == pytest.approx((13.75, 8.371875, 18.875), abs=1e-9)


def test_probability_of_improvement_interval_pinned():
    ci = stats.probability_of_improvement_ci(TEN, [10.0, 11, 12, 9, 13], reps=2000, seed=0)
    assert (ci.point, ci.low, ci.high) == pytest.approx((0.72, 0.45, 0.95), abs=1e-9)


def test_a_seed_or_a_generator_gives_the_same_interval():
    a = stats.bootstrap_ci(TEN, "iqm", reps=300, seed=11)
    b = stats.bootstrap_ci(TEN, "iqm", reps=300, seed=np.random.default_rng(11))
    assert a == b


def test_batch_intervals():
    point, low, high = stats.bootstrap_ci(np.stack([SCORES, SCORES + 100]), "mean", reps=500)
    np.testing.assert_allclose(point, [13.75, 113.75])
    assert np.all(low <= point) and np.all(point <= high)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: stats.bootstrap_ci([1.0, np.nan]), "NaN"),
        (lambda: stats.bootstrap_ci([]), "at least one"),
        (lambda: stats.bootstrap_ci([1.0, 2.0], reps=0), "reps"),
        (lambda: stats.bootstrap_ci([1.0, 2.0], level=1.0), "confidence level"),
        (lambda: stats.probability_of_improvement_ci(SCORES, [[1.0]]), "tasks"),
    ],
)
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_matches_rliable_where_it_imports():
    """rliable's own functions on the same data (skipped where rliable.library cannot import)."""
    pytest.importorskip("rliable.library", exc_type=ImportError)
    from rliable import library, metrics

    rng = np.random.default_rng(0)
    x, y = rng.normal(1.0, 1.0, (10, 3)), rng.normal(0.5, 1.0, (8, 3))
    assert stats.iqm(x) == pytest.approx(metrics.aggregate_iqm(x))
    assert stats.mean(x) == pytest.approx(metrics.aggregate_mean(x))
    assert stats.probability_of_improvement(x, y) == pytest.approx(
        metrics.probability_of_improvement(x, y)
    )
    # Different random draws: the intervals agree to bootstrap noise at 5k replicates.
    point, cis = library.get_interval_estimates(
        {"x": x}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=5000,
        random_state=np.random.RandomState(0),
    )  # fmt: skip
    ours = stats.bootstrap_ci(x, "iqm", reps=5000, seed=0)
    assert ours.point == pytest.approx(point["x"][0])
    assert (ours.low, ours.high) == pytest.approx(tuple(cis["x"][:, 0]), abs=0.05)
    # a pair: rliable resamples X's and Y's runs independently within each task, as here
    point, cis = library.get_interval_estimates(
        {"xy": (x, y)}, lambda a, b: np.array([metrics.probability_of_improvement(a, b)]),
        reps=5000, random_state=np.random.RandomState(0),
    )  # fmt: skip
    ours = stats.probability_of_improvement_ci(x, y, reps=5000, seed=0)
    assert ours.point == pytest.approx(point["xy"][0])
    assert (ours.low, ours.high) == pytest.approx(tuple(cis["xy"][:, 0]), abs=0.03)
