"""DreamerV3's losses: world model, imagination actor-critic, replay value (pure functions).

danijar/dreamerv3@e3f0224 dreamerv3/agent.py ``loss`` (world model, imagination, replay
value), ``imag_loss`` and ``repl_loss``; arXiv:2301.04104v2 Eqs. 4-11. Batches are batch-major
[B, T, ...] as replayed; imagination runs time-major [H + 1, B T, ...]. Each function returns
``(loss, aux)``: the scaled sum of the means of its terms and a dict with ``metrics`` (the mean
of every unscaled term under ``loss/<name>``) and what the next loss needs.

Gradient paths (configs.yaml: reward_grad, repval_grad True, ac_grads False): the reward,
continue and replay-value losses train the world model through the posterior features; the
imagination losses see stop-gradiented features and train only the actor and critic.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.dreamerv3.config import DreamerV3Config
from ajax.agents.dreamerv3.latents import categorical_entropy, dyn_loss, rep_loss
from ajax.agents.dreamerv3.model import Nets, feat
from ajax.agents.dreamerv3.policy import continue_loss
from ajax.agents.dreamerv3.rssm import RSSMState, imagine, observe
from ajax.normalizers import ReturnNormalizer
from ajax.returns import lambda_returns

sg = jax.lax.stop_gradient


class Batch(flax.struct.PyTreeNode):
    """B sequences of T replayed rows (batch-major); ``prev_action[:, t]`` led to ``obs[:, t]``."""

    obs: jax.Array | dict  # a mixed observation's {"image", "vector"} (mixed.py)
    prev_action: jax.Array
    reward: jax.Array
    is_first: jax.Array
    is_last: jax.Array
    is_terminal: jax.Array


class TrainDraws(flax.struct.PyTreeNode):
    """Every random draw of one train step, given in place of its key (the parity tests replay
    the official code's draws with it), in the order agent.py ``loss`` consumes them.

    post_gumbel [T, B, S, C]: the posterior samples' Gumbel noise (rssm.py:87, one row per step);
    img_action_noise [H + 1, N, A]: the imagined actions' noise, standard normal for a bounded
    normal policy, Gumbel for a categorical one; row H is the last action (agent.py:204-205);
    img_stoch_gumbel [H, N, S, C]: the imagined latents' Gumbel noise (rssm.py:101).
    """

    post_gumbel: jax.Array
    img_action_noise: jax.Array
    img_stoch_gumbel: jax.Array


def _tm(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, 0, 1)


def world_model_loss(nets: Nets, cfg: DreamerV3Config, params, batch: Batch, start: RSSMState, key):
    """Reconstruction, reward, continue, dyn and rep losses (agent.py loss, rssm.py:120-133).

    ``start`` is the carry that begins each sequence (the stored latent of the context row).
    Returns ``(loss, aux)`` with aux ``metrics``, the posterior ``post`` (RSSMState [B, T, ...])
    and ``carry`` (the final state).
    """
    tokens = nets.apply("enc", params, batch.obs)
    carry, post = observe(
        nets.rssm, params["dyn"], start, _tm(tokens), _tm(batch.prev_action),
        _tm(batch.is_first), key,
    )  # fmt: skip
    post = jax.tree.map(_tm, post)  # [B, T, ...]
    prior = nets.rssm.apply({"params": params["dyn"]}, post.deter, method=type(nets.rssm).prior)
    x = feat(RSSMState(post.deter, post.stoch))
    two_hot = cfg.two_hot()
    recon = nets.apply("dec", params, x)
    terms = {
        "dyn": dyn_loss(post.logits, prior, cfg.unimix, cfg.free_nats),
        "rep": rep_loss(post.logits, prior, cfg.unimix, cfg.free_nats),
        "rec": nets.dec.loss(recon, batch.obs),
        "rew": two_hot.loss(nets.apply("rew", params, x), batch.reward),
        "con": continue_loss(nets.apply("con", params, x)[..., 0], batch.is_terminal, cfg.horizon),
    }
    loss = sum(getattr(cfg, f"scale_{k}") * v.mean() for k, v in terms.items())
    metrics = {f"loss/{k}": v.mean() for k, v in terms.items()}
    metrics["prior_ent"] = categorical_entropy(prior, cfg.unimix).sum(-1).mean()
    metrics["post_ent"] = categorical_entropy(post.logits, cfg.unimix).sum(-1).mean()
    state = RSSMState(post.deter, post.stoch)
    return loss, {"metrics": metrics, "post": state, "carry": carry}


def _decode(nets, name, params, x, two_hot):
    return two_hot.decode(nets.apply(name, params, x))


def imagine_loss(
    nets: Nets,
    cfg: DreamerV3Config,
    params,
    slow_val,
    retnorm: ReturnNormalizer,
    starts: RSSMState,
    key,
):
    """REINFORCE policy loss and two-hot critic loss on imagined rollouts (agent.py imag_loss).

    From every start [N] (sg'd), H = imag_length prior steps driven by the sampled policy; with
    s_0..s_H the features [H + 1, N]: r = rew(s), c = P(con | s), v = val(s) (slowtar False:
    the online critic is the target), R = lambda_returns(r[1:], c[1:], v[1:], lam),
    w_t = prod_{i <= t} c_i; adv = (R - v[:-1]) / S with S the return normaliser's scale after
    updating it with R; policy loss w (-(log pi(a) sg(adv)) - actent H[pi]); value loss
    w (CE(val, sg(R)) + slowreg CE(val, sg(slowval))). Returns ``(loss, aux)`` with aux
    ``metrics``, the updated ``retnorm`` and ``ret0`` [N] (R at each start).
    """
    two_hot = cfg.two_hot()
    starts = jax.tree.map(sg, starts)
    if isinstance(key, TrainDraws):
        k_img = (key.img_action_noise[:-1], key.img_stoch_gumbel)
        k_last = key.img_action_noise[-1]
    else:
        k_img, k_last = jax.random.split(key)
    # Rollouts, rewards and continues only feed stop-gradiented targets: running them on
    # stop-gradiented parameters keeps autodiff from linearising the imagination scan at all.
    frozen = sg(params)
    pol = lambda x: nets.apply("pol", params, x)
    policy_fn = lambda k, s: nets.apply("pol", frozen, feat(s)).sample(k)
    _, img, actions = imagine(nets.rssm, frozen["dyn"], starts, policy_fn, cfg.imag_length, k_img)
    states = jax.tree.map(
        lambda s0, s: sg(jnp.concatenate([s0[None], s], axis=0)),
        starts,
        RSSMState(img.deter, img.stoch),
    )
    x = feat(states)  # [H + 1, N, F]
    last_action = policy_fn(k_last, jax.tree.map(lambda s: s[-1], states))
    actions = jnp.concatenate([actions, last_action[None]], axis=0)
    rew = _decode(nets, "rew", frozen, x, two_hot)
    con = jax.nn.sigmoid(nets.apply("con", frozen, x)[..., 0])
    val_logits = nets.apply("val", params, x)
    val = sg(two_hot.decode(val_logits))
    slowval = sg(_decode(nets, "val", {"val": slow_val}, x, two_hot))
    ret = lambda_returns(rew[1:], con[1:], val[1:], cfg.lam)  # [H, N]
    weight = sg(jnp.cumprod(con, axis=0)[:-1])
    retnorm = retnorm.update(ret)
    adv = (ret - val[:-1]) / retnorm.scale()
    dist = pol(x[:-1])
    logpi = dist.log_prob(sg(actions[:-1]))
    ent = dist.entropy()
    policy = weight * -(logpi * sg(adv) + cfg.actent * ent)
    value = weight * (
        two_hot.loss(val_logits[:-1], sg(ret))
        + cfg.slowreg * two_hot.loss(val_logits[:-1], slowval[:-1])
    )
    loss = cfg.scale_policy * policy.mean() + cfg.scale_value * value.mean()
    metrics = {
        "loss/policy": policy.mean(),
        "loss/value": value.mean(),
        "ret": ret.mean(),
        "adv": adv.mean(),
        "ret_scale": retnorm.scale(),
        "policy_ent": ent.mean(),
        "weight": weight.mean(),
    }
    return loss, {"metrics": metrics, "retnorm": retnorm, "ret": sg(ret), "ret0": sg(ret[0])}


def replay_value_loss(
    nets: Nets, cfg: DreamerV3Config, params, slow_val, post: RSSMState, batch: Batch, boot
):
    """The critic on replayed sequences, bootstrapped by imagined returns (agent.py repl_loss).

    With features x [B, T] of the posterior (gradients flow into the world model: repval_grad),
    R = lambda-returns over the replay rows with disc = 1 - 1/horizon, cut at is_last and
    bootstrapped by ``boot`` [B, T] (the imagined R_0 of each row; spec 000 B11 mapping:
    boot_t := boot[t + 1]); loss (1 - last) (CE(val, sg(R)) + slowreg CE(val, sg(slowval))) on
    rows 0..T-2, scaled by scale_repval (0.3).
    """
    two_hot = cfg.two_hot()
    x = feat(post)
    val_logits = nets.apply("val", params, x)
    slowval = sg(_decode(nets, "val", {"val": slow_val}, x, two_hot))
    disc = 1.0 - 1.0 / cfg.horizon
    live = disc * (1.0 - batch.is_terminal.astype(jnp.float32))
    cont = cfg.lam * (1.0 - batch.is_last.astype(jnp.float32))
    ret = _tm(
        lambda_returns(
            _tm(batch.reward[:, 1:]), _tm(live[:, 1:]), _tm(sg(boot)[:, 1:]), _tm(cont[:, 1:])
        )
    )  # [B, T - 1]
    weight = 1.0 - batch.is_last[:, :-1].astype(jnp.float32)
    value = weight * (
        two_hot.loss(val_logits[:, :-1], sg(ret))
        + cfg.slowreg * two_hot.loss(val_logits[:, :-1], slowval[:, :-1])
    )
    metrics = {"loss/repval": value.mean(), "repval_ret": ret.mean()}
    return cfg.scale_repval * value.mean(), {"metrics": metrics, "ret": sg(ret)}


def total_loss(nets, cfg, params, slow_val, retnorm, batch: Batch, start: RSSMState, key):
    """The one loss of the one optimiser step: world model + imagination + replay value.

    ``key`` is a PRNG key or the step's :class:`TrainDraws`.
    """
    if isinstance(key, TrainDraws):
        k_wm, k_img = key.post_gumbel, key
    else:
        k_wm, k_img = jax.random.split(key)
    wm, wm_aux = world_model_loss(nets, cfg, params, batch, start, k_wm)
    post = wm_aux["post"]
    flat = jax.tree.map(lambda s: s.reshape(-1, *s.shape[2:]), post)
    ac, ac_aux = imagine_loss(nets, cfg, params, slow_val, retnorm, flat, k_img)
    boot = ac_aux["ret0"].reshape(batch.reward.shape)
    rv, rv_aux = replay_value_loss(nets, cfg, params, slow_val, post, batch, boot)
    metrics = {**wm_aux["metrics"], **ac_aux["metrics"], **rv_aux["metrics"]}
    metrics["loss/total"] = wm + ac + rv
    returns = {"imag": ac_aux["ret"], "replay": rv_aux["ret"]}  # [H, B T] and [B, T - 1]
    aux = {"metrics": metrics, "retnorm": ac_aux["retnorm"], "post": post, "returns": returns}
    return wm + ac + rv, aux
