"""DreamerV3 on mixed observations (an image with vector features): the two encoder and
decoder paths, key selection by ``enc_spaces`` / ``dec_spaces``, the byte-and-float replay, and
the refusals (issue 11: "mixed dict observations with the official key selection")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.agents.dreamerv3.conv import ConvDecoder, ConvEncoder
from ajax.agents.dreamerv3.mixed import MixedDecoder, MixedEncoder, select_parts
from ajax.agents.dreamerv3.model import Nets, param_count
from ajax.environments import make_env
from ajax.environments.types import TimeStep, Wrapper
from ajax.validation import ConfigError


class WithFeatures(Wrapper):
    """Breakout-MinAtar's image followed by two vector features: each channel's mean over the
    first two channels (a test env: the features are a function of the image)."""

    def __init__(self, env):
        super().__init__(env)
        self.spec = env.spec.replace(observation_shape=(env.spec.obs_dim + 2,))

    def _obs(self, obs):
        planes = obs.reshape(*obs.shape[:-1], *self.env.spec.image_shape)
        return jnp.concatenate([obs, planes[..., :2].mean((-3, -2))], axis=-1)

    def _ts(self, ts: TimeStep) -> TimeStep:
        return ts.replace(obs=self._obs(ts.obs), final_obs=self._obs(ts.final_obs))

    def reset(self, key):
        return self._ts(self.env.reset(key))

    def step(self, key, state, action):
        return self._ts(self.env.step(key, state, action))


def test_spec_of_a_mixed_observation():
    env = WithFeatures(make_env("Breakout-MinAtar"))
    assert env.spec.image_shape == (10, 10, 4) and env.spec.vector_dim == 2 and env.spec.mixed
    assert not make_env("Breakout-MinAtar").spec.mixed
    assert make_env("Pendulum-v1").spec.vector_dim == 3


def test_key_selection_matches_whole_part_names():
    both = ("vector", "image")
    assert select_parts(".*", both, "enc_spaces") == both
    assert select_parts("image", both, "enc_spaces") == ("image",)
    assert select_parts("vec.*|image", both, "dec_spaces") == both
    with pytest.raises(
        ValueError, match=r"enc_spaces='img' selects none of .*\['vector', 'image'\]"
    ):
        select_parts("img", both, "enc_spaces")
    with pytest.raises(ValueError, match="dec_spaces='vector' selects none of.*'image'"):
        select_parts("vector", ("image",), "dec_spaces")
    with pytest.raises(ConfigError, match="enc_spaces.*regular expression"):
        DreamerV3Config(enc_spaces="(")


def test_mixed_modules_are_the_two_paths_side_by_side():
    """size1m, a 16 x 16 x 3 image with 5 features: the encoder's parameters are exactly the
    CNN's plus the vector MLP's, its token their widths added (MLP first); the decoder's are the
    transposed CNN's plus the vector head's; selecting one part drops the other's."""
    cfg = DreamerV3Config.preset("1m")
    shape, v = (16, 16, 3), 5
    obs_dim = 16 * 16 * 3 + v
    key = jax.random.PRNGKey(0)

    def counts(cfg, obs_dim, image_shape):
        nets = Nets.create(cfg, obs_dim, 2, True, image_shape)
        params = jax.eval_shape(lambda k: nets.init(k, obs_dim), key)
        return nets, param_count(params["enc"]), param_count(params["dec"])

    mixed, enc, dec = counts(cfg, obs_dim, shape)
    image, enc_i, dec_i = counts(cfg, 16 * 16 * 3, shape)
    vector, enc_v, dec_v = counts(cfg, v, None)
    assert isinstance(mixed.enc, MixedEncoder) and isinstance(mixed.dec, MixedDecoder)
    assert (enc, dec) == (enc_i + enc_v, dec_i + dec_v)
    assert mixed.enc.token_dim == image.enc.token_dim + vector.enc.token_dim

    only, enc_o, dec_o = counts(cfg.__class__(**{**cfg.__dict__, "enc_spaces": "image",
                                                 "dec_spaces": "image"}), obs_dim, shape)  # fmt: skip
    assert (enc_o, dec_o) == (enc_i, dec_i) and only.enc.token_dim == image.enc.token_dim

    # one jitted program: op by op (a compile per op) this test took 97 s of the suite
    img = ConvDecoder(shape, cfg.arch.depth, cfg.arch.units, cfg.arch.deter)

    @jax.jit
    def paths(key):
        params = mixed.init(key, obs_dim)
        x = jax.random.uniform(key, (3, obs_dim))
        cnn = ConvEncoder(shape, cfg.arch.depth).apply({"params": params["enc"]["cnn"]}, x[:, :-v])
        stored = mixed.enc.stored(x)
        feat = jax.random.normal(key, (3, 512 + 32 * 4))
        recon = mixed.apply("dec", params, feat)
        want = img.loss(recon["image"], stored["image"]) + jnp.sum(
            (recon["vector"] - jnp.sign(x[:, -v:]) * jnp.log1p(jnp.abs(x[:, -v:]))) ** 2, -1
        )
        return x, mixed.apply("enc", params, x), cnn, stored, mixed.dec.loss(recon, stored), want

    x, tokens, cnn, stored, loss, want = paths(key)
    # the token: MLP output, then CNN output, each what its path gives alone
    np.testing.assert_allclose(tokens[:, cfg.arch.units :], cnn, rtol=1e-6)
    assert stored["image"].dtype == jnp.uint8 and stored["vector"].dtype == jnp.float32
    np.testing.assert_array_equal(stored["vector"], x[:, -v:])
    # the loss is each part's loss added
    np.testing.assert_allclose(loss, want, rtol=1e-6)


@pytest.mark.slow  # ~70 s in the default run; its parts are the module test above and
# test_d3_pixels.py's MinAtar run (the image path through the jitted loop)
def test_dreamerv3_mixed_run_is_jitted_over_two_seeds():
    """An image with features, 2 vmapped seeds in one jitted run: the replay keeps the image as
    bytes beside the float features, and the losses are finite."""
    cfg = DreamerV3Config.preset(
        "1m", batch_size=2, batch_length=4, train_ratio=8.0, eval_freq=60, eval_episodes=1
    )
    result = DreamerV3(WithFeatures(make_env("Breakout-MinAtar")), cfg).train(
        seed=0, total_steps=120, n_seeds=2
    )
    obs = result.state.replay.rows["obs"]
    assert obs["image"].dtype == jnp.uint8 and obs["image"].shape[-1] == 400
    assert obs["vector"].dtype == jnp.float32 and obs["vector"].shape[-1] == 2
    assert int(result.state.agent.updates.min()) >= 2
    assert np.all(np.isfinite(result.metrics["loss/rec"]))
    assert np.all(np.isfinite(result.metrics["loss/total"]))


def test_mixed_observations_are_refused_where_they_cannot_be_read():
    env = WithFeatures(make_env("Breakout-MinAtar"))
    with pytest.raises(ValueError, match="enc_spaces='vision' selects none"):
        DreamerV3(env, DreamerV3Config.preset("1m", enc_spaces="vision"))
    from ajax.agents.dqn import DQN

    with pytest.raises(ValueError, match="dqn reads image-only.*2 vector features.*dreamerv3"):
        DQN(env)
    from ajax.environments.image_wrappers import FrameStack

    with pytest.raises(ValueError, match="frame_stack acts on image-only.*2 vector features"):
        FrameStack(env, 2)
    with pytest.raises(ValueError, match="proprio= adds the state.*add pixels="):
        make_env("dmc:cartpole-swingup", proprio=True)
