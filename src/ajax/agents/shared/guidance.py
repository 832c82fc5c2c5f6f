"""Expert guidance for SAC and REDQ: Monte-Carlo pretraining from an expert's rollouts (spec 002).

Before reinforcement learning starts, a known expert (a controller or a trained policy, given
as a pure JAX function of the agent's observation) drives the training env with Gaussian
action noise; the critic ensemble regresses each visited ``(s, a)`` onto its discounted
Monte-Carlo return (:class:`MCPretrain`), optionally the actor clones the noisy expert by
maximum likelihood, and the rollout seeds the replay (SACfD's demonstrations). During learning
:class:`ExpertImitation` adds a fading pull toward the expert to the actor loss. Guidance acts
on the losses, never on the architecture: the policy stays the unconstrained squashed Gaussian
(spec 002, ``Actor``).

Returns of episodes that a time limit cut are bootstrapped at the cut with the critic's own
value (min over the ensemble) of ``(final_obs, expert(final_obs))``: the first fitting round
bootstraps with 0, each further round with the previous round's critic (``rounds``), which
removes the truncation bias plain MC regression has on time-limited tasks such as Pendulum.

Measured on Pendulum-v1 (docs/model_free.md, "Expert guidance"): the imitation term is what
lowers the steps to -250 (1,500 against 4,500 from scratch); the MC critic alone does not,
since Q varies little with the action at Pendulum's dt and the fitted critic's best action is
far from the expert's. On a sparse task the fitted critic does lower them: on
MountainCarContinuous-v0 SAC from scratch never clears 90 in 10,000 steps, pretrained it clears
it at 2,000, with the rollout in the replay but an unfitted critic at 3,500-4,000.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ajax.networks.distributions import log_prob_from_raw
from ajax.networks.networks import action_value_input, phi_star_critic_state, predict_value
from ajax.training.api import Policy, Transition, stateless, unroll
from ajax.validation import PYTHON_ARGUMENT, Validated, at_least, between, positive, require


@dataclass(frozen=True)
class MCPretrain(Validated):
    """Fit SAC's critics on an expert's Monte-Carlo returns and its actor on the expert's actions.

    Attributes:
        expert: ``expert(obs [N, O]) -> action [N, A]`` in the agent's [-1, 1] units, a pure JAX
            function of what the agent observes (so it sees normalised observations when the
            env normalises them).
        rollout_steps: expert env steps per training env (``n_envs`` run in parallel).
        action_noise: std of the Gaussian added to the expert's action (then clipped), so the
            data covers actions beside the expert's; the cloned actor's std starts near it.
        critic_updates: Adam steps on the critics' MC regression, per round.
        actor_updates: Adam steps of behaviour cloning (0: the actor starts untrained). Cloning
            narrows the actor's std to ``action_noise``; measured on Pendulum-v1 the clone
            scores about -150 before any SAC update and is then lost within ~500 actor updates
            (docs/model_free.md): pair it with :class:`ExpertImitation`.
        rounds: fitting rounds; round k > 1 bootstraps truncated episodes with round k-1's critic.
        batch_size: minibatch of the fits.
        learning_rate: Adam step size of the fits (their optimiser is discarded afterwards;
            the agent's own optimisers start fresh).
        expert_critic: keep the fitted critic frozen as the expert critic phi
            (``SACState.expert_critic_params``) and lower-bound every TD target with it:
            y = max(y, min_k phi_k(s, a)). phi(s, a) estimates "take a, then follow the
            expert", a return the optimal policy can always match (:func:`expert_bounded_target`).
        refresh_lr: 0 keeps phi frozen; otherwise every critic update also takes one SGD step of
            that size (gradient clipped to norm 1) on phi's TD error for the expert's own policy on the replayed batch
            (PhiRefresh: phi keeps evaluating the expert on the states the agent now visits,
            where the expert's rollout never went; :func:`refresh_expert_critic`).
    """

    expert: Callable[[jax.Array], jax.Array]
    rollout_steps: int = 2000
    action_noise: float = 0.3
    critic_updates: int = 3000
    actor_updates: int = 0
    rounds: int = 2
    batch_size: int = 256
    learning_rate: float = 1e-3
    expert_critic: bool = False
    refresh_lr: float = 0.0

    ARGUMENT = PYTHON_ARGUMENT  # set from Python only: no flags
    RULES = {
        "refresh_lr": at_least(0.0),
        "rollout_steps": positive(),
        "action_noise": between(0.0, 1.0),
        "critic_updates": positive(),
        "actor_updates": at_least(0),
        "rounds": at_least(1),
        "batch_size": positive(),
        "learning_rate": positive(),
    }

    def relations(self) -> None:
        _check_expert(self)
        require(self, self.refresh_lr == 0.0 or self.expert_critic, "refresh_lr",
                "0 unless expert_critic=True (it refreshes the kept expert critic)")  # fmt: skip


def _check_expert(guide) -> None:
    if not callable(guide.expert):
        name = type(guide).__name__
        raise ValueError(
            f"{name}.expert must be a function obs -> action in [-1, 1], got "
            f"{type(guide.expert).__name__}: pass e.g. {name}(expert=lambda obs: ...)"
        )


@dataclass(frozen=True)
class ExpertImitation(Validated):
    """Pull the actor toward an expert's action at every replayed state, fading out.

    The actor loss gains ``c_t ||tanh(mu(s)) - expert(s)||^2`` with ``c_t = f_t mean|Q| /
    alpha``: TD3+BC's scale-free weighting (Fujimoto & Gu 2021, Eq. 3: their lambda = alpha /
    mean|Q| on the Q term) and ``f_t`` falling linearly from 1 to 0 over the actor's first
    ``decay_updates`` updates, after which the policy is SAC's alone. The expert is queried at
    the replayed states themselves, so no expert data need be stored.

    Attributes:
        expert: ``expert(obs [B, O]) -> action [B, A]`` in [-1, 1], as for :class:`MCPretrain`.
        alpha: TD3+BC's alpha (2.5 in the paper): smaller holds the actor closer to the expert.
        decay_updates: actor updates over which the imitation weight fades to 0.
    """

    expert: Callable[[jax.Array], jax.Array]
    alpha: float = 2.5
    decay_updates: int = 5000

    ARGUMENT = PYTHON_ARGUMENT  # set from Python only: no flags
    RULES = {"alpha": positive(), "decay_updates": positive()}

    def relations(self) -> None:
        _check_expert(self)


class ExpertData(NamedTuple):
    """The expert's rollout, time-major ``[T, N, ...]``."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array


def mc_returns(r_t, terminated_t, truncated_t, bootstrap_t, gamma: float):
    """Discounted return of every step, time-major ``[T, N]``: G_t = r_t + gamma G_{t+1} within an
    episode, 0 after a terminal step, ``bootstrap_t`` after a time-limit cut (Sutton & Barto Eq.
    3.9). The last step of the rollout, cut by the rollout's end, also bootstraps."""
    cut = truncated_t.at[-1].set(~terminated_t[-1])

    def back(g_next, x):
        r, term, trunc, boot = x
        g = r + gamma * jnp.where(term, 0.0, jnp.where(trunc, boot, g_next))
        return g, g

    _, g = jax.lax.scan(
        back, jnp.zeros_like(r_t[0]), (r_t, terminated_t, cut, bootstrap_t), reverse=True
    )
    return g


def _noisy_expert(guide: MCPretrain) -> Policy:
    """The expert as a stateless :class:`Policy` that adds its Gaussian noise (clipped to
    [-1, 1]) with the act key, asked for deterministic actions or not: it is the rollout's
    behaviour policy, noise included."""

    def act(_agent, obs, key, _deterministic):
        a = guide.expert(obs)
        return jnp.clip(a + guide.action_noise * jax.random.normal(key, a.shape), -1.0, 1.0)

    return stateless(act)


def collect_expert(guide: MCPretrain, env, key) -> ExpertData:
    """Roll the noisy expert through ``env`` (a JAX env, batched or not, as given) for
    ``rollout_steps`` auto-resetting steps, every one kept: an :func:`unroll` whose act key is
    the noise's (each step's key splits in two: noise, env)."""

    def observe(acc, step):
        out = step.out
        row = ExpertData(step.tick.obs, step.action, out.reward, out.terminated, out.truncated,
                         out.final_obs)  # fmt: skip
        return acc, row

    _, data = unroll(env, _noisy_expert(guide), None, key, None, guide.rollout_steps, observe)
    return data


def critic_regression_loss(params, critic, x, g_t):
    """0.5 sum over members of the mean squared error to the MC return (the TD loss's form)."""
    q = predict_value(critic, params, x)[..., 0]
    loss = 0.5 * jnp.mean((q - g_t[None]) ** 2, axis=-1).sum()
    return loss, {"pretrain_critic_loss": loss}


def behaviour_cloning_loss(params, actor, obs, a_expert):
    """-E log pi(a_E | s) of the noisy expert's actions (maximum likelihood cloning), read through
    the latent ``atanh(a)`` with ``a`` kept inside (-1, 1) so that saturated actions stay finite."""
    pi = actor.apply_fn({"params": params}, obs)
    raw = jnp.arctanh(jnp.clip(a_expert, -0.999, 0.999))
    loss = -jnp.mean(log_prob_from_raw(pi, raw))
    return loss, {"pretrain_bc_loss": loss}


def _fit(loss_fn, params, n_updates: int, lr: float, batch_size: int, data: tuple, key):
    """``n_updates`` Adam steps of ``loss_fn(params, *minibatch)`` on uniformly drawn rows."""
    tx = optax.adam(lr)
    n = data[0].shape[0]

    def step(carry, k):
        params, opt_state = carry
        idx = jax.random.randint(k, (batch_size,), 0, n)
        grads, metrics = jax.grad(loss_fn, has_aux=True)(params, *(x[idx] for x in data))
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

    (params, _), metrics = jax.lax.scan(
        step, (params, tx.init(params)), jax.random.split(key, n_updates)
    )
    return params, jax.tree.map(lambda m: m[-1], metrics)


def _expert_rollout(guide: MCPretrain, key, env):
    """The expert rollout drawn from the agent's init ``key`` (the same one for :func:`pretrain`
    and :func:`demonstrations`) and ``flat``, which maps its ``[T]`` or ``[T, N]`` leading axes
    (one unbatched env, or a batch) onto the rows of a fit or a replay."""
    _check_jax_env(env)
    d = collect_expert(guide, env, _keys(key)[0])
    lead = d.reward.ndim
    return d, lambda x: x.reshape(-1, *x.shape[lead:])


def demonstrations(guide: MCPretrain | None, key, env):
    """The expert rollout :func:`pretrain` fits (same ``key``) as replay transitions, so that TD
    learning keeps seeing the expert's actions (as SACfD's demonstration buffer does)."""
    if guide is None:
        return None
    d, flat = _expert_rollout(guide, key, env)
    return Transition(flat(d.obs), flat(d.action), flat(d.reward).astype(jnp.float32),
                      flat(d.terminated).astype(jnp.float32), flat(d.final_obs))  # fmt: skip


def pretrain(guide: MCPretrain, state, env, key, gamma: float):
    """``state`` (a :class:`~ajax.agents.shared.soft_actor_critic.SACState` built from
    ``key``) with critics, their targets and the actor fitted to the expert, and the fits' last
    metrics."""
    d, flat = _expert_rollout(guide, key, env)
    k_fit = _keys(key)[1]
    critic, actor = state.critic_state, state.actor_state
    x = flat(action_value_input(d.obs, d.action))
    bootstrap = jnp.zeros_like(d.reward)
    params, metrics = critic.params, {}
    for k in jax.random.split(k_fit, guide.rounds):
        g = mc_returns(d.reward, d.terminated, d.truncated, bootstrap, gamma)
        params, metrics = _fit(
            lambda p, x, g: critic_regression_loss(p, critic, x, g),
            params, guide.critic_updates, guide.learning_rate, guide.batch_size, (x, flat(g)), k,
        )  # fmt: skip
        x_final = action_value_input(d.final_obs, guide.expert(d.final_obs))
        bootstrap = jax.lax.stop_gradient(predict_value(critic, params, x_final).min(0)[..., 0])
    actor_params = actor.params
    if guide.actor_updates:
        actor_params, bc = _fit(
            lambda p, o, a: behaviour_cloning_loss(p, actor, o, a),
            actor.params, guide.actor_updates, guide.learning_rate, guide.batch_size,
            (flat(d.obs), flat(d.action)), jax.random.fold_in(k_fit, 1),
        )  # fmt: skip
        metrics = {**metrics, **bc}
    state = state.replace(
        critic_state=critic.replace(params=params, opt_state=critic.tx.init(params)).with_target(),
        actor_state=actor.replace(params=actor_params, opt_state=actor.tx.init(actor_params)),
        expert_critic_params=params if guide.expert_critic else None,
    )
    return state, metrics


def _phi(critic, params, obs, action):
    """The expert critic's ensemble at (obs, action), applied as stored (no obs statistics)."""
    return predict_value(phi_star_critic_state(critic), params, action_value_input(obs, action))


def expert_bounded_target(state, critic, batch: Transition, target):
    """``(max(y, min_k phi_k(s, a)), metrics)``; ``target`` unchanged without an expert critic.

    phi(s, a) is the return of taking ``a`` and then following the expert, a lower bound on
    the optimal value of (s, a) (max over policies >= any one policy); the bound lifts targets
    the young critic underestimates, as the Monte-Carlo lower bounds of self-imitation
    learning do (Oh et al. 2018, Eq. 1: max(R - V, 0)).
    """
    params = state.expert_critic_params
    if params is None:
        return target, {}
    lower = jax.lax.stop_gradient(_phi(critic, params, batch.obs, batch.action).min(0)[..., 0])
    return jnp.maximum(target, lower), {"expert_bound_frac": jnp.mean(lower > target)}


def expert_critic_td_loss(params, critic, batch: Transition, expert, gamma: float):
    """0.5 sum over members of the mean squared TD error of phi for the expert's policy:
    phi(s, a) <- r + gamma (1 - d) min_k phi_k(s', expert(s')) (SARSA-style evaluation of a
    known policy on off-policy data; the target is held fixed for the step)."""
    q = _phi(critic, params, batch.obs, batch.action)[..., 0]
    q_next = _phi(critic, params, batch.next_obs, expert(batch.next_obs)).min(0)[..., 0]
    y = jax.lax.stop_gradient(batch.reward + gamma * (1.0 - batch.terminated) * q_next)
    loss = 0.5 * jnp.mean((q - y[None]) ** 2, axis=-1).sum()
    return loss, {"expert_critic_loss": loss}


def refresh_expert_critic(guide: MCPretrain | None, state, critic, batch: Transition, gamma):
    """``state`` with phi moved one SGD step of ``guide.refresh_lr`` on
    :func:`expert_critic_td_loss` (PhiRefresh); unchanged when phi is frozen or absent."""
    if guide is None or state.expert_critic_params is None or guide.refresh_lr == 0.0:
        return state, {}
    grads, metrics = jax.grad(expert_critic_td_loss, has_aux=True)(
        state.expert_critic_params, critic, batch, guide.expert, gamma
    )
    # Q regression on returns of order 100 has gradients of order 1e3: unclipped SGD diverges
    # (measured: NaN within 1,000 updates on Pendulum), so the step is clipped to norm 1.
    scale = jnp.minimum(1.0, 1.0 / (optax.global_norm(grads) + 1e-12))
    params = jax.tree.map(lambda p, g: p - guide.refresh_lr * scale * g,
                          state.expert_critic_params, grads)  # fmt: skip
    return state.replace(expert_critic_params=params), metrics


def imitation_loss(guide: ExpertImitation | None, actor_step, pi, obs, q_pi):
    """``(c_t ||tanh(mu(s)) - expert(s)||^2, metrics)`` of :class:`ExpertImitation`, ``(0, {})``
    without one; ``q_pi`` are the values the actor loss reads (for mean|Q|)."""
    if guide is None:
        return 0.0, {}
    fade = jnp.clip(1.0 - actor_step / guide.decay_updates, 0.0, 1.0)
    coef = fade * jax.lax.stop_gradient(jnp.abs(q_pi).mean()) / guide.alpha
    mse = jnp.mean(jnp.sum((pi.mean() - guide.expert(obs)) ** 2, axis=-1))
    return coef * mse, {"imitation_mse": mse, "imitation_coef": coef}


def _keys(key):
    """(data, fit) keys from the agent's init key, folded so that unguided runs draw as before."""
    return jax.random.split(jax.random.fold_in(key, 1))


def _check_jax_env(env) -> None:
    if not getattr(env, "is_jax", False):
        raise ValueError(
            f"MCPretrain rolls its expert out inside jit and needs a JAX env; {env!r} is a host "
            "env: pick a JAX-native env id (e.g. Pendulum-v1) or drop pretrain"
        )
