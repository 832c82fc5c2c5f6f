"""TD-MPC2's implicit world model for state observations: encode, next, reward, pi and Q.

arXiv:2310.16828v2 Sec. 3.1 and App. A; nicklashansen/tdmpc2 common/world_model.py (HEAD e9f5932
:17-35 construction, :103-216 methods) and common/layers.py (:74-150 SimNorm, NormedLinear, mlp,
enc). Every network is the reference's ``mlp``: hidden NormedLinear layers (Linear, [Dropout],
LayerNorm, Mish; :class:`ajax.networks.blocks.NormedMLP`) and an output Linear, which for the
encoder and the dynamics is followed by LayerNorm and SimNorm so that the latent is a
concatenation of probability vectors. Kernels are N(0, 0.02^2), biases 0, and the last kernels of
the reward head and of every Q member are zero (world_model.py:30-32).

Multi-task (``tasks`` a :class:`~ajax.agents.tdmpc2.tasks.TaskSet`): a learned task embedding
of ``cfg.task_dim`` features (torch ``nn.Embedding(max_norm=1)``, init U(-0.02, 0.02);
world_model.py:20-25, :80-101) is concatenated to every input, after z and before a ([z, e, a];
[obs, e] for the encoder), and the policy masks the dimensions a task does not have. Every method
then takes the task ids ``task`` (int, broadcastable against the batch). The termination head
(HEAD's ``episodic`` option) is built only when ``cfg.episodic``.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.agents.tdmpc2.config import TDMPC2Config
from ajax.agents.tdmpc2.ensemble import Ensemble
from ajax.agents.tdmpc2.pixels import PixelEncoder
from ajax.agents.tdmpc2.policy import SquashedGaussian, bounded_log_std
from ajax.agents.tdmpc2.tasks import TaskSet
from ajax.networks.blocks import NormedMLP, linear

_INIT = "normal(0.02)"  # torch trunc_normal_(std=0.02) cuts at +-2, i.e. 100 sigma (init.py:4-9)
COMPONENTS = ("encoder", "dynamics", "reward", "pi", "Qs")
TASK_EMB = "task_emb"  # the multi-task embedding's component (world-model optimiser group)


def _uniform(limit: float):
    """U(-limit, limit) initialiser (torch ``nn.init.uniform_(w, -limit, limit)``)."""

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -limit, limit)

    return init


def simnorm(x: jax.Array, group: int = 8) -> jax.Array:
    """Simplicial normalisation: a softmax over consecutive groups of ``group`` features.

    Spec 000 B7; paper Eq. 5 with tau = 1; layers.py:74-91 (HEAD). The probabilities are the
    latent: no sampling, no unimix (unlike DreamerV3's categorical latents).
    """
    if x.shape[-1] % group:
        raise ValueError(f"last axis {x.shape[-1]} is not a multiple of the SimNorm group {group}")
    groups = x.reshape(*x.shape[:-1], x.shape[-1] // group, group)
    return jax.nn.softmax(groups, axis=-1).reshape(x.shape)


class MLP(nn.Module):
    """The reference's ``mlp(in, [units] * layers, out, act, dropout)`` (layers.py:121-150).

    ``simnorm_dim`` None gives a plain Linear output; an int gives Linear -> LayerNorm(eps 1e-5)
    -> SimNorm, the last NormedLinear of the encoder and the dynamics. ``out_scale`` 0 zeroes the
    output kernel (reward and Q heads). Dropout follows the first Dense only.
    """

    layers: int
    units: int
    out: int
    simnorm_dim: int | None = None
    out_scale: float = 1.0
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool | None = None) -> jax.Array:
        h = NormedMLP.tdmpc2(self.layers, self.units, dropout=self.dropout, name="trunk")
        h = h(x, deterministic=deterministic)
        h = linear(self.out, _INIT, outscale=self.out_scale, name="out")(h)
        if self.simnorm_dim is None:
            return h
        h = nn.LayerNorm(epsilon=1e-5, use_fast_variance=False, name="out_norm")(h)
        return simnorm(h, self.simnorm_dim)


class WorldModel(nn.Module):
    """Encoder, latent dynamics, reward head, policy prior and Q ensemble of one TD-MPC2 agent.

    Parameters live under ``encoder``, ``dynamics``, ``reward``, ``pi`` and ``Qs`` (the member
    axis first). Initialise with ``WorldModel(cfg, A).init(key, obs, action)``; call a single
    component with ``apply(variables, ..., method="encode" | "next" | "reward" | "pi" | "Q")``. A
    method only needs its own subtree, so the target Qs are ``{"params": {"Qs": target}}``.
    """

    cfg: TDMPC2Config
    action_dim: int
    image_shape: tuple[int, int, int] | None = None  # pixels: the conv encoder of pixels.py
    tasks: TaskSet | None = None  # multi-task: the task embedding and action masks

    def setup(self):
        cfg, arch = self.cfg, self.cfg.arch
        if self.action_dim < 1:
            raise ValueError(f"action_dim must be >= 1, got {self.action_dim}")
        if self.tasks is not None:
            if self.tasks.action_dim != self.action_dim:
                raise ValueError(
                    f"action_dim {self.action_dim} must be the tasks' widest, "
                    f"{self.tasks.action_dim}"
                )
            if self.image_shape is not None or cfg.episodic:
                raise ValueError("multi-task TD-MPC2 is for state observations, not episodic")
            self._task_emb = nn.Embed(
                len(self.tasks.names),
                cfg.task_dim,
                embedding_init=_uniform(0.02),  # init.py weight_init: nn.Embedding
                name=TASK_EMB,
            )
        enc_layers = max(arch.num_enc_layers - 1, 1)
        if self.image_shape is None:
            self._encoder = MLP(
                enc_layers, arch.enc_dim, arch.latent_dim, simnorm_dim=cfg.simnorm_dim,
                name="encoder",
            )  # fmt: skip
        else:
            self._encoder = PixelEncoder(self.image_shape, cfg.num_channels, name="encoder")
        self._dynamics = MLP(
            2, arch.mlp_dim, arch.latent_dim, simnorm_dim=cfg.simnorm_dim, name="dynamics"
        )
        self._reward = MLP(2, arch.mlp_dim, cfg.num_bins, out_scale=0.0, name="reward")
        self._pi = MLP(2, arch.mlp_dim, 2 * self.action_dim, name="pi")
        self._Qs = Ensemble(member=q_member(cfg), num=arch.num_q, name="Qs")
        if cfg.episodic:  # HEAD world_model.py: mlp(latent, 2 * [mlp_dim], 1), not zeroed
            self._termination = MLP(2, arch.mlp_dim, 1, name="termination")

    def task_emb(self, task: jax.Array) -> jax.Array:
        """Embedding [..., task_dim] of task ids [...], each row scaled to norm <= 1.

        torch's ``max_norm=1`` renormalises a looked-up row in place, without a gradient, by
        1 / (|e| + 1e-7) where |e| > 1. Here the same factor is applied at lookup under
        stop_gradient (the same forward value); the update first rewrites its batch's rows with
        :func:`renorm_task_emb`, so there the factor is 1 and the gradient reaches the stored
        row as in the reference (deviations.md T56).
        """
        e = self._task_emb(jnp.asarray(task, jnp.int32))
        return e * jax.lax.stop_gradient(_renorm_factor(e))

    def _with_task(self, x: jax.Array, task) -> jax.Array:
        """[x, e(task)] in multi-task models (e broadcast over x's batch), else x."""
        if self.tasks is None:
            return x
        if task is None:
            raise ValueError("a multi-task WorldModel needs the task ids: pass task=...")
        e = self.task_emb(task)
        e = jnp.broadcast_to(e, x.shape[:-1] + e.shape[-1:])
        return jnp.concatenate([x, e], axis=-1)

    def _check_action(self, z: jax.Array, a: jax.Array) -> None:
        if a.shape[-1] != self.action_dim or a.shape[:-1] != z.shape[:-1]:
            raise ValueError(
                f"action shape {a.shape} must be z's batch shape {z.shape[:-1]} + "
                f"({self.action_dim},)"
            )

    def encode(self, obs: jax.Array, task=None) -> jax.Array:
        """Latent z [..., latent_dim] of state observations [..., S] (world_model.py:103-112),
        or of flat frames [..., H W C] through the conv stack, then SimNorm (layers.py conv)."""
        if self.image_shape is None:
            return self._encoder(self._with_task(obs, task))
        return simnorm(self._encoder(obs), self.cfg.simnorm_dim)

    def next(self, z: jax.Array, a: jax.Array, task=None) -> jax.Array:
        """Next latent d(z, a), deterministic (world_model.py:114-121)."""
        self._check_action(z, a)
        return self._dynamics(jnp.concatenate([self._with_task(z, task), a], axis=-1))

    def reward(self, z: jax.Array, a: jax.Array, task=None) -> jax.Array:
        """Reward logits [..., num_bins] (world_model.py:123-130); decode with cfg.two_hot()."""
        self._check_action(z, a)
        return self._reward(jnp.concatenate([self._with_task(z, task), a], axis=-1))

    def pi(self, z: jax.Array, task=None) -> SquashedGaussian:
        """Policy prior at z: pre-tanh mean and bounded log std (world_model.py:144-155).

        Sample with :func:`ajax.agents.tdmpc2.policy.sample_squashed` and explicit noise. In a
        multi-task model mu and log std are masked to the task's action dimensions.
        """
        mean, raw = jnp.split(self._pi(self._with_task(z, task)), 2, axis=-1)
        log_std = bounded_log_std(raw, self.cfg.log_std_min, self.cfg.log_std_max)
        if self.tasks is None:
            return SquashedGaussian(mean, log_std)
        mask = jnp.broadcast_to(self.tasks.mask(task), mean.shape)
        return SquashedGaussian(mean * mask, log_std * mask, mask)

    def Q(
        self,
        z: jax.Array,
        a: jax.Array,
        task=None,
        *,
        deterministic: bool,
        dropout_mask: jax.Array | None = None,
    ) -> jax.Array:
        """Logits of every member, [num_q, ..., num_bins] (``return_type='all'``).

        ``deterministic=False`` applies each member's own dropout mask (needs a "dropout" RNG);
        reduce to 'min' or 'avg' with :func:`ajax.agents.tdmpc2.ensemble.pair_q`. The choice is
        the caller's per pass: see the ensemble module's note on the references. A given
        ``dropout_mask`` [num_q, ..., mlp_dim] (1 = kept) is used instead of drawing one.
        """
        self._check_action(z, a)
        x = jnp.concatenate([self._with_task(z, task), a], axis=-1)
        return self._Qs(x, deterministic=deterministic, dropout_mask=dropout_mask)

    def termination(self, z: jax.Array) -> jax.Array:
        """Termination logit [...] of arriving at latent z (HEAD ``episodic``; cfg.episodic only).

        Train it with :func:`ajax.distributional.bernoulli_loss` on hard 0/1 labels; planning
        treats sigmoid(logit) > 0.5 as an absorbing termination.
        """
        if not self.cfg.episodic:
            raise ValueError("the termination head exists only with TDMPC2Config(episodic=True)")
        return self._termination(z)[..., 0]

    def __call__(self, obs: jax.Array, a: jax.Array, task=None) -> dict[str, jax.Array]:
        """Every component once (for ``init``): z, next z, reward and Q logits, policy mean."""
        if self.tasks is not None and task is None:
            task = jnp.zeros(obs.shape[:-1], jnp.int32)
        z = self.encode(obs, task)
        out = dict(
            z=z,
            next=self.next(z, a, task),
            reward=self.reward(z, a, task),
            pi=self.pi(z, task).mean,
            Q=self.Q(z, a, task, deterministic=True),
        )
        if self.cfg.episodic:
            out["termination"] = self.termination(z)
        return out


def _renorm_factor(rows: jax.Array) -> jax.Array:
    """torch ``embedding_renorm_`` with max_norm 1 (aten Embedding.cpp): rows [..., D] of norm
    above 1 are multiplied by 1 / (norm + 1e-7), the others by 1; returns the factor [..., 1]."""
    norm = jnp.linalg.norm(rows, axis=-1, keepdims=True)
    return jnp.where(norm > 1.0, 1.0 / (norm + 1e-7), 1.0)


def renorm_task_emb(params: dict, task) -> dict:
    """``params`` with the stored task-embedding rows of ``task`` (ids, any shape) renormalised
    in place as torch's ``nn.Embedding(max_norm=1)`` lookup does (world_model.py:20, :89); rows
    not looked up keep their values. A single-task ``params`` (no "task_emb") is returned as is."""
    if TASK_EMB not in params:
        return params
    table = params[TASK_EMB]["embedding"]
    seen = jnp.zeros(table.shape[:1], bool).at[jnp.ravel(jnp.asarray(task, jnp.int32))].set(True)
    factor = jnp.where(seen[:, None], _renorm_factor(table), 1.0)
    return {**params, TASK_EMB: {"embedding": table * factor}}


def task_embedding(model: WorldModel, params: dict, task) -> jax.Array | None:
    """:meth:`WorldModel.task_emb` of ``task`` for a multi-task model, None for a single task
    (the ``emb`` argument of :func:`Q_members`)."""
    if model.tasks is None:
        return None
    return model.apply({"params": params}, task, method="task_emb")


def q_member(cfg: TDMPC2Config) -> nn.Module:
    """The template of one Q member (world_model.py:28-29): an MLP to ``num_bins`` logits with
    dropout after the first layer and a zeroed last kernel."""
    return MLP(2, cfg.arch.mlp_dim, cfg.num_bins, out_scale=0.0, dropout=cfg.dropout, parent=None)


def Q_members(
    cfg: TDMPC2Config,
    qs_params: dict,
    z: jax.Array,
    a: jax.Array,
    members: jax.Array,
    dropout_mask: jax.Array | None = None,
    emb: jax.Array | None = None,
) -> jax.Array:
    """Logits [M, ..., num_bins] of the Q members ``members`` [M] alone (issue 13's FLOP cut).

    The ensemble's parameters are sliced to those members and run as an M-member ensemble, so
    a 'min'/'avg' of a random pair costs 2 / num_q of :meth:`WorldModel.Q`'s FLOPs and gives
    its rows ``members``. Without ``dropout_mask`` no dropout (the TD-target and planner passes,
    eval mode in HEAD); with one [M, ..., mlp_dim] (1 = kept, e.g. from
    :func:`~ajax.agents.tdmpc2.ensemble.keep_masks`) each member drops with its own mask.
    ``emb`` is a multi-task model's task embedding (:meth:`WorldModel.task_emb`), broadcast
    over z's batch and placed between z and a, as :meth:`WorldModel.Q` does.
    """
    if a.shape[:-1] != z.shape[:-1]:
        raise ValueError(f"action shape {a.shape} must be z's batch shape {z.shape[:-1]} + (A,)")
    sub = jax.tree.map(lambda p: p[members], qs_params)
    ensemble = Ensemble(member=q_member(cfg), num=members.shape[0])
    parts = [z] if emb is None else [z, jnp.broadcast_to(emb, z.shape[:-1] + emb.shape[-1:])]
    x = jnp.concatenate([*parts, a], axis=-1)
    return ensemble.apply({"params": sub}, x, deterministic=True, dropout_mask=dropout_mask)


def param_counts(params: dict) -> dict[str, int]:
    """Number of parameters per component of :class:`WorldModel` params, plus ``total``.

    Like the reference's ``total_params`` (world_model.py:66-68), the target Qs are not counted.
    Accepts the ``params`` collection or the full variables dict.
    """
    params = params.get("params", params)
    missing = [c for c in COMPONENTS if c not in params]
    if missing:
        raise ValueError(f"not WorldModel params: missing {missing}; found {sorted(params)}")
    present = COMPONENTS + tuple(c for c in ("termination", TASK_EMB) if c in params)
    counts = {c: sum(leaf.size for leaf in jax.tree.leaves(params[c])) for c in present}
    counts["total"] = sum(counts.values())
    return counts


def latent_rollout(
    next_fn: Callable[[jax.Array, jax.Array], jax.Array], z0: jax.Array, actions: jax.Array
) -> jax.Array:
    """Latents z_0..z_H [H + 1, ...] of z_{t+1} = next_fn(z_t, a_t) for given actions [H, ...].

    Spec 000 B14, TD-MPC2's consistency rollout with buffer actions (HEAD tdmpc2.py:268-276),
    as a time-major ``lax.scan``. Gradients flow through the carry.
    """
    if actions.ndim < 1 or actions.shape[0] < 1:
        raise ValueError(f"actions must be time-major [H, ...] with H >= 1, got {actions.shape}")

    def step(z, a):
        z_next = next_fn(z, a)
        return z_next, z_next

    _, zs = jax.lax.scan(step, z0, actions)
    return jnp.concatenate([z0[None], zs], axis=0)
