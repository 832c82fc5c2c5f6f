"""TD-MPC2's MPPI planner over a learned value function (spec 000 B13).

arXiv:2310.16828v2 Sec. 3.2 and Algorithm 1; nicklashansen/tdmpc2 tdmpc2.py ``_plan`` (HEAD
:139-206; 5f6fade ``plan`` :106-171). One plan call:

1. Warm start: the previous mean shifted by one step (last row 0; zeros at an episode's first
   step), std reset to max_std.
2. ``iterations`` times (+2 when the action has >= 20 dims): N - P Gaussian candidates
   mean + std * noise clipped to [-1, 1], next to the P policy trajectories (fixed, re-scored
   every iteration); values V = nan_to_num(value_fn(actions)); the top-E of this iteration
   refit mean and std (:func:`mppi_update`).
3. The executed action is the first step of one elite drawn by its score (:func:`sample_elite`),
   plus std[0] * noise unless in eval mode, clipped to [-1, 1]. The next warm start is the final
   mean, not the executed action.

Every random draw is an explicit input (:class:`PlanNoise`), the iterations are a ``lax.scan``
and all shapes are static, so ``plan`` can be jitted and vmapped over environments (per-env
prev_mean, t0 and noise). The elite is drawn by the paper-era inverse CDF of one uniform
(5f6fade's ``np.random.choice``), not HEAD's Gumbel-max (math.py:86-94); both draw the same
categorical distribution.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.tdmpc2.config import PlannerConfig

ValueFn = Callable[[jax.Array, jax.Array], jax.Array]


class PlanNoise(flax.struct.PyTreeNode):
    """The random draws of one plan call.

    Attributes:
        candidates: standard normal noise of the Gaussian candidates, [I, H, N - P, A].
        value_keys: one PRNG key per iteration, [I], passed to ``value_fn`` (its policy samples,
            Q pair and dropout are fresh every iteration, as in the reference).
        elite_u: one uniform in [0, 1) choosing the executed elite, [].
        action: standard normal noise of the executed action, [A].
    """

    candidates: jax.Array
    value_keys: jax.Array
    elite_u: jax.Array
    action: jax.Array


class PlanResult(flax.struct.PyTreeNode):
    """Output of :func:`plan`: the action [A] and the final MPPI state.

    ``mean`` [H, A] is the next call's ``prev_mean``; ``std`` [H, A], ``score`` [E] and
    ``elite_actions`` [H, E, A] are the last iteration's; ``elite_index`` is the drawn elite.
    """

    action: jax.Array
    mean: jax.Array
    std: jax.Array
    score: jax.Array
    elite_actions: jax.Array
    elite_index: jax.Array


def draw_plan_noise(key: jax.Array, cfg: PlannerConfig, action_dim: int) -> PlanNoise:
    """Draw every random input of one plan call (shapes from ``cfg`` and ``action_dim``)."""
    iterations = cfg.num_iterations(action_dim)
    k_cand, k_value, k_elite, k_action = jax.random.split(key, 4)
    return PlanNoise(
        candidates=jax.random.normal(
            k_cand, (iterations, cfg.horizon, cfg.num_candidates, action_dim)
        ),
        value_keys=jax.random.split(k_value, iterations),
        elite_u=jax.random.uniform(k_elite, ()),
        action=jax.random.normal(k_action, (action_dim,)),
    )


def sample_elite(u: jax.Array, score: jax.Array) -> jax.Array:
    """Index drawn from the distribution ``score`` [E] by the inverse CDF of one uniform ``u``.

    The first index whose normalised cumulative sum exceeds u, as numpy's
    ``RandomState.choice(E, p=score)`` (cdf = cumsum(p) / cdf[-1], searchsorted(u, "right")),
    used by 5f6fade tdmpc2.py:165-166. Clipped to E - 1 against rounding.
    """
    cdf = jnp.cumsum(score)
    cdf = cdf / cdf[-1]
    index = jnp.sum(cdf <= u, dtype=jnp.int32)
    return jnp.minimum(index, score.shape[0] - 1)


def mppi_update(
    elite_values: jax.Array,
    elite_actions: jax.Array,
    temperature: float,
    min_std: float,
    max_std: float,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Refit the sampling distribution to the elites: ``(score [E], mean [H, A], std [H, A])``.

    HEAD tdmpc2.py:189-194: score = exp(temperature (V - max V)) normalised (the temperature
    multiplies), mean = sum(s eA) / (sum s + 1e-9), std = sqrt(sum(s (eA - mean)^2) /
    (sum s + 1e-9)) around the new mean, clipped to [min_std, max_std].
    elite_values [E], elite_actions [H, E, A].
    """
    score = jnp.exp(temperature * (elite_values - jnp.max(elite_values)))
    score = score / jnp.sum(score)
    weights = score[None, :, None]
    total = jnp.sum(score) + 1e-9
    mean = jnp.sum(weights * elite_actions, axis=1) / total
    var = jnp.sum(weights * jnp.square(elite_actions - mean[:, None]), axis=1) / total
    return score, mean, jnp.clip(jnp.sqrt(var), min_std, max_std)


