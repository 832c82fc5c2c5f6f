"""Acting by planning: the MPPI value function of the world model and per-env planner state.

arXiv:2310.16828v2 Sec. 3.2; nicklashansen/tdmpc2 tdmpc2.py ``_estimate_value`` and ``_plan``
(HEAD e9f5932). The value of an action sequence is the discounted sum of predicted rewards plus
the discounted 'avg' Q of a policy sample at z_H (planner pass: no dropout). With an episodic
config a predicted termination (sigmoid > 0.5) is absorbing: later rewards and the bootstrap are
masked. Every draw is explicit: :class:`ActNoise` holds the policy-trajectory noise and a
:class:`~ajax.agents.tdmpc2.planner.PlanNoise` whose per-iteration ``value_keys`` slot carries a
:class:`ValueNoise` (policy noise at z_H and the Q pair) instead of a key.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.tdmpc2.config import TDMPC2Config
from ajax.agents.tdmpc2.ensemble import reduce_pair
from ajax.agents.tdmpc2.networks import Q_members, WorldModel, task_embedding
from ajax.agents.tdmpc2.pixels import draw_shifts, shift_images
from ajax.agents.tdmpc2.planner import PlanNoise, PlanResult, plan
from ajax.agents.tdmpc2.policy import sample_squashed


class ValueNoise(flax.struct.PyTreeNode):
    """Draws of one value estimate: policy noise at z_H [N, A] and the Q pair [2]
    (leading [I] axis inside a PlanNoise)."""

    eps: jax.Array
    pair: jax.Array


class ActNoise(flax.struct.PyTreeNode):
    """Draws of one planning decision: policy-trajectory noise [H, P, A], the plan's noise and,
    on pixels, the observation's crop offset ``shift`` (dy, dx) [2]: the official encoder
    shifts at every encode, acting and evaluation included (layers.py:36-59, D54)."""

    pi_trajs: jax.Array
    plan: PlanNoise
    shift: jax.Array | None = None


class ActState(flax.struct.PyTreeNode):
    """Per-env planner memory: the previous plan's mean [N, H, A] and first-step flags [N]."""

    prev_mean: jax.Array
    t0: jax.Array

    @classmethod
    def create(cls, n: int, horizon: int, action_dim: int) -> ActState:
        return cls(
            prev_mean=jnp.zeros((n, horizon, action_dim), jnp.float32),
            t0=jnp.ones((n,), bool),
        )


def draw_act_noise(
    key: jax.Array, cfg: TDMPC2Config, action_dim: int, image_shape=None
) -> ActNoise:
    """Every random input of one planning decision (a pixel model's ``image_shape`` adds the
    shift, from its own key: the state draws are unchanged)."""
    p = cfg.planner
    iterations = p.num_iterations(action_dim)
    k = jax.random.split(key, 6)
    value = ValueNoise(
        eps=jax.random.normal(k[0], (iterations, p.num_samples, action_dim)),
        pair=jax.vmap(lambda kk: jax.random.permutation(kk, cfg.arch.num_q)[:2])(
            jax.random.split(k[1], iterations)
        ),
    )
    noise = PlanNoise(
        candidates=jax.random.normal(k[2], (iterations, p.horizon, p.num_candidates, action_dim)),
        value_keys=value,
        elite_u=jax.random.uniform(k[3], ()),
        action=jax.random.normal(k[4], (action_dim,)),
    )
    pi_trajs = jax.random.normal(k[5], (p.horizon, p.num_pi_trajs, action_dim))
    shift = None if image_shape is None else draw_shifts(jax.random.fold_in(key, 6), ())
    return ActNoise(pi_trajs=pi_trajs, plan=noise, shift=shift)


def estimate_value(
    cfg, model, discount, params, z, actions, noise: ValueNoise, task=None
) -> jax.Array:
    """G = sum_t gamma^t r_t + gamma^H Q_avg(z_H, pi(z_H)) for each sequence; z [L],
    actions [H, N, A] -> [N]. ``task`` is a multi-task model's task id (a scalar)."""
    two_hot = cfg.two_hot()
    variables = {"params": params}
    z = jnp.broadcast_to(z, (actions.shape[1], z.shape[-1]))
    ret, disc = jnp.zeros(actions.shape[1]), 1.0
    alive = jnp.ones(actions.shape[1])
    for t in range(actions.shape[0]):
        r = two_hot.decode(model.apply(variables, z, actions[t], task, method="reward"))
        z = model.apply(variables, z, actions[t], task, method="next")
        ret = ret + disc * alive * r
        disc = disc * discount
        if cfg.episodic:
            ended = model.apply(variables, z, method="termination") > 0.0  # sigmoid > 0.5
            alive = alive * (1.0 - ended.astype(jnp.float32))
    a = sample_squashed(model.apply(variables, z, task, method="pi"), noise.eps).action
    logits = Q_members(cfg, params["Qs"], z, a, noise.pair, emb=task_embedding(model, params, task))
    return ret + disc * alive * reduce_pair(two_hot.decode(logits), "avg")


def pi_trajectories(model, params, z, eps, task=None) -> jax.Array:
    """P policy rollouts from z [L]: actions [H, P, A] (the last from pi at z_{H-1})."""
    variables = {"params": params}
    z = jnp.broadcast_to(z, (eps.shape[1], z.shape[-1]))
    actions = []
    for t in range(eps.shape[0]):
        a = sample_squashed(model.apply(variables, z, task, method="pi"), eps[t]).action
        actions.append(a)
        if t + 1 < eps.shape[0]:
            z = model.apply(variables, z, a, task, method="next")
    return jnp.stack(actions)


def plan_one(
    cfg: TDMPC2Config,
    model: WorldModel,
    discount: float,
    params: dict,
    obs: jax.Array,
    prev_mean: jax.Array,
    t0: jax.Array,
    noise: ActNoise,
    eval_mode: bool | jax.Array,
    task: jax.Array | None = None,
) -> PlanResult:
    """One planning decision for one observation [O] (tdmpc2.py ``_plan``); a multi-task
    model plans for task id ``task`` (a scalar) with its action mask. A pixel observation is
    shifted by ``noise.shift`` first, as the official encoder does."""
    if noise.shift is not None:
        obs = shift_images(obs, noise.shift, model.image_shape)
    z = model.apply({"params": params}, obs, task, method="encode")
    pi_actions = None
    if cfg.planner.num_pi_trajs > 0:
        pi_actions = pi_trajectories(model, params, z, noise.pi_trajs, task)

    def value_fn(actions, value_noise):
        return estimate_value(cfg, model, discount, params, z, actions, value_noise, task)

    mask = None if model.tasks is None else model.tasks.mask(task)
    return plan(value_fn, pi_actions, prev_mean, t0, noise.plan, cfg.planner, eval_mode, mask)


def act(cfg, model, discount, params, act_state: ActState, obs, key, eval_mode, task=None):
    """Plan for every env: ``(actions [N, A], new ActState)``; t0 clears after planning.
    ``task`` [N] are a multi-task model's task ids (None for a single task)."""
    n = obs.shape[0]
    draw = lambda k: draw_act_noise(k, cfg, model.action_dim, model.image_shape)
    noise = jax.vmap(draw)(jax.random.split(key, n))
    out = jax.vmap(
        lambda o, m, t, nz, i: plan_one(cfg, model, discount, params, o, m, t, nz, eval_mode, i)
    )(obs, act_state.prev_mean, act_state.t0, noise, task)
    return out.action, ActState(prev_mean=out.mean, t0=jnp.zeros_like(act_state.t0))
