"""Parity of TD-MPC2's pixel path with the official PyTorch code (issue 37 item 3, D54).

``fixtures/tdmpc2_pixel_encoder.npz`` holds the official ``rgb`` encoder at model size 5
(layers.py:136-162: ShiftAug, PixelPreprocess, four Conv2d, Flatten, SimNorm), fixed frames,
the ShiftAug shifts it drew and what it computed, plus the official world model's parameter
counts at every model size. ``fixtures/tdmpc2_pixel_update_parity.npz`` is one full official
``_update`` on pixel observations at a small custom size, with every draw recorded (ShiftAug's
shifts included). See ``fixtures/PROVENANCE.md``. Torch frames are NCHW; Ajax's are flat
[H W C] (:func:`nchw_to_flat`), and torch's shift (x, y) is Ajax's offset (dy, dx) = (y, x).
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.agents.tdmpc2.test_t2_parity import (
    _check,
    _jit_update,
    _noise,
    _setup,
    conv_encoder,
    nchw_to_flat,
)
from tests.one_shot import jit_once

from ajax.agents.tdmpc2 import TDMPC2Config, WorldModel, draw_act_noise
from ajax.agents.tdmpc2.pixels import PixelEncoder, shift_images
from ajax.agents.tdmpc2.update import draw_update_noise

FIXTURES = Path(__file__).parent / "fixtures"
ENCODER = FIXTURES / "tdmpc2_pixel_encoder.npz"
UPDATE = FIXTURES / "tdmpc2_pixel_update_parity.npz"
IMAGE = (64, 64, 9)
_GROUPS = {"_encoder": "encoder", "_dynamics": "dynamics", "_reward": "reward", "_pi": "pi",
           "_Qs": "Qs"}  # fmt: skip


def _yx(shift_xy: np.ndarray) -> jnp.ndarray:
    """Torch ShiftAug's (x, y) offsets as Ajax's (dy, dx)."""
    return jnp.asarray(shift_xy[..., ::-1], jnp.int32)


def _counts(size: int, channels: int) -> dict:
    """Ajax's parameter count of each pixel world-model component (no allocation)."""
    cfg = TDMPC2Config.preset(size, num_channels=channels)
    model = WorldModel(cfg, 1, IMAGE)
    shapes = jax.eval_shape(
        model.init, jax.random.PRNGKey(0), jnp.zeros((1, 64 * 64 * 9)), jnp.zeros((1, 1))
    )["params"]
    return {k: sum(x.size for x in jax.tree.leaves(v)) for k, v in shapes.items()}


def test_t2_pixel_parameter_counts_match_official_at_every_size():
    """Encoder 58,272 at 32 channels; the whole size-5 pixel model 4,856,320 (action_dim 1).
    The conv output is the latent, so a pixel model runs only at num_channels = latent_dim / 16
    (size 5: the default 32); every size is compared there. At 32 channels the other sizes
    build in torch but cannot run (their in-widths say latent_dim, the encoder gives 512): only
    their encoder is compared."""
    data = dict(np.load(ENCODER))
    runs = sorted({k.split("/")[1] for k in data if k.startswith("count/")})
    assert len(runs) == 9, runs
    for run in runs:
        size, channels = (int(p.lstrip("sizech")) for p in run.split("_"))
        want = {g: int(data[f"count/{run}/{t}"]) for t, g in _GROUPS.items()}
        if TDMPC2Config.preset(size).arch.latent_dim != 16 * channels:
            encoder = jax.eval_shape(
                PixelEncoder(IMAGE, channels).init,
                jax.random.PRNGKey(0),
                jnp.zeros((1, 64 * 64 * 9)),
            )
            assert sum(x.size for x in jax.tree.leaves(encoder)) == want["encoder"], run
            continue
        got = _counts(size, channels)
        assert got == want, run
        assert sum(got.values()) == int(data[f"count/{run}/total_params"]), run
    assert int(data["count/size5_ch32/_encoder"]) == 58_272
    assert int(data["count/size5_ch32/total_params"]) == 4_856_320


