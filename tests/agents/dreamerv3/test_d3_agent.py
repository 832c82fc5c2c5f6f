"""DreamerV3 agent: presets and parameter counts, hold ticks, the train-ratio clock, the
returns inside the losses, probes that pin the world model and critic, and a jitted run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3 import MODEL_SIZES, DreamerV3, DreamerV3Config
from ajax.agents.dreamerv3.losses import Batch, replay_value_loss
from ajax.agents.dreamerv3.model import Nets, param_count
from ajax.agents.dreamerv3.rssm import RSSMState, initial_state
from ajax.environments import Box, Discrete, EnvSpec, SimEnv, SimStep, make_env
from ajax.environments.wrappers import ExplicitReset
from ajax.training.loop import Tick


def _count(cfg, obs_dim, action_dim, discrete):
    nets = Nets.create(cfg, obs_dim, action_dim, discrete)
    return param_count(jax.eval_shape(lambda k: nets.init(k, obs_dim), jax.random.PRNGKey(0)))


def test_d3_size1m_parameter_count_matches_official():
    """The official size1m builds 637,446 trained parameters (enc, dyn, dec, rew, con, pol,
    val; the slow critic is not trained) for 5 vector features and 1 continuous action."""
    assert _count(DreamerV3Config.preset("1m"), 5, 1, False) == 637_446


def test_d3_parameter_counts_per_module_cartpole():
    """Hand-counted per module for CartPole (4 features, 2 discrete actions) at size1m."""
    nets = Nets.create(DreamerV3Config.preset("1m"), 4, 2, True)
    params = jax.eval_shape(lambda k: nets.init(k, 4), jax.random.PRNGKey(0))
    counts = {k: param_count(v) for k, v in params.items()}
    # enc: (4*64+64+64) + 2 (64*64+64+64); dec: 3 layers on 640 features + Linear(64 -> 4)
    assert counts["enc"] == 384 + 2 * 4224
    assert counts["dec"] == (640 * 64 + 128) + 2 * 4224 + 260
    assert counts["rew"] == (640 * 64 + 128) + 64 * 255 + 255
    assert counts["con"] == (640 * 64 + 128) + 65
    assert counts["pol"] == (640 * 64 + 128) + 2 * 4224 + 130
    assert sum(counts.values()) == 637_381


def test_d3_presets_and_bad_input():
    assert list(MODEL_SIZES) == ["1m", "12m", "25m", "50m", "100m", "200m", "400m"]
    assert DreamerV3Config.preset("12M").arch.deter == 2048
    with pytest.raises(ValueError, match="model_size = '3m' is invalid: it must be one of '1m'"):
        DreamerV3Config.preset("3m")
    with pytest.raises(ValueError, match="batch_length = 1 is invalid"):
        DreamerV3Config(batch_length=1)
    with pytest.raises(ValueError, match="train_ratio = 0 is invalid: it must be > 0"):
        DreamerV3Config(train_ratio=0)
    with pytest.raises(
        ValueError,
        match=r"buffer_size = 32 is invalid: it must be enough rows per env for batch_size x "
        r"batch_length = 1024 windows of 65 rows",
    ):
        DreamerV3Config(buffer_size=32)
    DreamerV3Config(buffer_size=1024 + 64)  # exactly enough for training to start
    assert DreamerV3Config().updates_per_step == pytest.approx(32 / 1024)


class CountSim:
    """Observation = step within the episode; episodes of 3 transitions, reward 1 each."""

    def init(self, key):
        del key
        return SimStep(
            jnp.zeros((), jnp.int32), jnp.zeros((1,)), jnp.zeros(()), jnp.zeros((), bool)
        )

    def transition(self, key, state, action):
        del key, action
        t = state + 1
        return SimStep(t, t.astype(jnp.float32)[None], jnp.ones(()), t >= 3)


def test_explicit_reset_hold_tick_stream():
    """An episode of 3 transitions takes 4 ticks: first obs, 2 mid, last obs (is_last,
    is_terminal); the hold tick emits the next first obs with reward 0 and is_first."""
    env = ExplicitReset(SimEnv(CountSim(), EnvSpec("count", "probe", (1,), Discrete(2), 10)))
    ts = env.reset(jax.random.PRNGKey(0))
    ticks = [Tick.reset(ts)]
    for _ in range(8):
        ts = env.step(jax.random.PRNGKey(1), ts.state, jnp.zeros((), jnp.int32))
        ticks.append(Tick.of(ts))
    obs = [float(t.obs[0]) for t in ticks]
    assert obs == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    assert [bool(t.is_first) for t in ticks] == [1, 0, 0, 0, 1, 0, 0, 0, 1]
    assert [bool(t.is_last) for t in ticks] == [0, 0, 0, 1, 0, 0, 0, 1, 0]
    assert [bool(t.is_terminal) for t in ticks] == [0, 0, 0, 1, 0, 0, 0, 1, 0]
    assert [float(t.reward) for t in ticks] == [0, 1, 1, 1, 0, 1, 1, 1, 0]


def _official_lambda_return(last, term, rew, val, boot, disc, lam):
    """DreamerV3's lambda_return as spec 000 B11 states it, batch-major, in numpy."""
    live = (1 - term)[:, 1:] * disc
    cont = (1 - last)[:, 1:] * lam
    interm = rew[:, 1:] + (1 - cont) * live * boot[:, 1:]
    rets = [boot[:, -1]]
    for t in reversed(range(live.shape[1])):
        rets.append(interm[:, t] + live[:, t] * cont[:, t] * rets[-1])
    return np.stack(list(reversed(rets))[:-1], 1)


