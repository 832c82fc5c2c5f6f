"""Expert guidance for SAC (spec 002): Monte-Carlo pretraining from a known Pendulum expert.

The expert is an energy-pumping swing-up with a PD law near upright, written here; on
Ajax's Pendulum-v1 it scores about -150 per episode (measured: -154.5 and -143.3 over 10
episodes each of two seeds), near what SAC reaches after training.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.asac import ASACConfig
from ajax.agents.crossq import CrossQConfig
from ajax.agents.sac import SAC, ExpertImitation, MCPretrain, SACConfig, guidance, update
from ajax.agents.sac.guidance import imitation_loss, mc_returns
from ajax.environments import make_env
from ajax.networks.networks import action_value_input, predict_value
from ajax.training.api import to_env_action


def pendulum_expert(obs):
    """Energy pumping far from upright, PD near it; agent units (torque / 2)."""
    c, s, w = obs[..., 0], obs[..., 1], obs[..., 2]
    energy = 0.5 * w**2 / 3.0 + 5.0 * (c - 1.0)  # 0 at rest upright (m = l = 1, g = 10)
    u = jnp.where(c > 0.85, -10.0 * jnp.arctan2(s, c) - 2.0 * w, -1.2 * energy * jnp.sign(w + 1e-6))
    return jnp.clip(u / 2.0, -1.0, 1.0)[..., None]


def mountain_car_expert(obs):
    """Push the way the car moves (energy pumping): reaches the flag in ~120 steps."""
    return jnp.where(obs[..., 1] >= 0, 1.0, -1.0)[..., None]


def test_mc_returns_hand_worked():
    """gamma 0.5; a terminal at t=1 stops the sum, a time-limit cut at t=3 bootstraps with 10:
    G3 = 4 + 0.5 * 10 = 9, G2 = 3 + 0.5 * 9 = 7.5, G1 = 2, G0 = 1 + 0.5 * 2 = 2."""
    r = jnp.array([1.0, 2.0, 3.0, 4.0])
    term = jnp.array([False, True, False, False])
    trunc = jnp.array([False, False, False, True])
    boot = jnp.array([0.0, 0.0, 0.0, 10.0])
    np.testing.assert_allclose(mc_returns(r, term, trunc, boot, 0.5), [2.0, 2.0, 7.5, 9.0])


def test_mc_returns_bootstrap_at_the_rollout_end():
    """The rollout's last step is cut by the rollout, not by the episode: it bootstraps too
    per env column: G1 = 1 + 0.5 * 4 = 3, G0 = 1 + 0.5 * 3 = 2.5 in the first; G1 = 1 + 0.5 *
    (-2) = 0, G0 = 1 + 0.5 * 0 = 1 in the second."""
    r = jnp.ones((2, 2))
    no = jnp.zeros((2, 2), bool)
    boot = jnp.array([[0.0, 0.0], [4.0, -2.0]])
    np.testing.assert_allclose(mc_returns(r, no, no, boot, 0.5), [[2.5, 1.0], [3.0, 0.0]])


class _Mean:
    """A policy whose deterministic action is fixed (what imitation_loss reads)."""

    def __init__(self, a):
        self.a = a

    def mean(self):
        return self.a


def test_imitation_loss_hand_worked():
    """actions (0.5, 0) vs expert (0, 1): MSE 0.625; mean|Q| of (-4, 2) is 3, alpha 2.5, so the
    weight is 1.2 at the first actor update, 0.6 halfway through the decay and 0 after it."""
    guide = ExpertImitation(expert=lambda obs: jnp.array([[0.0], [1.0]]), decay_updates=5000)
    pi, q = _Mean(jnp.array([[0.5], [0.0]])), jnp.array([-4.0, 2.0])
    for step, want in ((0, 1.2 * 0.625), (2500, 0.6 * 0.625), (6000, 0.0)):
        loss, metrics = imitation_loss(guide, jnp.asarray(step), pi, None, q)
        np.testing.assert_allclose(loss, want, rtol=1e-6)
        np.testing.assert_allclose(metrics["imitation_mse"], 0.625, rtol=1e-6)
    assert imitation_loss(None, 0, pi, None, q) == (0.0, {})


def _old_collect_expert(guide, env, key):
    """collect_expert before it became an unroll (issue 38), kept as the reference: one scan on
    the env as given, each step's key split into (noise, env)."""
    k_reset, k_run = jax.random.split(key)
    ts = env.reset(k_reset)

    def step(ts, k):
        k_noise, k_env = jax.random.split(k)
        a = guide.expert(ts.obs)
        a = jnp.clip(a + guide.action_noise * jax.random.normal(k_noise, a.shape), -1.0, 1.0)
        nxt = env.step(k_env, ts.state, to_env_action(env, a))
        return nxt, (ts.obs, a, nxt.reward, nxt.terminated, nxt.truncated, nxt.final_obs)

    return jax.lax.scan(step, ts, jax.random.split(k_run, guide.rollout_steps))[1]