def test_t2_pixel_encoder_features_match_official():
    """The size-5 encoder (32 channels, official init) on 4 fixed frames: the conv features,
    the SimNorm latent, ShiftAug's output at the recorded shifts and the latent through it."""
    data = dict(np.load(ENCODER))
    sd = {k[len("param/") :]: v for k, v in data.items() if k.startswith("param/")}
    params = conv_encoder(sd)
    model = WorldModel(TDMPC2Config.preset(5), 1, IMAGE)
    frames = jnp.asarray(nchw_to_flat(data["input/frames"]))
    shifts = _yx(data["draw/shift_xy"])

    @jit_once
    def run(params, frames, shifts):
        with jax.default_matmul_precision("highest"):
            conv = PixelEncoder(IMAGE, 32).apply({"params": params}, frames)
            encode = lambda x: model.apply({"params": {"encoder": params}}, x, method="encode")
            shifted = shift_images(frames, shifts, IMAGE)
            return conv, encode(frames), shifted, encode(shifted)

    conv, latent0, shifted, latent = run(params, frames, shifts)
    np.testing.assert_allclose(conv, data["out/conv_features"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(latent0, data["out/latent_noshift"], rtol=1e-5, atol=1e-6)
    # grid_sample's bilinear weights at pixel centres are off by ~1e-5: 0.002 of 255 at most
    want = nchw_to_flat(data["out/shifted"])
    np.testing.assert_allclose(np.asarray(shifted, np.float32), want, rtol=0, atol=4e-3)
    np.testing.assert_allclose(latent, data["out/latent"], rtol=1e-5, atol=1e-6)


def _pixel_noise(data, **kwargs):
    return _noise(data, **kwargs).replace(obs_shift=_yx(data["draw/shift_xy"]))


@pytest.mark.slow  # 45 s on CI's 2 cores; the dropout update below stays in the default run
def test_t2_pixel_update_parity_with_official_nodrop():
    """One pixel update with ``dropout: 0`` and the recorded shifts equals ``nodrop/*``."""
    data = dict(np.load(UPDATE))
    cfg, model, discount, state, batch = _setup(data, dropout=0.0)
    new, metrics = _jit_update(cfg, model, discount)(state, batch, _pixel_noise(data))
    print(_check(data, "nodrop/", state, new, metrics))


def test_t2_pixel_update_parity_with_official():
    """One pixel update with dropout 0.01, the recorded Q keep-masks and shifts."""
    data = dict(np.load(UPDATE))
    cfg, model, discount, state, batch = _setup(data, dropout=float(data["hp/dropout"]))
    noise = _pixel_noise(
        data,
        value_mask=jnp.asarray(data["draw/dropout_mask_value"]),
        pi_mask=jnp.asarray(data["draw/dropout_mask_pi_loss"]),
    )
    new, metrics = _jit_update(cfg, model, discount)(state, batch, noise)
    print(_check(data, "", state, new, metrics))


def test_t2_pixel_update_latents_match_official_only_with_the_shifts():
    """The update's encoded latents: obs[0] (rollout start) and obs[1:] (TD targets), each
    frame at its recorded shift, equal the official; unshifted frames are far off."""
    data = dict(np.load(UPDATE))
    cfg, model, _, state, batch = _setup(data, dropout=0.0)
    want = np.concatenate([data["inter/z0"][None], data["inter/next_z"]])
    encode = jax.jit(lambda obs: model.apply({"params": state.params}, obs, method="encode"))
    with jax.default_matmul_precision("highest"):
        shifted = encode(shift_images(batch.obs, _yx(data["draw/shift_xy"]), model.image_shape))
        unshifted = encode(batch.obs)
    np.testing.assert_allclose(shifted, want, rtol=0, atol=1e-6)
    assert float(np.max(np.abs(unshifted - want))) > 1e-3


@pytest.mark.parametrize("pixels", [False, True])
def test_t2_update_noise_draws_shifts_only_for_pixels(pixels):
    cfg = TDMPC2Config.preset(5, batch_size=2)
    key = jax.random.PRNGKey(0)
    noise = draw_update_noise(key, cfg, 1)
    assert noise.obs_shift is None  # the state draws are unchanged either way
    act = draw_act_noise(key, cfg, 1, IMAGE if pixels else None)
    assert (act.shift is not None) == pixels
    if pixels:
        assert act.shift.shape == (2,) and 0 <= int(act.shift.min()) <= int(act.shift.max()) <= 6