@pytest.mark.slow  # 40-75 s; the parity fixtures check the replay-value loss against the official step
def test_d3_replay_value_returns_match_reference_recursion():
    """The replay critic's targets: the value head trained towards R with an exactly zero
    (outscale 0) critic; CE against R equals CE against the reference recursion's R."""
    cfg = DreamerV3Config.preset("1m", slowreg=0.0)
    nets = Nets.create(cfg, 2, 1, False)
    params = nets.init(jax.random.PRNGKey(0), 2)
    b, t = 3, 6
    rng = np.random.default_rng(0)
    rew = rng.normal(size=(b, t)).astype(np.float32)
    last = np.zeros((b, t), np.float32)
    last[1, 3] = 1
    term = np.zeros((b, t), np.float32)
    term[2, 4] = 1
    boot = rng.normal(size=(b, t)).astype(np.float32)
    batch = Batch(
        obs=jnp.zeros((b, t, 2)), prev_action=jnp.zeros((b, t, 1)), reward=jnp.asarray(rew),
        is_first=jnp.zeros((b, t), bool), is_last=jnp.asarray(last, bool),
        is_terminal=jnp.asarray(term, bool),
    )  # fmt: skip
    post = initial_state(cfg.rssm(1, False), b)
    post = jax.tree.map(lambda x: jnp.repeat(x[:, None], t, 1), post)
    _, aux = replay_value_loss(nets, cfg, params, params["val"], post, batch, jnp.asarray(boot))
    want = _official_lambda_return(last, term, rew, None, boot, 1 - 1 / 333, 0.95)
    np.testing.assert_allclose(aux["metrics"]["repval_ret"], want.mean(), rtol=1e-5)
    # zero critic: uniform logits over 255 bins, CE = log(255) wherever weight = 1
    weight = 1 - last[:, :-1]
    np.testing.assert_allclose(
        aux["metrics"]["loss/repval"], np.log(255.0) * weight.mean(), rtol=1e-5
    )


