"""Parity of one full TD-MPC2 update with the official PyTorch code (issue 5 fidelity check).

The fixture ``fixtures/tdmpc2_update_parity.npz`` (see ``fixtures/PROVENANCE.md``) holds the
official state before one ``_update`` (params, target Qs, both Adams at step 3, the
RunningScale), the batch, every random draw, the returned losses and the state after. This
test maps the torch names onto Ajax's tree (Linear weight [out, in] -> kernel [in, out]; the Q
ensemble keeps its member axis first), replays the update with the recorded draws and asserts
every loss and every updated parameter (and each parameter's step). The Q ensemble's dropout is
replayed from the recorded keep-masks (``UpdateNoise.value_mask`` / ``pi_mask``); the ``nodrop/*``
block is the same update run with ``dropout: 0``. ``fixtures/tdmpc2_plan_parity.npz`` does the
same for one planning decision. Each runs as one jitted program.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tests.one_shot import jit_once

from ajax.agents.tdmpc2 import TDMPC2Config, UpdateNoise, WorldModel, update_with_noise
from ajax.agents.tdmpc2.update import init_state
from ajax.buffers.windows import TDMPC2Slice
from ajax.normalizers import RunningScale

FIXTURE = Path(__file__).parent / "fixtures" / "tdmpc2_update_parity.npz"
_PREFIX = {"encoder": "_encoder.state", "dynamics": "_dynamics", "reward": "_reward",
           "pi": "_pi", "Qs": "_Qs.params"}  # fmt: skip
_TARGET_PREFIX = "_target_Qs_params"
_LOSSES = ("consistency_loss", "reward_loss", "value_loss", "total_loss", "grad_norm",
           "pi_loss", "pi_grad_norm", "pi_scaled_entropy", "pi_scale")  # fmt: skip


def _linear(sd, name, ensemble):
    w, b = sd[f"{name}.weight"], sd[f"{name}.bias"]
    return {"kernel": np.swapaxes(w, -1, -2) if ensemble else w.T, "bias": b}


def _component(sd, prefix, template, ensemble=False):
    """One component's flax params from torch names ``prefix.{i}.weight`` / ``.ln.weight``."""
    trunk = template["member"]["trunk"] if ensemble else template["trunk"]
    hidden = sum(k.startswith("dense_") for k in trunk)
    out = {"trunk": {}}
    for i in range(hidden):
        out["trunk"][f"dense_{i}"] = _linear(sd, f"{prefix}.{i}", ensemble)
        out["trunk"][f"norm_{i}"] = {
            "scale": sd[f"{prefix}.{i}.ln.weight"],
            "bias": sd[f"{prefix}.{i}.ln.bias"],
        }
    out["out"] = _linear(sd, f"{prefix}.{hidden}", ensemble)
    if f"{prefix}.{hidden}.ln.weight" in sd:
        out["out_norm"] = {
            "scale": sd[f"{prefix}.{hidden}.ln.weight"],
            "bias": sd[f"{prefix}.{hidden}.ln.bias"],
        }
    return {"member": out} if ensemble else out


def conv_encoder(sd: dict, prefix: str = "_encoder.rgb") -> dict:
    """The pixel encoder's flax params from torch's ``conv`` Sequential (layers.py:136-150):
    Conv2d at indices 2, 4, 6, 8, weight [out, in, kh, kw] -> kernel [kh, kw, in, out]."""
    return {
        f"conv_{i}": {
            "kernel": np.transpose(sd[f"{prefix}.{j}.weight"], (2, 3, 1, 0)),
            "bias": sd[f"{prefix}.{j}.bias"],
        }
        for i, j in enumerate((2, 4, 6, 8))
    }


def torch_to_flax(sd: dict, template: dict) -> dict:
    """Ajax WorldModel params from official ``named_parameters()`` (without ``model.``); a
    pixel model's encoder (``conv_*`` in ``template``) from ``_encoder.rgb``."""
    tree = {
        name: conv_encoder(sd)
        if name == "encoder" and "conv_0" in template[name]
        else _component(sd, prefix, template[name], ensemble=name == "Qs")
        for name, prefix in _PREFIX.items()
    }
    expect = jax.tree.structure(template)
    assert jax.tree.structure(tree) == expect, "torch names do not cover Ajax's tree"
    return jax.tree.map(jnp.asarray, tree)


