"""TD-MPC2 agent: planning through the world model (B13, B9), replay windows (B18), smoke runs."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2 import (
    TDMPC2,
    ActState,
    PlannerConfig,
    TDMPC2Config,
    WorldModel,
    draw_act_noise,
)
from ajax.agents.tdmpc2.act import act, plan_one
from ajax.agents.tdmpc2.agent import can_sample, replay_agent, sample_batch
from ajax.agents.tdmpc2.update import init_state
from ajax.buffers import sequence
from ajax.environments import make_env
from ajax.training.loop import Tick

SMALL_PLAN = PlannerConfig(num_samples=16, num_pi_trajs=2, num_elites=4, iterations=2)
CFG = TDMPC2Config.preset(
    1, enc_dim=16, mlp_dim=16, latent_dim=16, batch_size=8, planner=SMALL_PLAN, episodic=True
)
O, A = 3, 2


@pytest.fixture(scope="module")
def params():
    model = WorldModel(CFG, A)
    return model, init_state(CFG, model, jax.random.PRNGKey(0), O).params


def test_b13_t2_agent_plan_eval_drops_only_final_noise(params):
    model, p = params
    noise = draw_act_noise(jax.random.PRNGKey(1), CFG, A)
    obs, prev = jnp.ones((O,)), jnp.zeros((CFG.planner.horizon, A))
    run = jax.jit(lambda e: plan_one(CFG, model, 0.95, p, obs, prev, True, noise, e))
    train, ev = run(False), run(True)
    np.testing.assert_array_equal(train.mean, ev.mean)  # same MPPI state
    np.testing.assert_array_equal(train.elite_index, ev.elite_index)
    elite = ev.elite_actions[0, ev.elite_index]
    np.testing.assert_allclose(ev.action, jnp.clip(elite, -1, 1), rtol=1e-6)
    expect = jnp.clip(elite + train.std[0] * noise.plan.action, -1, 1)
    np.testing.assert_allclose(train.action, expect, rtol=1e-6)


@pytest.mark.slow  # 26 s on 2 cores
def test_b13_t2_agent_act_vmap_over_envs_equals_loop(params):
    model, p = params
    n = 3
    obs = jax.random.normal(jax.random.PRNGKey(2), (n, O))
    state = ActState(
        prev_mean=jax.random.uniform(jax.random.PRNGKey(3), (n, CFG.planner.horizon, A)),
        t0=jnp.array([True, False, False]),
    )
    key = jax.random.PRNGKey(4)
    actions, new = jax.jit(lambda s, o, k: act(CFG, model, 0.95, p, s, o, k, False))(
        state, obs, key
    )
    assert not bool(new.t0.any())
    keys = jax.random.split(key, n)
    for i in range(n):
        noise = draw_act_noise(keys[i], CFG, A)
        one = plan_one(CFG, model, 0.95, p, obs[i], state.prev_mean[i], state.t0[i], noise, False)
        np.testing.assert_allclose(actions[i], one.action, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new.prev_mean[i], one.mean, rtol=1e-5, atol=1e-6)


def test_b18_t2_agent_windows_stay_inside_completed_episodes():
    """Rows are transitions; a window of H transitions never crosses an episode start and the
    running (uncommitted) episode is never sampled; obs[H] is the window's last next_obs."""
    H, n = 3, 2
    row = {
        "obs": jnp.zeros(()),
        "action": jnp.zeros(()),
        "reward": jnp.zeros(()),
        "is_first": True,
        "is_last": False,
        "is_terminal": False,
        "next_obs": jnp.zeros(()),
    }
    buf = sequence.init(row, n, 64)
    ep_len = [5, 4]
    t_in_ep = [0, 0]
    for step in range(23):
        first, last = [], []
        for e in range(n):
            first.append(t_in_ep[e] == 0)
            last.append(t_in_ep[e] == ep_len[e] - 1)
        obs = jnp.asarray([100 * e + step for e in range(n)], jnp.float32)
        buf = sequence.add(
            buf,
            {
                "obs": obs,
                "action": obs,
                "reward": obs,
                "is_first": jnp.asarray(first),
                "is_last": jnp.asarray(last),
                "is_terminal": jnp.asarray(last),
                "next_obs": obs + 0.5,
            },
        )
        t_in_ep = [(t + 1) % ep_len[e] for e, t in enumerate(t_in_ep)]
    assert bool(can_sample(buf, H))
    batch = sample_batch(buf, jax.random.PRNGKey(0), 256, H)
    obs = np.asarray(batch.obs)
    assert obs.shape == (256, H + 1)
    np.testing.assert_array_equal(np.diff(obs[:, :H], axis=1), 1.0)  # consecutive rows
    np.testing.assert_array_equal(obs[:, H], obs[:, H - 1] + 0.5)  # final next_obs
    for row_obs in obs:
        e, start = int(row_obs[0] // 100), int(row_obs[0] % 100)
        assert start % ep_len[e] <= ep_len[e] - H  # inside one episode
        assert start + H <= (23 // ep_len[e]) * ep_len[e]  # only completed episodes
    # terminations only ever on the last transition of a window here
    assert not np.asarray(batch.terminated)[:, :-1].any()


def test_t2_agent_config_model_size_and_validation():
    cfg = TDMPC2Config(model_size=1)
    assert cfg.arch.mlp_dim == 384 and cfg.arch.num_q == 2 and cfg.mlp_dim is None
    assert TDMPC2Config(model_size=1, mlp_dim=64).arch.mlp_dim == 64
    assert cfg.seed_steps_for(200) == 1000 and cfg.seed_steps_for(1000) == 5000
    with pytest.raises(ValueError, match="model_size = 2 is invalid"):
        TDMPC2Config(model_size=2)
    with pytest.raises(ValueError, match="n_envs"):
        TDMPC2Config(n_envs=0)
    with pytest.raises(ValueError, match="discrete"):
        TDMPC2("CartPole-v1", CFG)


# ~90 s; the default run trains TD-MPC2 end to end in tests/test_cli.py (train, then eval).
@pytest.mark.slow
def test_t2_agent_smoke_pendulum_two_envs():
    """A few hundred steps through the whole jitted loop: seed steps, pretraining, updates,
    planning and the planned evaluation; two vmapped seeds, two envs."""
    cfg = TDMPC2Config.preset(
        1,
        enc_dim=16,
        mlp_dim=16,
        latent_dim=16,
        batch_size=8,
        planner=SMALL_PLAN,
        seed_steps=200,
        eval_freq=200,
        eval_episodes=2,
        n_envs=2,
    )
    result = TDMPC2("Pendulum-v1", cfg).train(seed=0, total_steps=400, n_seeds=2)
    m = result.metrics
    np.testing.assert_array_equal(m["step"], [[200, 400], [200, 400]])
    assert np.isfinite(np.asarray(m["eval_return"])).all()
    assert np.asarray(m["eval_return"]).max() <= 0.0  # Pendulum rewards are <= 0
    # the learner trained: the policy has moved off its initialisation
    fresh = TDMPC2("Pendulum-v1", cfg).make_chunks(400).init(jax.random.PRNGKey(0))
    moved = jax.tree.map(
        lambda a, b: float(jnp.max(jnp.abs(a[0] - b))),
        result.state.agent.params["pi"],
        fresh.agent.params["pi"],
    )
    assert max(jax.tree.leaves(moved)) > 0


def test_t2_a_round_of_episodes_is_sampleable_from_the_next_ticks_updates():
    """DESIGN.md 4.4 (open item O1, closed): the updates of the tick that ends an episode do not
    see it, those of the following tick do, as online_trainer.py adds a finished episode at the
    top of the next iteration, after the update of the step that ended it."""
    env = make_env("Pendulum-v1", action_repeat=CFG.action_repeat)
    agent = replay_agent(CFG, env, 100)
    obs, no = jnp.zeros((1, env.spec.observation_shape[0])), jnp.zeros((1,), bool)
    tick = Tick(obs, jnp.zeros((1,)), ~no, no, no)
    _, replay = agent.init(jax.random.PRNGKey(0), tick)
    horizon, episode = CFG.planner.horizon, 5
    for t in range(episode):
        done = jnp.asarray([t == episode - 1])
        ts = SimpleNamespace(reward=jnp.zeros((1,)), done=done, terminated=no, final_obs=obs)
        replay = agent.write(replay, tick.replace(is_first=jnp.asarray([t == 0])),
                             jnp.zeros((1, env.spec.action_dim)), (), ts)  # fmt: skip
        assert not bool(can_sample(replay.for_updates(), horizon)), t  # the ending tick included
    assert bool(can_sample(replay.buffer, horizon))  # the ring has committed the episode
    ts = SimpleNamespace(reward=jnp.zeros((1,)), done=no, terminated=no, final_obs=obs)
    replay = agent.write(replay, tick, jnp.zeros((1, env.spec.action_dim)), (), ts)
    assert bool(can_sample(replay.for_updates(), horizon))  # the next tick's updates see it