class ProbeSim:
    """Three probes in one env; each episode is one of two kinds, drawn at reset.

    * one-step reward: from A (obs e0) the first action ends the episode, reward 1 for action 1;
    * delayed reward: from B (obs e1) any action leads to M (obs e2) with reward 0, then any
      action ends the episode with reward 1;
    * discount: with horizon 2 the discount 1 - 1/2 = 0.5 is folded into the continue label,
      so V(B) = 0 + 0.5 V(M) = 0.5 while V(A) = V(M) = 1.
    The end observation is all zeros. State: 0 A, 1 B, 2 M, 3 end.
    """

    def init(self, key):
        state = jax.random.bernoulli(key).astype(jnp.int32)
        return SimStep(state, jax.nn.one_hot(state, 3), jnp.zeros(()), jnp.zeros((), bool))

    def transition(self, key, state, action):
        del key
        nxt = jnp.where(state == 1, 2, 3)
        reward = jnp.where(state == 0, (action == 1).astype(jnp.float32),
                           (state == 2).astype(jnp.float32))  # fmt: skip
        return SimStep(nxt, jax.nn.one_hot(nxt, 3), reward, nxt == 3)


PROBE = dict(
    batch_size=8, batch_length=8, train_ratio=64.0, learning_rate=1e-3, warmup=10,
    eval_freq=400, eval_episodes=4, horizon=2.0,
)  # fmt: skip


@pytest.fixture(scope="module")
def probe_run():
    env = SimEnv(ProbeSim(), EnvSpec("probe-discrete", "probe", (3,), Discrete(2), 2))
    algo = DreamerV3(env, DreamerV3Config.preset("1m", **PROBE))
    # 2400 steps: at 1200 (~1200 updates) a different CPU converged to another point (measured
    # here: continue at M 0.375, V(B) 0.95, where another machine passed); at 2400 the heads
    # sit at their labels (continue at M 0.45, V(B) 0.71).
    result = algo.train(seed=0, total_steps=2400)
    return algo, result


# slow: ~270 CPU s (2400 steps, ~2400 updates); the default run's 15-minute budget cannot hold
# it beside the rest (measured: the full default run took 19.3 min with it, resume included).
@pytest.mark.slow
def test_d3_probes_one_step_delayed_reward_and_discount(probe_run):
    """The world model predicts the one-step and the delayed reward and the continue
    probabilities (0.5 = the discount on live rows, ~0 at the end); the critic values A and M at
    ~1 and B clearly below M (the discount); the greedy policy takes action 1 in A (eval
    return 1).

    V(B) does not reach 0.5: under free bits (1 nat) the prior from B stays unsure whether M or
    the end comes next (measured after the 1200-step run: imagined first step from B has mean
    reward 0.64 and continue 0.14), so imagination's target for B lies above the replay-value
    target 0.5; the critic settles between (0.71 measured at 2400 steps). A critic that
    ignored the discount would value B like M."""
    from ajax.agents.dreamerv3.model import feat
    from ajax.agents.dreamerv3.rssm import observe_step

    algo, result = probe_run
    state = result.state.agent
    assert int(state.updates) > 2000
    np.testing.assert_allclose(result.metrics["eval_return"][-1], 1.0)
    nets, p, two_hot = Nets.create(algo.config, 3, 2, True), state.params, algo.config.two_hot()
    key = jax.random.PRNGKey(3)

    def episode(states, actions):
        """Posterior features along one episode of observed states (0 A, 1 B, 2 M, 3 end)."""
        carry, xs = initial_state(nets.rssm.config, 1), []
        for t, (s, a) in enumerate(zip(states, actions, strict=True)):
            tokens = nets.apply("enc", p, jax.nn.one_hot(jnp.asarray([s]), 3))
            carry, _ = observe_step(nets.rssm, p["dyn"], carry, tokens, jnp.asarray([a]),
                                    jnp.asarray([t == 0]), key)  # fmt: skip
            xs.append(feat(RSSMState(carry.deter, carry.stoch)))
        return xs

    def heads(x):
        return (float(two_hot.decode(nets.apply("rew", p, x))[0]),
                float(jax.nn.sigmoid(nets.apply("con", p, x))[0, 0]),
                float(two_hot.decode(nets.apply("val", p, x))[0]))  # fmt: skip

    (_, con_a, val_a), (rew_a_end, con_a_end, _) = map(heads, episode([0, 3], [0, 1]))
    (_, con_b, val_b), (rew_m, con_m, val_m), (rew_b_end, con_b_end, _) = map(
        heads, episode([1, 2, 3], [0, 0, 0])
    )
    measured = dict(rew_a_end=rew_a_end, rew_m=rew_m, rew_b_end=rew_b_end, con_a=con_a,
                    con_b=con_b, con_m=con_m, con_a_end=con_a_end, con_b_end=con_b_end,
                    val_a=val_a, val_b=val_b, val_m=val_m)  # fmt: skip
    assert abs(rew_a_end - 1.0) < 0.15 and abs(rew_b_end - 1.0) < 0.15, measured
    assert abs(rew_m) < 0.15, measured
    assert all(abs(c - 0.5) < 0.1 for c in (con_a, con_b, con_m)), measured
    assert con_a_end < 0.1 and con_b_end < 0.1, measured
    assert abs(val_a - 1.0) < 0.25 and abs(val_m - 1.0) < 0.25, measured
    assert val_m - val_b > 0.05 and 0.4 < val_b < 0.95, measured


