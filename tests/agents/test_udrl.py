"""UDRL (issue 12): the episode store by hand, command bookkeeping, command following on the
probe envs, bad input; the CartPole learning test is slow."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.agents.test_model_free_learning import N_SEEDS, SEED, _score
from tests.agents.test_model_free_probes import OBS, continuous_probe, discrete_probe

from ajax.agents.udrl import UDRL, UDRLConfig
from ajax.agents.udrl import update as udrl
from ajax.agents.udrl.store import (
    Episodes,
    Recorder,
    best_command_stats,
    is_stored,
    merge_best,
    record_step,
    returns_to_go,
)
from ajax.training.loop import Tick
from ajax.validation import ConfigError


def _store(rets, max_len=3):
    s = Episodes.empty(len(rets), max_len, 1, (), jnp.int32)
    return s.replace(ret=jnp.asarray(rets, jnp.float32), length=jnp.ones(len(rets), jnp.int32))


def test_merge_keeps_the_best_of_store_and_candidates():
    store = _store([1.0, 2.0, 10.0]).replace(
        obs=jnp.arange(3.0)[:, None, None] * jnp.ones((1, 3, 1))
    )
    new = _store([3.0, 5.0]).replace(obs=jnp.full((2, 3, 1), 7.0))
    merged = merge_best(store, new)
    assert sorted(np.asarray(merged.ret).tolist()) == [3.0, 5.0, 10.0]
    assert float(merged.obs[2, 0, 0]) == 2.0  # the 10-return episode is untouched
    # Candidates that did not end (-inf) never displace anything, empty slots fill first.
    merged = merge_best(_store([-np.inf, 4.0, 1.0]), _store([2.0, -np.inf]))
    assert sorted(np.asarray(merged.ret).tolist()) == [1.0, 2.0, 4.0]
    merged = merge_best(_store([1.0, 8.0, 10.0]), _store([9.0, 0.0]))
    assert sorted(np.asarray(merged.ret).tolist()) == [8.0, 9.0, 10.0]


def test_returns_to_go_and_recording_by_hand():
    rtg = returns_to_go(jnp.array([[1.0, 2.0, 3.0, 9.0]]), jnp.array([3]))
    np.testing.assert_allclose(rtg, [[6.0, 5.0, 3.0, 0.0]])
    store = Episodes.empty(4, 4, 1, (), jnp.int32)
    rec = Recorder.empty(2, 4, 1, (), jnp.int32)
    # env 0: rewards 1, 2, 3 then ends; env 1: rewards 5 each step, never ends but fills L=4.
    for t, r0 in enumerate([1.0, 2.0, 3.0, 0.0]):
        obs = jnp.array([[t], [10 + t]], jnp.float32)
        store, rec = record_step(store, rec, obs, jnp.array([t, 1]), jnp.array([r0, 5.0]),
                                 jnp.array([t == 2, False]))  # fmt: skip
    rets = np.asarray(store.ret)
    assert sorted(rets[np.asarray(is_stored(store.ret))].tolist()) == [6.0, 20.0]
    # empty slots stay finite: the run's divergence check stops a run on any non-finite float
    assert np.isfinite(rets).all()
    i = int(np.argmax(rets == 6.0))
    np.testing.assert_allclose(store.rtg[i, :3], [6.0, 5.0, 3.0])
    assert int(store.length[i]) == 3 and store.action[i, :3].tolist() == [0, 1, 2]
    j = int(np.argmax(rets == 20.0))
    np.testing.assert_allclose(store.obs[j, :, 0], [10, 11, 12, 13])
    assert rec.length.tolist() == [1, 0]  # env 0 started its next episode at t = 3


def test_command_stats_and_the_command_bookkeeping():
    store = _store([-np.inf, 2.0, 4.0, 9.0]).replace(length=jnp.array([0, 2, 4, 6]))
    mean, std, length = best_command_stats(store, 2)  # the best two: returns 9 and 4
    np.testing.assert_allclose([mean, std, length], [6.5, 2.5, 5.0])
    assert np.allclose(best_command_stats(_store([-np.inf] * 3), 2), [0.0, 0.0, 1.0])
    config = UDRLConfig(last_few=2)
    state = udrl.UDRLState(None, store, None)
    carry = (jnp.array([10.0, 10.0]), jnp.array([5.0, 1.0]))
    tick = Tick(jnp.zeros((2, 1)), jnp.array([3.0, 3.0]), jnp.array([False, True]),
                jnp.zeros(2, bool), jnp.zeros(2, bool))  # fmt: skip
    d_r, d_h = udrl.command(config, state, carry, tick, jax.random.key(0), True)
    # env 0 continues: 10 - 3 and 5 - 1; env 1 starts: the top of [mean, mean + std], mean length
    np.testing.assert_allclose(d_r, [7.0, 9.0])
    np.testing.assert_allclose(d_h, [4.0, 5.0])
    d_r, d_h = udrl.command(config, state, (carry[0], jnp.array([1.0, 1.0])), tick.replace(
        is_first=jnp.zeros(2, bool)), jnp.array(0), True)  # fmt: skip
    np.testing.assert_allclose(d_h, [1.0, 1.0])  # the horizon never drops below 1
    sampled = udrl.command(config, state, carry, tick.replace(is_first=jnp.ones(2, bool)),
                           jax.random.key(1), False)[0]  # fmt: skip
    assert np.all((6.5 <= sampled) & (sampled <= 9.0))
    # a configured evaluation command replaces the range's top at episode starts only
    fixed = UDRLConfig(last_few=2, eval_command_return=500.0, eval_command_horizon=400.0)
    d_r, d_h = udrl.command(fixed, state, carry, tick, jax.random.key(0), True)
    np.testing.assert_allclose(d_r, [7.0, 500.0])
    np.testing.assert_allclose(d_h, [4.0, 400.0])
    sampled = udrl.command(fixed, state, carry, tick, jax.random.key(1), False)[0]
    assert 6.5 <= float(sampled[1]) <= 9.0  # exploration keeps Alg. 2's command
    # command_spread floors the std at a fraction of |mean|: 0.5 * 6.5 = 3.25 > 2.5 widens the
    # range to [6.5, 9.75]; 0.2 * 6.5 = 1.3 < 2.5 leaves Alg. 2's [6.5, 9.0]
    for spread, top in ((0.5, 9.75), (0.2, 9.0)):
        wide = UDRLConfig(last_few=2, command_spread=spread)
        np.testing.assert_allclose(
            udrl.command(wide, state, carry, tick, None, True)[0], [7.0, top]
        )
    negative = state.replace(store=_store([-np.inf, -2.0, -4.0, -9.0]))  # best two: -2, -4
    wide = UDRLConfig(last_few=2, command_spread=0.5)  # mean -3, std 1, floor 1.5: top -1.5
    np.testing.assert_allclose(
        udrl.command(wide, negative, carry, tick, None, True)[0], [7.0, -1.5]
    )


def _behaviour(algo, state, d_r):
    cmd = (jnp.full((1,), d_r), jnp.ones((1,)))
    return udrl._pi(algo.config, state, state.actor_state.params, OBS, *cmd)


# Returns of order 1 on the probes: no need to shrink the command (scales 1).
PROBE = dict(n_envs=8, n_steps=4, store_size=512, last_few=64, batch_size=64, n_updates=20,
             hidden=32, learning_rate=3e-3, eval_freq=256, eval_episodes=1, return_scale=1.0,
             horizon_scale=1.0)  # fmt: skip


def test_udrl_follows_its_command_on_the_discrete_probe():
    """One step, reward = [a == 1]: every episode is kept (512 slots, 384 episodes), so B learns
    both commands: return 1 -> action 1, return 0 -> action 0; its greedy eval earns 1."""
    algo = UDRL(env=discrete_probe(), config=UDRLConfig(**PROBE))
    result = algo.train(seed=0, total_steps=384)
    state = result.state.agent
    p1 = lambda d_r: float(jnp.exp(_behaviour(algo, state, d_r).log_prob(jnp.array([1])))[0])
    assert p1(1.0) > 0.95 and p1(0.0) < 0.05
    assert float(result.metrics["eval_return"][-1]) == 1.0


def test_udrl_follows_its_command_on_the_continuous_probe():
    """r(a) = -(a - 0.5)^2, every episode kept: commanded return 0 -> a = 0.5; -0.5625 ->
    a = -0.25 and -1 -> a = -0.5, the only actions in [-1, 1] that earn them. Measured 0.507,
    -0.253, -0.589."""
    config = UDRLConfig(**{**PROBE, "n_updates": 100, "store_size": 1_024})
    algo = UDRL(env=continuous_probe(), config=config)
    state = algo.train(seed=0, total_steps=1_024).state.agent
    mode = lambda d_r: float(udrl.greedy(_behaviour(algo, state, d_r))[0, 0])
    assert abs(mode(0.0) - 0.5) < 0.1
    assert abs(mode(-0.5625) + 0.25) < 0.1
    assert abs(mode(-1.0) + 0.5) < 0.15


def test_udrl_bad_input_names_the_fix():
    with pytest.raises(ConfigError, match="last_few"):
        UDRLConfig(store_size=10, last_few=20)
    with pytest.raises(ConfigError, match="eval_freq"):
        UDRLConfig(n_envs=16, n_steps=64, eval_freq=1000)
    with pytest.raises(ConfigError, match="eval_command_horizon"):
        UDRLConfig(eval_command_return=500.0)
    with pytest.raises(ConfigError, match="eval_command_horizon"):
        UDRLConfig(eval_command_return=500.0, eval_command_horizon=0.5)
    with pytest.raises(ConfigError, match="command_spread"):
        UDRLConfig(command_spread=-0.1)
    env = continuous_probe()
    env.spec = env.spec.replace(max_episode_steps=None)
    with pytest.raises(ValueError, match="max_episode_steps"):
        UDRL(env=env).train(total_steps=256)


# Alg. 2 alone (command_spread 0) does not get there, measured 2026-12-06: store 50 / last_few
# 10 / 100 updates went 116 -> 195 and 106 -> 155 over 1,048,576 env steps; the defaults reached
# 269 and 332 at 4,194,304 steps. The best stored episodes come to share one return (std 0), so
# the exploratory command stops asking for more (docs/model_free.md M15). A floor under the
# command's spread keeps it asking.
@pytest.mark.slow  # ~165 s on 2 cores
def test_udrl_solves_cartpole():
    """CartPole-v1, 2 vmapped seeds, the defaults with command_spread 0.1: > 450 within
    1,048,576 env steps (the exploratory command's top at evaluation)."""
    config = UDRLConfig(command_spread=0.1, eval_freq=65_536)
    result = UDRL(env="CartPole-v1", config=config).train(
        seed=SEED, total_steps=1_048_576, n_seeds=N_SEEDS
    )
    assert _score(result.metrics) > 450
