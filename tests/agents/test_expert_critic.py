"""Spec 002's other expert paths for SAC: the expert's action in the observation
(:class:`~ajax.environments.expert_action.ExpertActionWrapper`) and the frozen expert critic phi
with its refresh (``MCPretrain(expert_critic=True, refresh_lr=...)``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.agents.test_expert_guidance import _steps_to, pendulum_expert
from tests.agents.test_model_free_probes import continuous_probe

from ajax.agents.sac import SAC, MCPretrain, SACConfig, guidance
from ajax.environments import make_env
from ajax.environments.expert_action import ExpertActionWrapper
from ajax.networks.networks import action_value_input, phi_star_critic_state, predict_value
from ajax.training.off_policy import Transition


def test_expert_action_leads_every_observation_and_stays_raw():
    env = make_env("Pendulum-v1", expert_action_fn=pendulum_expert, normalize_obs=True)
    assert env.spec.observation_shape == (4,) and env.spec.raw_obs_prefix == 1
    raw = make_env("Pendulum-v1")
    ts, ts_raw = env.reset(jax.random.key(0)), raw.reset(jax.random.key(0))
    np.testing.assert_allclose(ts.obs[:1], pendulum_expert(ts_raw.obs), rtol=1e-6)
    out = env.step(jax.random.key(1), ts.state, jnp.array([0.6]))
    out_raw = raw.step(jax.random.key(1), ts_raw.state, jnp.array([0.6]))
    np.testing.assert_allclose(out.final_obs[:1], pendulum_expert(out_raw.final_obs), rtol=1e-6)
    with pytest.raises(ValueError, match="continuous action space"):
        make_env("CartPole-v1", expert_action_fn=lambda o: o[:1])
    with pytest.raises(ValueError, match=r"an action of shape \(1,\)"):
        make_env("Pendulum-v1", expert_action_fn=lambda o: o)
    with pytest.raises(ValueError, match="needs a JAX env"):
        make_env("gymnasium:Pendulum-v1", expert_action_fn=pendulum_expert)
    assert isinstance(make_env("Pendulum-v1", expert_action_fn=pendulum_expert).env,
                      ExpertActionWrapper)  # fmt: skip


def test_expert_bound_is_the_max_over_the_phi_ensemble_min():
    """y' = max(y, min_k phi_k(s, a)), phi applied without the agent's obs statistics."""
    config = SACConfig(hidden=16, pretrain=MCPretrain(expert=pendulum_expert, rollout_steps=50,
                       critic_updates=5, expert_critic=True))  # fmt: skip
    state = SAC("Pendulum-v1", config).agent(1).init(jax.random.key(0), make_env("Pendulum-v1"))
    critic = state.critic_state
    obs, act = jax.random.normal(jax.random.key(1), (8, 3)), jnp.zeros((8, 1))
    phi = predict_value(phi_star_critic_state(critic), state.expert_critic_params,
                        action_value_input(obs, act)).min(0)[..., 0]  # fmt: skip
    target = phi + jnp.linspace(-1.0, 1.0, 8)  # half below phi, half above
    batch = Transition(obs, act, jnp.zeros(8), jnp.zeros(8), obs)
    bounded, metrics = guidance.expert_bounded_target(state, critic, batch, target)
    np.testing.assert_allclose(bounded, jnp.maximum(target, phi), rtol=1e-6)
    assert float(metrics["expert_bound_frac"]) == 0.5
    # Without a kept expert critic the target passes through.
    plain = state.replace(expert_critic_params=None)
    assert guidance.expert_bounded_target(plain, critic, batch, target)[0] is target


@pytest.mark.slow  # 39 s on 2 cores
def test_refresh_makes_phi_evaluate_the_expert_where_its_rollout_never_went():
    """Continuous probe, r(a) = -(a - 0.5)^2, one step: the expert always plays 0.5 (noise 0.1),
    so phi is fitted near a = 0.5 only. The SAC run's replay covers [-1, 1] (random warm-up);
    refreshing phi on it makes phi(s, a) ~ r(a) at a = -0.5 (r = -1), frozen phi stays off."""
    expert = lambda obs: jnp.full(obs.shape[:-1] + (1,), 0.5)
    base = dict(hidden=32, batch_size=64, learning_rate=3e-3, buffer_size=2_000,
                learning_starts=200, eval_freq=600, eval_episodes=1)  # fmt: skip
    errors = {}
    for lr in (0.0, 3e-2):
        guide = MCPretrain(expert=expert, rollout_steps=200, action_noise=0.1, critic_updates=300,
                           expert_critic=True, refresh_lr=lr)  # fmt: skip
        state = SAC(continuous_probe(), SACConfig(**base, pretrain=guide)).train(
            seed=0, total_steps=1_200).state.agent  # fmt: skip
        x = action_value_input(jnp.ones((3, 1)), jnp.array([[-0.5], [0.0], [1.0]]))
        phi = predict_value(phi_star_critic_state(state.critic_state),
                            state.expert_critic_params, x).min(0)[..., 0]  # fmt: skip
        errors[lr] = float(jnp.abs(phi - jnp.array([-1.0, -0.25, -0.25])).max())
    assert errors[3e-2] < 0.1 < errors[0.0], errors


def test_refresh_needs_a_kept_expert_critic():
    with pytest.raises(ValueError, match="refresh_lr"):
        MCPretrain(expert=pendulum_expert, refresh_lr=1e-3)


@pytest.mark.slow  # ~50 s
def test_expert_action_in_the_observation_lowers_steps_to_threshold():
    """Pendulum-v1, 2 vmapped seeds, the guidance test's settings: SAC reading the expert's
    action beside the observation clears -250 sooner than from scratch. Measured: 3,500 steps
    against 5,500 (this machine; the frozen-phi and refreshed-phi runs are in
    docs/model_free.md)."""
    kw = dict(hidden=64, batch_size=128, learning_rate=1e-3, buffer_size=10_000,
              learning_starts=1_000, eval_freq=500, eval_episodes=10)  # fmt: skip
    steps = {}
    for name, env in (("augmented", make_env("Pendulum-v1", expert_action_fn=pendulum_expert)),
                      ("scratch", "Pendulum-v1")):  # fmt: skip
        result = SAC(env, SACConfig(**kw)).train(seed=0, total_steps=6_000, n_seeds=2)
        steps[name] = _steps_to(np.asarray(result.metrics["eval_return"]), 500, -250.0)
    assert steps["augmented"] < steps["scratch"], steps