# ~80 s; the default run covers a vmapped continuous D3 run in test_run_resume (Pendulum, 2 seeds)
# and the clock's counts in test_d3_train_start.py.
@pytest.mark.slow
def test_d3_jitted_run_vmaps_seeds_on_continuous_env():
    """Pendulum: 2 vmapped seeds in one jitted run; losses finite, seeds differ, updates as the
    clock says (ratio 16 over 4 x 8 windows: one at step 4 x 8 + 8 = 40, when the replay holds
    32 windows, then one per 2 steps)."""
    cfg = DreamerV3Config.preset(
        "1m", batch_size=4, batch_length=8, train_ratio=16.0, eval_freq=100, eval_episodes=1
    )
    algo = DreamerV3(make_env("Pendulum-v1"), cfg)
    result = algo.train(seed=0, total_steps=200, n_seeds=2)
    metrics = result.metrics
    assert metrics["eval_return"].shape == (2, 2)
    assert np.all(np.isfinite(metrics["loss/total"]))
    assert not np.allclose(metrics["loss/total"][0], metrics["loss/total"][1])
    np.testing.assert_array_equal(result.state.agent.updates, [1 + (200 - 40) // 2] * 2)


def test_d3_refuses_unflattened_and_too_small_images():
    spec = EnvSpec("img", "probe", (4, 4), Box((-1.0,), (1.0,)), 5)
    with pytest.raises(ValueError, match="takes flat observations.*shape \\(4, 4\\)"):
        DreamerV3(SimEnv(CountSim(), spec))
    small = EnvSpec("img", "probe", (48,), Box((-1.0,), (1.0,)), 5, image_shape=(4, 4, 3))
    with pytest.raises(ValueError, match="too small for DreamerV3's CNN.*resize"):
        DreamerV3(SimEnv(CountSim(), small))


def test_d3_action_repeat_is_an_env_option_of_the_id():
    """``action_repeat`` (configs.yaml env.dmc.repeat) repeats in the env built from the id:
    Pendulum's 200 steps become 100 agent steps, in training and evaluation alike."""
    algo = DreamerV3("Pendulum-v1", DreamerV3Config.preset("1m", action_repeat=2))
    assert algo.env.spec.max_episode_steps == algo.eval_env.spec.max_episode_steps == 100
    assert algo.env_options == {"action_repeat": 2}
    spec = EnvSpec("count", "probe", (1,), Discrete(2), 10)
    with pytest.raises(ValueError, match="action_repeat applies to an env id"):
        DreamerV3(SimEnv(CountSim(), spec), DreamerV3Config.preset("1m", action_repeat=2))