@pytest.mark.parametrize(
    "env_id, options, expert, steps",
    [
        ("Pendulum-v1", {}, pendulum_expert, 450),  # unbatched, two time-limit cuts
        ("Pendulum-v1", dict(n_envs=3, normalize_obs=True), pendulum_expert, 250),
        ("MountainCarContinuous-v0", dict(n_envs=2), mountain_car_expert, 300),  # terminals
    ],
)
def test_expert_rollout_draws_as_its_old_scan(env_id, options, expert, steps):
    """The expert rollout on :func:`~ajax.training.unroll.unroll` is bitwise the old scan: same
    resets, noise and env keys, every auto-reset step kept (its own env, batched or not)."""
    env = make_env(env_id, **options)
    guide = MCPretrain(expert=expert, rollout_steps=steps)
    got = guidance.collect_expert(guide, env, jax.random.PRNGKey(7))
    want = _old_collect_expert(guide, env, jax.random.PRNGKey(7))
    assert bool(np.any(got.terminated | got.truncated))  # the rollout crossed an episode's end
    for field, g, w in zip(got._fields, got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, field
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes(), field


def test_pretraining_fits_the_experts_returns_and_actions():
    """After pretraining the critics explain the expert's MC returns on fresh expert data
    (R^2 > 0.9) and the actor's mean action is close to the expert's (MSE < 0.05 in [-1, 1]
    units; measured 0.016 and 0.035 on two seeds, against 0.34 for the untrained actor)."""
    env = make_env("Pendulum-v1")
    config = SACConfig(hidden=64, pretrain=MCPretrain(expert=pendulum_expert, actor_updates=2000))
    state = jax.jit(lambda k: update.init(config, k, env))(jax.random.PRNGKey(0))
    fresh = guidance.collect_expert(config.pretrain, env, jax.random.PRNGKey(7))
    q = predict_value(state.critic_state, state.critic_state.params,
                      action_value_input(fresh.obs, fresh.action))[..., 0]  # fmt: skip
    g = mc_returns(fresh.reward, fresh.terminated, fresh.truncated, jnp.zeros_like(q[0]), 0.99)
    # the last 100 steps before each cut lack their bootstrap here: score the rest
    keep = np.asarray(jnp.arange(g.shape[0]) % 200 < 100)
    resid = np.asarray(q[:, keep] - g[keep][None])
    r2 = 1.0 - np.mean(resid**2, axis=1) / np.var(np.asarray(g[keep]))
    assert np.all(r2 > 0.9), r2
    pi = state.actor_state.apply_fn({"params": state.actor_state.params}, fresh.obs)
    mse = float(jnp.mean((pi.mean() - pendulum_expert(fresh.obs)) ** 2))
    assert mse < 0.05, mse


def test_pretrain_refusals():
    """Agents whose critics MC pretraining cannot fit refuse it; so does a host env."""
    guide = MCPretrain(expert=pendulum_expert)
    with pytest.raises(ValueError, match="use ajax.SAC or ajax.REDQ"):
        CrossQConfig(pretrain=guide)
    with pytest.raises(ValueError, match="use ajax.SAC or ajax.REDQ"):
        ASACConfig(pretrain=guide)
    with pytest.raises(ValueError, match="MCPretrain.expert must be a function"):
        MCPretrain(expert=None)
    with pytest.raises(ValueError, match="lower MCPretrain.rollout_steps or raise buffer_size"):
        SACConfig(buffer_size=1_000, pretrain=guide)
    with pytest.raises(ValueError, match="ExpertImitation.expert must be a function"):
        ExpertImitation(expert=3)
    with pytest.raises(ValueError, match="needs a JAX env"):
        host = make_env("gymnasium:Pendulum-v1")
        update.init(SACConfig(hidden=16, pretrain=guide), jax.random.PRNGKey(0), host)


def test_replay_starts_with_the_experts_rollout():
    """The off-policy loop's replay holds the expert's transitions before the first env step."""
    from ajax.training.api import Tick

    config = SACConfig(hidden=16, buffer_size=5_000,
                       pretrain=MCPretrain(expert=pendulum_expert, rollout_steps=300,
                                           critic_updates=10, actor_updates=10))  # fmt: skip
    algo = SAC("Pendulum-v1", config)
    ts = jax.vmap(algo.env.reset)(jax.random.split(jax.random.PRNGKey(0), 1))
    _, buffer_state = algo.replay_agent(1).init(jax.random.PRNGKey(3), Tick.reset(ts))
    k_agent = jax.random.split(jax.random.PRNGKey(3))[0]  # the key init gives the agent
    demos = guidance.demonstrations(config.pretrain, k_agent, algo.env)
    assert int(buffer_state.current_index) == 300
    np.testing.assert_array_equal(buffer_state.experience.action[0, :300], demos.action)


def _steps_to(eval_return: np.ndarray, eval_freq: int, threshold: float) -> float:
    """The env steps of the first evaluation at which the seeds' mean return clears it."""
    hit = np.nonzero(eval_return.mean(0) > threshold)[0]
    return float((hit[0] + 1) * eval_freq) if hit.size else np.inf


@pytest.mark.slow
def test_expert_guidance_lowers_steps_to_threshold():
    """Pendulum-v1, 2 vmapped seeds, threshold -250, evaluations every 500 steps, 6,000 steps:
    SAC with the fading imitation term, alone and after MC pretraining of its critic on 1,000
    expert steps (counted), clears the threshold sooner than SAC from scratch. Measured: 4,500
    steps from scratch, 1,500 with imitation, 1,500 + 1,000 with pretraining and imitation.
    The pretrained critic alone is not what helps (module docstring of guidance)."""
    kw = dict(hidden=64, batch_size=128, learning_rate=1e-3, buffer_size=10_000,
              learning_starts=1_000, eval_freq=500, eval_episodes=10)  # fmt: skip
    imitation = ExpertImitation(expert=pendulum_expert)
    pretrain = MCPretrain(expert=pendulum_expert, rollout_steps=1_000)
    configs = {
        "scratch": (SACConfig(**kw), 0),
        "imitation": (SACConfig(**kw, imitation=imitation), 0),
        "pretrained": (SACConfig(**kw, imitation=imitation, pretrain=pretrain), 1_000),
    }
    steps = {}
    for name, (config, expert_steps) in configs.items():
        result = SAC("Pendulum-v1", config).train(seed=0, total_steps=6_000, n_seeds=2)
        eval_return = np.asarray(result.metrics["eval_return"])
        steps[name] = _steps_to(eval_return, 500, -250.0) + expert_steps
    assert steps["imitation"] < steps["scratch"], steps
    assert steps["pretrained"] < steps["scratch"], steps


@pytest.mark.slow  # ~45 s: three 6,000-step runs of 2 seeds
def test_pretrained_critic_lowers_steps_to_threshold_on_a_sparse_task():
    """MountainCarContinuous-v0 (+100 only at the flag, a cost per unit of action), 2 vmapped
    seeds, threshold 90, evaluations every 500 steps: SAC from scratch learns to stand still
    and never clears it in 6,000 steps; after ``MCPretrain`` on 2,000 noisy expert steps
    (critics regressed on the expert's returns, actor untrained, the rollout in the replay) it
    clears it at 2,000 steps, 4,000 counting the expert's. The fitted critic itself is what
    helps beyond the demonstrations: the same rollout in the replay with the critic fitted for
    one step only clears it at 3,500 (seeds 0-1; 4,000 for seeds 2-3, where pretraining also
    gives 2,000; measured 2026-12-05)."""
    kw = dict(hidden=64, batch_size=128, learning_rate=1e-3, buffer_size=8_000,
              learning_starts=1_000, eval_freq=500, eval_episodes=5)  # fmt: skip
    rollout = dict(expert=mountain_car_expert, rollout_steps=2_000)
    configs = {
        "scratch": SACConfig(**kw),
        "pretrained": SACConfig(**kw, pretrain=MCPretrain(**rollout)),
        "demos_only": SACConfig(**kw, pretrain=MCPretrain(**rollout, critic_updates=1, rounds=1)),
    }
    steps = {}
    for name, config in configs.items():
        result = SAC("MountainCarContinuous-v0", config).train(seed=0, total_steps=6_000, n_seeds=2)
        steps[name] = _steps_to(np.asarray(result.metrics["eval_return"]), 500, 90.0)
    assert steps["scratch"] == np.inf, steps
    assert steps["pretrained"] + 2_000 < steps["scratch"], steps
    assert steps["pretrained"] < steps["demos_only"], steps
