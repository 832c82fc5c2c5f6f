"""When DreamerV3 starts training and how many updates follow, against the official driver.

danijar/dreamerv3@e3f0224: the driver counts every env's step (embodied/run/train.py:59, the
callbacks run env by env, embodied/core/driver.py:78-80); the replay adds one window (item)
per row once an env holds ``batch_length + replay_context`` rows (embodied/core/replay.py:
108-111); ``trainfn`` returns until the replay holds batch_size x batch_length items
(train.py:71-72), then asks ``elements.when.Ratio`` how many updates to run (train.py:73),
whose first call returns 1 and starts its count there (elements/when.py:38-43).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from ajax.agents.dreamerv3 import DreamerV3Config
from ajax.agents.dreamerv3.agent import ratio_clock


class OfficialRatio:
    """elements/when.py:26-43, line for line."""

    def __init__(self, ratio):
        self._ratio, self._prev = ratio, None

    def __call__(self, step):
        if self._prev is None:
            self._prev = step
            return 1
        repeats = int((step - self._prev) * self._ratio)
        self._prev += repeats / self._ratio
        return repeats


def official_counts(n_envs, ticks, batch_size, batch_length, train_ratio, context=1):
    """Updates per driver tick of train.py's loop (no env ever fills the replay's capacity)."""
    length = batch_length + context
    should_train = OfficialRatio(train_ratio / (batch_size * batch_length))
    rows, items, step, counts = [0] * n_envs, 0, 0, []
    for _ in range(ticks):
        count = 0
        for env in range(n_envs):  # driver.py:78-80: each env's callbacks in turn
            step += 1  # train.py:59
            rows[env] += 1  # replay.add: the env's stream gains a row ...
            items += rows[env] >= length  # ... and yields a window once it holds `length`
            if items < batch_size * batch_length:  # train.py:71
                continue
            count += should_train(step)
        counts.append(count)
    return counts


def ajax_counts(cfg, ticks):
    """The clock's updates per tick, the step after each tick as the loop passes it."""
    clock = ratio_clock(cfg)
    steps = cfg.n_envs * jnp.arange(1, ticks + 1, dtype=jnp.int32)
    _, counts = jax.lax.scan(lambda c, s: clock.tick(c, s)[::-1], clock.init(), steps)
    return [int(c) for c in counts]


def test_one_env_trains_first_at_step_1088():
    """16 x 64 windows of 65 rows: the 1,024th window arrives with row 1,024 + 64 = 1,088, which
    trains once; ratio 32 / 1024 then gives one more update per 32 steps: 1 + floor((2000 -
    1088) / 32) = 29 updates in the first 2,000 steps."""
    cfg = DreamerV3Config.preset("1m")
    assert cfg.first_train_step == 1088
    counts = ajax_counts(cfg, 2000)
    assert counts.index(1) == 1087 and sum(counts[:1087]) == 0  # step 1088 is tick 1088
    assert sum(counts) == 29
    assert counts == official_counts(1, 2000, 16, 64, 32.0)


def test_sixteen_envs_train_first_at_step_2048():
    """The official 16 envs: every env adds a window per row from its 65th row, so 16 x 64 =
    1,024 windows arrive at tick 128 (step 2,048); by tick 200 (step 3,200), 1 + (3200 - 2048)
    / 32 = 37 updates, at most 1 per tick, with no burst at the start (Ratio accrues nothing
    while the driver waits)."""
    cfg = DreamerV3Config.preset("1m", n_envs=16)
    assert cfg.first_train_step == 2048
    counts = ajax_counts(cfg, 200)
    assert counts.index(1) == 127 and sum(counts) == 37 and max(counts) == 1
    assert counts == official_counts(16, 200, 16, 64, 32.0)


@pytest.mark.parametrize(
    "n_envs, batch_size, batch_length, train_ratio, ticks",
    [
        (3, 16, 64, 48.0, 600),  # the first update mid-tick (step 1,216 of 1,216..1,218)
        (2, 4, 8, 512.0, 80),  # 16 updates per step: many per tick from the first one
        (5, 2, 4, 1.0, 400),  # one update per 8 env steps, ticks of 5
        (1, 2, 8, 0.5, 300),  # tests/training/test_run_resume.py's setting
    ],
)
def test_updates_per_tick_match_the_official_driver(
    n_envs, batch_size, batch_length, train_ratio, ticks
):
    cfg = DreamerV3Config.preset(
        "1m", n_envs=n_envs, batch_size=batch_size, batch_length=batch_length,
        train_ratio=train_ratio, eval_freq=max(n_envs, 16),
    )  # fmt: skip
    want = official_counts(n_envs, ticks, batch_size, batch_length, train_ratio)
    assert ajax_counts(cfg, ticks) == want
    first = next(i for i, c in enumerate(want) if c)
    assert (first + 1) * n_envs >= cfg.first_train_step > first * n_envs


def test_the_first_mid_tick_update_counts_from_its_own_step():
    """3 envs at ratio 48 / 1024: s0 = 1024 + 3 x 64 = 1216 falls in tick 406 (steps 1216 to
    1218); that tick runs 1 + floor(2 x 3 / 64) = 1 update, and by step 1800, 1 + floor(584 x 3
    / 64) = 28."""
    cfg = DreamerV3Config.preset("1m", n_envs=3, train_ratio=48.0)
    counts = ajax_counts(cfg, 600)
    assert cfg.first_train_step == 1216 and counts.index(1) == 405
    assert sum(counts) == 1 + (600 * 3 - 1216) * 3 // 64 == 28