def _sub(data, prefix):
    return {k[len(prefix) :]: v for k, v in data.items() if k.startswith(prefix)}


def _targets(data, prefix, template):
    sd = {k.replace(_TARGET_PREFIX, _PREFIX["Qs"]): v for k, v in _sub(data, prefix).items()}
    return _component(sd, _PREFIX["Qs"], template["Qs"], ensemble=True)


def _fill(template, full):
    """``full``'s arrays at ``template``'s places; masked-out leaves (MaskedNode) stay."""
    if isinstance(template, dict):
        return {k: _fill(v, full[k]) for k, v in template.items()}
    if isinstance(template, optax.MaskedNode):
        return template
    return jnp.asarray(full, template.dtype)


def _with_adam(opt_state, mu, nu, step):
    """Every ScaleByAdamState inside ``opt_state`` set to torch's exp_avg/exp_avg_sq/step."""

    def put(s):
        if not isinstance(s, optax.ScaleByAdamState):
            return s
        return optax.ScaleByAdamState(
            count=jnp.asarray(step, s.count.dtype), mu=_fill(s.mu, mu), nu=_fill(s.nu, nu)
        )

    return jax.tree.map(put, opt_state, is_leaf=lambda s: isinstance(s, optax.ScaleByAdamState))


def nchw_to_flat(frames: np.ndarray) -> np.ndarray:
    """Official frames [..., C, H, W] as Ajax's flat images [..., H W C]."""
    return np.moveaxis(frames, -3, -1).reshape(*frames.shape[:-3], -1)


def _setup(data, dropout):
    """Config, model, discount, pre-update state and batch; a fixture with ``hp/num_channels``
    is a pixel one (obs [H + 1, B, C, 64, 64] uint8 frames)."""
    hp = _sub(data, "hp/")
    obs = data["batch/obs"]
    image_shape = (*obs.shape[-2:], obs.shape[-3]) if "num_channels" in hp else None
    extra = {"num_channels": int(hp["num_channels"])} if image_shape else {}
    cfg = TDMPC2Config.preset(
        1, enc_dim=int(hp["enc_dim"]), mlp_dim=int(hp["mlp_dim"]),
        latent_dim=int(hp["latent_dim"]), num_q=int(hp["num_q"]),
        grad_clip_norm=float(hp["grad_clip_norm"]), batch_size=int(hp["batch_size"]),
        dropout=dropout, **extra,
    )  # fmt: skip
    model = WorldModel(cfg, int(hp["action_dim"]), image_shape)
    obs_dim = int(np.prod(image_shape)) if image_shape else int(hp["obs_dim"])
    # shapes only: every leaf is replaced below (op by op, a real init compiles every op)
    state = jax.eval_shape(lambda key: init_state(cfg, model, key, obs_dim), jax.random.PRNGKey(0))
    params = torch_to_flax(_sub(data, "param/"), state.params)
    mu = torch_to_flax(_sub(data, "adam/exp_avg/"), state.params)
    nu = torch_to_flax(_sub(data, "adam/exp_avg_sq/"), state.params)
    steps = set(np.unique(np.stack(list(_sub(data, "adam/step/").values()))).tolist())
    assert steps == {3.0}, steps
    wm_mu, wm_nu = ({k: v for k, v in t.items() if k != "pi"} for t in (mu, nu))
    state = state.replace(
        params=params,
        target_Qs=jax.tree.map(jnp.asarray, _targets(data, "target_param/", state.params)),
        wm_opt=_with_adam(state.wm_opt, wm_mu, wm_nu, 3),
        pi_opt=_with_adam(state.pi_opt, mu["pi"], nu["pi"], 3),
        scale=RunningScale(value=jnp.asarray(data["scale/value_before"][0]), rate=cfg.tau),
    )
    batch = TDMPC2Slice(
        obs=jnp.asarray(nchw_to_flat(obs) if image_shape else obs),
        action=jnp.asarray(data["batch/action"]),
        reward=jnp.asarray(data["batch/reward"][..., 0]),
        terminated=jnp.asarray(data["batch/terminated"][..., 0]),
    )
    return cfg, model, float(hp["discount"]), state, batch


