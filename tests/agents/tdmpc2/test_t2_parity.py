"""Parity of one full TD-MPC2 update with the official PyTorch code (issue 5 fidelity check).

The fixture (``fixtures/tdmpc2_update_parity.npz``, written by running nicklashansen/tdmpc2;
see ``fixtures/PROVENANCE.md``) holds the torch state_dict before and after one ``_update``,
the batch, the random draws and the losses. This test maps the torch names onto Ajax's tree
(torch Linear weight [out, in] -> flax kernel [in, out]; ensemble weights [Nq, out, in]) and
asserts losses and updated parameters to 1e-5. It skips while the fixture is missing.

Assumed array names (adapt ``_key`` if PROVENANCE.md says otherwise): ``init/<torch name>``,
``updated/<torch name>``, ``batch/{obs,action,reward}`` time-major, ``noise/{td_eps, td_pair,
pi_eps, pi_pair}``, ``loss/{consistency_loss, reward_loss, value_loss, pi_loss}``; dropout 0.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "tdmpc2_update_parity.npz"
_PREFIX = {"encoder": "_encoder.state", "dynamics": "_dynamics", "reward": "_reward",
           "pi": "_pi", "Qs": "_Qs.params"}  # fmt: skip


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


def torch_to_flax(sd: dict, template: dict) -> dict:
    """Ajax WorldModel params from an official state_dict (names without the ``model.``)."""
    return {
        name: _component(sd, prefix, template[name], ensemble=name == "Qs")
        for name, prefix in _PREFIX.items()
    }


def test_t2_update_parity_with_official():
    if not FIXTURE.exists():
        pytest.skip(f"parity fixture {FIXTURE.name} not written yet (see issue 5)")
    data = dict(np.load(FIXTURE))
    if not any(k.startswith("init/") for k in data):
        pytest.skip(f"fixture layout differs from the assumed names: {sorted(data)[:8]}...")
    from ajax.agents.tdmpc2 import TDMPC2Config, UpdateNoise, WorldModel, update_with_noise
    from ajax.agents.tdmpc2.update import init_state
    from ajax.buffers.windows import TDMPC2Slice

    init = {k[5:]: v for k, v in data.items() if k.startswith("init/")}
    updated = {k[8:]: v for k, v in data.items() if k.startswith("updated/")}
    obs, action = data["batch/obs"], data["batch/action"]
    cfg = TDMPC2Config.preset(1, dropout=0.0, batch_size=obs.shape[1])
    model = WorldModel(cfg, action.shape[-1])
    state = init_state(cfg, model, jax.random.PRNGKey(0), obs.shape[-1])
    params = torch_to_flax(init, state.params)
    target = torch_to_flax({k.replace("_target_Qs", "_Qs"): v for k, v in init.items()},
                           state.params)["Qs"]  # fmt: skip
    state = state.replace(params=params, target_Qs=target)
    batch = TDMPC2Slice(
        obs=jnp.asarray(obs),
        action=jnp.asarray(action),
        reward=jnp.asarray(data["batch/reward"]).reshape(action.shape[:2]),
        terminated=jnp.zeros(action.shape[:2], bool),
    )
    key = jax.random.PRNGKey(0)
    noise = UpdateNoise(
        td_eps=jnp.asarray(data["noise/td_eps"]),
        td_pair=jnp.asarray(data["noise/td_pair"]),
        pi_eps=jnp.asarray(data["noise/pi_eps"]),
        pi_pair=jnp.asarray(data["noise/pi_pair"]),
        value_dropout=key,
        pi_dropout=key,
    )
    discount = float(data.get("discount", cfg.discount(1000)))
    new, metrics = update_with_noise(cfg, model, discount, state, batch, noise)
    for name in ("consistency_loss", "reward_loss", "value_loss", "pi_loss"):
        np.testing.assert_allclose(metrics[name], data[f"loss/{name}"], rtol=1e-5, atol=1e-6)
    expect = torch_to_flax(updated, state.params)
    for got, want in zip(jax.tree.leaves(new.params), jax.tree.leaves(expect), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