def warm_start(
    prev_mean: jax.Array, t0: jax.Array | bool, cfg: PlannerConfig
) -> tuple[jax.Array, jax.Array]:
    """Initial ``(mean, std)`` [H, A]: prev_mean shifted one step (last row 0), zeros if t0;
    std is always max_std (HEAD tdmpc2.py:164-167).
    """
    shifted = jnp.concatenate([prev_mean[1:], jnp.zeros_like(prev_mean[:1])], axis=0)
    mean = jnp.where(t0, jnp.zeros_like(prev_mean), shifted)
    return mean, jnp.full(prev_mean.shape, cfg.max_std, prev_mean.dtype)


def _check_inputs(pi_actions, prev_mean, noise, cfg) -> None:
    if prev_mean.ndim != 2 or prev_mean.shape[0] != cfg.horizon:
        raise ValueError(f"prev_mean must be [H={cfg.horizon}, A], got {prev_mean.shape}")
    horizon, action_dim = prev_mean.shape
    want = (horizon, cfg.num_pi_trajs, action_dim)
    if pi_actions.shape != want:
        raise ValueError(f"pi_actions must be [H, P, A] = {want}, got {pi_actions.shape}")
    iterations = cfg.num_iterations(action_dim)
    want = (iterations, horizon, cfg.num_candidates, action_dim)
    if noise.candidates.shape != want or noise.action.shape != (action_dim,):
        raise ValueError(
            f"noise does not fit this planner: candidates {noise.candidates.shape} (want {want}), "
            f"action {noise.action.shape}; draw it with draw_plan_noise(key, cfg, {action_dim})"
        )


def plan(
    value_fn: ValueFn,
    pi_actions: jax.Array | None,
    prev_mean: jax.Array,
    t0: jax.Array | bool,
    noise: PlanNoise,
    cfg: PlannerConfig,
    eval_mode: jax.Array | bool = False,
    action_mask: jax.Array | None = None,
) -> PlanResult:
    """One MPPI plan (see the module docstring for the steps).

    Args:
        value_fn: ``value_fn(actions [H, N, A], key) -> V [N]``, the return estimate of each
            action sequence (TD-MPC2: discounted predicted rewards plus the discounted 'avg' Q
            of the policy's action at z_H). ``key`` is this iteration's ``noise.value_keys[i]``.
        pi_actions: the P policy trajectories [H, P, A] (None when num_pi_trajs is 0).
        prev_mean: the previous plan's mean [H, A] (ignored where t0).
        t0: whether this is the episode's first step.
        noise: the random draws, from :func:`draw_plan_noise`.
        cfg: the planner constants.
        eval_mode: drop the final action noise (nothing else changes).
        action_mask: [A] (1 = the task has this dimension) in multi-task runs: the sampled
            sequences, and the refit mean and std after their clip, are masked (HEAD
            tdmpc2.py ``_plan``, spec 000 B13), so an unused dimension plans and acts 0.
    """
    if pi_actions is None:
        pi_actions = jnp.zeros((cfg.horizon, 0, prev_mean.shape[-1]), prev_mean.dtype)
    _check_inputs(pi_actions, prev_mean, noise, cfg)
    horizon, action_dim = prev_mean.shape
    num_elites = cfg.num_elites

    def iteration(carry, draws):
        mean, std = carry[0], carry[1]
        candidate_noise, key = draws
        samples = jnp.clip(mean[:, None] + std[:, None] * candidate_noise, -1.0, 1.0)
        actions = jnp.concatenate([pi_actions, samples], axis=1)
        if action_mask is not None:
            actions = actions * action_mask
        values = value_fn(actions, key)
        if values.shape != (cfg.num_samples,):
            raise ValueError(f"value_fn must return [N={cfg.num_samples}], got {values.shape}")
        values = jnp.nan_to_num(values, nan=0.0)
        elite_values, elite_idx = jax.lax.top_k(values, num_elites)
        elite_actions = actions[:, elite_idx]
        score, mean, std = mppi_update(
            elite_values, elite_actions, cfg.temperature, cfg.min_std, cfg.max_std
        )
        if action_mask is not None:
            mean, std = mean * action_mask, std * action_mask
        return (mean, std, score, elite_actions), None

    mean, std = warm_start(prev_mean, t0, cfg)
    init = (mean, std, jnp.zeros((num_elites,)), jnp.zeros((horizon, num_elites, action_dim)))
    (mean, std, score, elite_actions), _ = jax.lax.scan(
        iteration, init, (noise.candidates, noise.value_keys)
    )
    index = sample_elite(noise.elite_u, score)
    action = elite_actions[0, index]
    action = jnp.where(eval_mode, action, action + std[0] * noise.action)
    return PlanResult(
        action=jnp.clip(action, -1.0, 1.0),
        mean=mean,
        std=std,
        score=score,
        elite_actions=elite_actions,
        elite_index=index,
    )