def _noise(data, **dropout):
    key = jax.random.PRNGKey(0)
    kwargs = dict(value_dropout=key, pi_dropout=key, **dropout)
    return UpdateNoise(
        td_eps=jnp.asarray(data["draw/pi_eps_td_target"]),
        td_pair=jnp.asarray(data["draw/q_pair_td_target"], jnp.int32),
        pi_eps=jnp.asarray(data["draw/pi_eps_pi_loss"]),
        pi_pair=jnp.asarray(data["draw/q_pair_pi_loss"], jnp.int32),
        **kwargs,
    )


def _check(data, prefix, state, new, metrics):
    """Assert every loss and every updated (and target) parameter; return the max gaps."""
    gaps = {}
    for name in _LOSSES:
        want = data[f"{prefix}out/{name}"]
        gaps[name] = float(abs(metrics[name] - want))
        np.testing.assert_allclose(metrics[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(new.scale.value, data[f"{prefix}scale/value_after"][0], rtol=1e-6)
    updated = torch_to_flax(_sub(data, f"{prefix}updated_param/"), state.params)
    target = _targets(data, f"{prefix}updated_target_param/", state.params)
    for group, got, want, before in (
        *((g, new.params[g], updated[g], state.params[g]) for g in _PREFIX),
        ("target_Qs", new.target_Qs, target, state.target_Qs),
    ):
        flat_got = jax.tree.leaves_with_path(got)
        for (path, g), w, b in zip(
            flat_got, jax.tree.leaves(want), jax.tree.leaves(before), strict=True
        ):
            label = f"{group}{jax.tree_util.keystr(path)}"
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=label)
            # The step itself (tiny against the parameter) at PROVENANCE's delta tolerance.
            np.testing.assert_allclose(g - b, np.asarray(w) - b, rtol=0, atol=1e-6, err_msg=label)
            gaps[group] = max(gaps.get(group, 0.0), float(np.max(np.abs(g - w))))
    return gaps


def _jit_update(cfg, model, discount):
    """The update as one compiled program (op-by-op dispatch of the whole update and its
    gradients compiles every primitive separately, which takes minutes on CPU)."""

    @jit_once
    def run(state, batch, noise):
        with jax.default_matmul_precision("highest"):
            return update_with_noise(cfg, model, discount, state, batch, noise)

    return run


def test_t2_update_parity_with_official_nodrop():
    """One update with ``dropout: 0`` equals the official ``nodrop/*`` block."""
    data = dict(np.load(FIXTURE))
    cfg, model, discount, state, batch = _setup(data, dropout=0.0)
    new, metrics = _jit_update(cfg, model, discount)(state, batch, _noise(data))
    print(_check(data, "nodrop/", state, new, metrics))


def test_t2_update_parity_with_official():
    """One update with dropout 0.01, replaying the recorded Q keep-masks, equals the official."""
    data = dict(np.load(FIXTURE))
    cfg, model, discount, state, batch = _setup(data, dropout=float(data["hp/dropout"]))
    noise = _noise(
        data,
        value_mask=jnp.asarray(data["draw/dropout_mask_value"]),
        pi_mask=jnp.asarray(data["draw/dropout_mask_pi_loss"]),
    )
    new, metrics = _jit_update(cfg, model, discount)(state, batch, noise)
    print(_check(data, "", state, new, metrics))


PLAN_FIXTURE = Path(__file__).parent / "fixtures" / "tdmpc2_plan_parity.npz"


def test_t2_plan_parity_with_official():
    """One planning decision (6 MPPI iterations, 24 policy trajectories) equals the official.

    HEAD draws the executed elite by Gumbel-max; the fixture's ``elite_u_equiv`` is the uniform
    that Ajax's inverse-CDF :func:`sample_elite` maps to the same elite (PROVENANCE.md).
    """
    from ajax.agents.tdmpc2.act import ActNoise, ValueNoise, pi_trajectories, plan_one
    from ajax.agents.tdmpc2.planner import PlanNoise

    data = dict(np.load(PLAN_FIXTURE))
    hp = _sub(data, "hp/")
    cfg = TDMPC2Config.preset(
        1, enc_dim=int(hp["enc_dim"]), mlp_dim=int(hp["mlp_dim"]),
        latent_dim=int(hp["latent_dim"]), num_q=int(hp["num_q"]),
    )  # fmt: skip
    model = WorldModel(cfg, int(hp["action_dim"]))
    template = jax.eval_shape(
        lambda key: model.init(key, jnp.zeros((1,) + data["input/obs"].shape), jnp.zeros((1, 1))),
        jax.random.PRNGKey(0),
    )["params"]
    params = torch_to_flax(_sub(data, "param/"), template)
    noise = ActNoise(
        pi_trajs=jnp.asarray(data["draw/pi_traj_eps"]),
        plan=PlanNoise(
            candidates=jnp.asarray(data["draw/candidate_eps"]),
            value_keys=ValueNoise(
                eps=jnp.asarray(data["draw/value_pi_eps"]),
                pair=jnp.asarray(data["draw/value_q_pair"], jnp.int32),
            ),
            elite_u=jnp.asarray(data["draw/elite_u_equiv"]),
            action=jnp.asarray(data["draw/action_eps"]),
        ),
    )
    obs = jnp.asarray(data["input/obs"])

    @jit_once
    def run(params, obs, prev_mean, noise):
        with jax.default_matmul_precision("highest"):
            z = model.apply({"params": params}, obs, method="encode")
            pi_actions = pi_trajectories(model, params, z, noise.pi_trajs)
            out = plan_one(
                cfg, model, float(hp["discount"]), params, obs, prev_mean,
                bool(data["input/t0"]), noise, bool(data["input/eval_mode"]),
            )  # fmt: skip
        return z, pi_actions, out

    z, pi_actions, out = run(params, obs, jnp.asarray(data["input/prev_mean"]), noise)
    np.testing.assert_allclose(z, data["inter/z"][0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(pi_actions, data["inter/pi_actions"], rtol=0, atol=1e-6)
    assert int(out.elite_index) == int(data["out/elite_choice"])
    for name in ("action", "mean", "std", "score", "elite_actions"):
        got, want = getattr(out, name), data[f"out/{name}"]
        print(name, float(np.max(np.abs(np.asarray(got) - want))))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_t2_replayed_dropout_mask_is_validated():
    """A replayed mask needs one slice per member and members that have dropout."""
    from ajax.agents.tdmpc2.ensemble import Ensemble
    from ajax.agents.tdmpc2.networks import MLP

    x = jnp.ones((2, 3))
    ens = Ensemble(member=MLP(2, 4, 5, dropout=0.5, parent=None), num=3)
    params = ens.init(jax.random.PRNGKey(0), x, deterministic=True)
    keep = jnp.ones((3, 2, 4))
    drop = jnp.zeros((3, 2, 4)).at[0].set(1.0)
    kept = ens.apply(params, x, dropout_mask=keep)
    dropped = ens.apply(params, x, dropout_mask=drop)
    np.testing.assert_array_equal(kept[0], dropped[0])  # member 0 keeps every unit in both
    assert not np.allclose(kept[1:], dropped[1:])
    with pytest.raises(ValueError, match="leading member axis"):
        ens.apply(params, x, dropout_mask=keep[:2])
    plain = Ensemble(member=MLP(2, 4, 5, parent=None), num=3)
    with pytest.raises(ValueError, match="dropout > 0"):
        plain.apply(plain.init(jax.random.PRNGKey(0), x), x, dropout_mask=keep)
