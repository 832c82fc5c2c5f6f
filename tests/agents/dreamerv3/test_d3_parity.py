"""Parity of one full DreamerV3 train step and one acting step with the official code (issue 36).

Each ``fixtures/d3_parity_<case>.npz`` (see ``fixtures/PROVENANCE.md``; made by
``fixtures/make_fixtures.py`` running danijar/dreamerv3@e3f0224 in float32) holds the official
state before one train step (every parameter, the slow critic, the LaProp moments, the return
normaliser), the replayed window with its stored latents, every random draw the step consumed,
its losses and returns, and the state after. This test maps the official names onto Ajax's
tree, replays the step with the recorded draws (``TrainDraws``) and asserts the losses, the
imagined and replayed returns, the gradient norm, every updated parameter, both optimiser
moments, the slow critic, the normaliser and the replay write-back; then one acting step from a
recorded carry. Four cases: vector observations with continuous and with discrete actions,
64 x 64 x 3 images with discrete actions, an image with a vector beside it and continuous
actions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.one_shot import jit_once

from ajax.agents.dreamerv3 import MODEL_SIZES, DreamerV3Config
from ajax.agents.dreamerv3.losses import TrainDraws
from ajax.agents.dreamerv3.model import Nets, param_count
from ajax.agents.dreamerv3.rssm import RSSMState
from ajax.agents.dreamerv3.update import (
    ActCarry,
    DreamerV3State,
    act,
    init_state,
    split_window,
    train_step_with_aux,
)

FIXTURES = Path(__file__).parent / "fixtures"
CASES = ("vec_cont", "vec_disc", "img_disc", "mixed_cont")
MODULES = ("dyn", "enc", "dec", "rew", "con", "pol", "val")
LOSSES = ("dyn", "rep", "rew", "con", "policy", "value", "repval")

# official name (within a module) -> Ajax path, first match wins
_RULES = [
    (r"dynin(\d)/(kernel|bias)", r"dynin\1/dense_0/\2"),
    (r"dynin(\d)norm/scale", r"dynin\1/norm_0/scale"),
    (r"dynhid(\d)/(kernel|bias)", r"dynhid_\1/\2"),
    (r"dynhid(\d)norm/scale", r"dynhid_norm_\1/scale"),
    (r"obs(\d)/(kernel|bias)", r"post_mlp/dense_\1/\2"),
    (r"obs(\d)norm/scale", r"post_mlp/norm_\1/scale"),
    (r"obslogit/(\w+)", r"post_logit/\1"),
    (r"prior(\d)/(kernel|bias)", r"prior_mlp/dense_\1/\2"),
    (r"prior(\d)norm/scale", r"prior_mlp/norm_\1/scale"),
    (r"priorlogit/(\w+)", r"prior_logit/\1"),
    (r"dyngru/(\w+)", r"dyngru/\1"),
    (r"mlp(\d)/(kernel|bias)", r"{vec}NormedMLP_0/dense_\1/\2"),  # encoder
    (r"mlp(\d)norm/scale", r"{vec}NormedMLP_0/norm_\1/scale"),
    (r"cnn(\d)/(kernel|bias)", r"{img}conv_\1/\2"),
    (r"cnn(\d)norm/scale", r"{img}norm_\1/scale"),
    (r"mlp/linear(\d)/(kernel|bias)", r"{vec}NormedMLP_0/dense_\1/\2"),  # decoder and heads
    (r"mlp/norm(\d)/scale", r"{vec}NormedMLP_0/norm_\1/scale"),
    (r"vec/vector/pred/(\w+)", r"{vec}out/\1"),
    (r"sp0/(\w+)", r"{img}space0/\1"),
    (r"sp1/(\w+)", r"{img}space1/\1"),
    (r"sp1norm/scale", r"{img}space1_norm/scale"),
    (r"sp2/(\w+)", r"{img}space2/\1"),
    (r"spnorm/scale", r"{img}space_norm/scale"),
    (r"conv(\d)/(kernel|bias)", r"{img}conv_\1/\2"),
    (r"conv(\d)norm/scale", r"{img}norm_\1/scale"),
    (r"imgout/(\w+)", r"{img}image/\1"),
    (r"head/(?:action/)?logits?/(\w+)", r"out/\1"),
    (r"head/action/mean/(\w+)", r"out/mean/\1"),
    (r"head/action/stddev/(\w+)", r"out/std/\1"),
]


def _ajax_path(module: str, name: str, mixed: bool) -> tuple[str, ...]:
    for pattern, repl in _RULES:
        if re.fullmatch(pattern, name):
            path = re.sub(pattern, repl, name)
            vec = "mlp/" if mixed and module in ("enc", "dec") else ""
            path = path.format(vec=vec, img="cnn/" if mixed else "")
            return (module, *path.split("/"))
    raise KeyError(f"no rule for official parameter {module}/{name}")


def _nest(flat: dict) -> dict:
    tree: dict = {}
    for path, value in flat.items():
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = jnp.asarray(value)
    return tree


def _decoder_rows(module, name, value, cfg: DreamerV3Config):
    """The official vector decoder reads concat(stoch, deter) (rssm.py:293-295); Ajax's reads the
    heads' concat(deter, stoch): the first layer's kernel rows swap blocks."""
    first = "mlp/linear0/kernel"
    if module == "dec" and name == first:
        s = cfg.stoch * cfg.arch.classes
        return np.concatenate([value[s:], value[:s]], axis=0)
    return value


def official_to_ajax(flat: dict, prefix: str, cfg: DreamerV3Config, mixed: bool,
                     template: dict, module_map=None) -> dict:  # fmt: skip
    """Ajax's ``{enc, dyn, dec, rew, con, pol, val}`` from official ``<prefix><module>/<name>``
    arrays; ``module_map`` renames modules (slowval -> val)."""
    out = {}
    for key, value in flat.items():
        if not key.startswith(prefix):
            continue
        module, name = key[len(prefix) :].split("/", 1)
        if module_map is not None:
            if module not in module_map:
                continue
            module = module_map[module]
        if module not in MODULES:
            continue
        value = _decoder_rows(module, name, np.asarray(value), cfg)
        out[_ajax_path(module, name, mixed)] = value
    tree = _nest(out)
    tree = {k: tree[k] for k in template if k in tree}
    template = {k: template[k] for k in tree}
    assert jax.tree.structure(tree) == jax.tree.structure(template), "names do not cover Ajax"
    for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(template), strict=True):
        assert a.shape == b.shape, (a.shape, b.shape)
    return tree


def _load(case: str):
    path = FIXTURES / f"d3_parity_{case}.npz"
    return dict(np.load(path))


def _config(d) -> DreamerV3Config:
    hp = lambda k: int(d[f"hp/{k}"])
    return DreamerV3Config.preset(
        "1m", deter=hp("deter"), hidden=hp("hidden"), classes=hp("classes"), units=hp("units"),
        depth=hp("depth"), stoch=hp("stoch"), learning_rate=float(d["hp/lr"]),
        warmup=hp("warmup"), batch_size=hp("batch_size"), batch_length=hp("batch_length"),
        imag_length=hp("imag_length"),
    )  # fmt: skip


def _problem(case: str):
    d = _load(case)
    cfg = _config(d)
    discrete = str(d["hp/action_kind"]) == "disc"
    image = (64, 64, 3) if "batch/image" in d else None
    vector_dim = d["batch/vector"].shape[-1] if "batch/vector" in d else 0
    mixed = image is not None and vector_dim > 0
    obs_dim = (int(np.prod(image)) if image else 0) + vector_dim
    nets = Nets.create(cfg, obs_dim, int(d["hp/action_dim"]), discrete, image)
    # shapes only: _state replaces every leaf (op by op, a real init compiles every op: 22 s)
    state = jax.eval_shape(lambda key: init_state(cfg, nets, key, obs_dim), jax.random.key(0))
    return d, cfg, nets, state, discrete, image, mixed


def _opt_state(d, prefix, cfg, mixed, template_state: DreamerV3State):
    """The LaProp state from the official chain (clip_by_agc, scale_by_rms (step, nu),
    scale_by_momentum (step, mu), scale_by_learning_rate (count)): opt.py:126-164."""
    tmpl = template_state.params
    nu = official_to_ajax(d, f"{prefix}opt/state/1/1/", cfg, mixed, tmpl)
    mu = official_to_ajax(d, f"{prefix}opt/state/2/1/", cfg, mixed, tmpl)
    agc, rms, ema, sched = template_state.opt
    step = lambda k: jnp.asarray(d[f"{prefix}opt/state/{k}"], jnp.int32)
    return (
        agc,
        rms._replace(count=step("1/0"), nu=nu),
        ema._replace(count=step("2/0"), ema=mu),
        sched._replace(count=step("3/count")),
    )


def _state(d, prefix, cfg, mixed, template: DreamerV3State) -> DreamerV3State:
    tmpl = template.params
    return template.replace(
        params=official_to_ajax(d, prefix, cfg, mixed, tmpl),
        slow_val=official_to_ajax(d, prefix, cfg, mixed, tmpl, {"slowval": "val"})["val"],
        opt=_opt_state(d, prefix, cfg, mixed, template),
        retnorm=template.retnorm.replace(
            lo=jnp.asarray(d[f"{prefix}retnorm/lo/value"]),
            hi=jnp.asarray(d[f"{prefix}retnorm/hi/value"]),
        ),
        updates=jnp.asarray(d[f"{prefix}opt/step/value"], jnp.int32),
    )


def _window(d, image, mixed: bool) -> dict:
    if mixed:
        obs = {"image": d["batch/image"], "vector": d["batch/vector"]}
    else:
        obs = d["batch/image"] if image else d["batch/vector"]
    return {
        "obs": jax.tree.map(jnp.asarray, obs),
        "action": jnp.asarray(d["batch/action"]),
        "reward": jnp.asarray(d["batch/reward"]),
        "is_first": jnp.asarray(d["batch/is_first"]),
        "is_last": jnp.asarray(d["batch/is_last"]),
        "is_terminal": jnp.asarray(d["batch/is_terminal"]),
        "deter": jnp.asarray(d["batch/dyn/deter"]),
        "stoch": jnp.asarray(d["batch/dyn/stoch"].argmax(-1)),
    }


def _draws(d) -> TrainDraws:
    return TrainDraws(
        post_gumbel=jnp.asarray(d["draw/post_gumbel"]),
        img_action_noise=jnp.asarray(d["draw/img_action_noise"]),
        img_stoch_gumbel=jnp.asarray(d["draw/img_stoch_gumbel"]),
    )


# the image/discrete and vector/continuous cases in the default run, all four with -m slow
# (each case's setup compiles a whole train step: 24-44 s on 2 cores)
STEP_CASES = [c if c in ("img_disc", "vec_cont") else pytest.param(c, marks=pytest.mark.slow)
              for c in CASES]  # fmt: skip


@pytest.fixture(scope="module", params=STEP_CASES)
def replayed(request):
    """The official pre-step state replayed through Ajax's loss and train step (one program)."""
    d, cfg, nets, template, discrete, image, mixed = _problem(request.param)
    before = _state(d, "param/", cfg, mixed, template)
    batch, start = split_window(cfg, _window(d, image, mixed), discrete)
    draws = _draws(d)

    # one program: the step's own loss pass gives the aux (one forward, not two, to compile)
    new, aux, metrics = jit_once(
        lambda state: train_step_with_aux(cfg, nets, state, batch, start, draws)
    )(before)
    post = aux["post"]
    expected = _state(d, "updated/", cfg, mixed, template)
    return dict(d=d, cfg=cfg, nets=nets, before=before, aux=aux, new=new, post=post,
                metrics=metrics, expected=expected, discrete=discrete, image=image,
                mixed=mixed, case=request.param)  # fmt: skip


def test_losses_match_the_official_step(replayed):
    d, m = replayed["d"], replayed["metrics"]
    for k in LOSSES:
        np.testing.assert_allclose(m[f"loss/{k}"], d[f"out/loss/{k}"], rtol=1e-5, err_msg=k)
    rec = sum(d[f"out/loss/{k}"] for k in ("image", "vector") if f"out/loss/{k}" in d)
    np.testing.assert_allclose(m["loss/rec"], rec, rtol=1e-5)
    np.testing.assert_allclose(m["grad_norm"], d["out/opt/grad_norm"], rtol=1e-5)


def test_imagined_and_replayed_returns_match(replayed):
    d, returns = replayed["d"], replayed["aux"]["returns"]
    np.testing.assert_allclose(returns["imag"].T, d["inter/imag_ret"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns["replay"], d["inter/repl_ret"], rtol=1e-5, atol=1e-5)


def test_normaliser_slow_critic_and_step_count_match(replayed):
    new, expected = replayed["new"], replayed["expected"]
    np.testing.assert_allclose(new.retnorm.lo, expected.retnorm.lo, rtol=1e-5)
    np.testing.assert_allclose(new.retnorm.hi, expected.retnorm.hi, rtol=1e-5)
    assert int(new.updates) == int(expected.updates) == int(replayed["before"].updates) + 1
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 new.slow_val, expected.slow_val)  # fmt: skip


def _assert_step(name, new, expected, atol, rtol=3e-7):
    """Each updated tensor against the official one: ``atol`` bounds the step's error (one step
    moves a parameter by about lr), ``rtol`` the float32 rounding of p + step (2.5 ulp)."""
    paths = jax.tree_util.tree_flatten_with_path(new)[0]
    for (path, a), b in zip(paths, jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol,
                                   err_msg=f"{name}{jax.tree_util.keystr(path)}")  # fmt: skip


def test_every_parameter_and_moment_after_the_step(replayed):
    new, before, expected = replayed["new"], replayed["before"], replayed["expected"]
    lr = replayed["cfg"].learning_rate * 3 / 8  # the recorded step is on the warm-up ramp
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), expected.params, before.params)
    assert max(jax.tree.leaves(moved)) > 0.5 * lr  # the step is far above the tolerance
    _assert_step("params", new.params, expected.params, atol=2e-4 * lr)
    _, rms, ema, sched = new.opt
    _, rms1, ema1, sched1 = expected.opt
    _assert_step("mu", ema.ema, ema1.ema, atol=1e-5, rtol=1e-5)
    _assert_step("nu", rms.nu, rms1.nu, atol=1e-10, rtol=1e-4)
    assert int(sched.count) == int(sched1.count) and int(rms.count) == int(rms1.count)


def test_replay_write_back_is_the_posterior(replayed):
    d, post = replayed["d"], replayed["post"]
    np.testing.assert_allclose(post.deter, d["replay/dyn/deter"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(post.stoch, d["replay/dyn/stoch"])


@pytest.mark.parametrize("case", CASES)
def test_acting_step_matches_the_official_policy(case):
    d, cfg, nets, template, discrete, image, mixed = _problem(case)
    params = _state(d, "updated/", cfg, mixed, template).params  # it acts after the step
    carry = ActCarry(
        latent=RSSMState(
            jnp.asarray(d["policy/carry_deter"]), jnp.asarray(d["policy/carry_stoch"])
        ),
        prev_action=jnp.asarray(d["policy/carry_action"]),
    )
    if mixed:
        flat = d["policy/obs/image"].reshape(3, -1).astype(np.float32) / 255.0
        obs = jnp.concatenate([flat, jnp.asarray(d["policy/obs/vector"])], axis=-1)
    elif image:
        obs = jnp.asarray(d["policy/obs/image"].reshape(3, -1).astype(np.float32) / 255.0)
    else:
        obs = jnp.asarray(d["policy/obs/vector"])
    draws = (jnp.asarray(d["policy/draw_post_gumbel"]), jnp.asarray(d["policy/draw_action_noise"]))
    step = jit_once(lambda p, c, o, f: act(nets, p, c, o, f, draws, deterministic=False))
    action, new = step(params, carry, obs, jnp.asarray(d["policy/obs/is_first"]))
    if discrete:
        np.testing.assert_array_equal(action, d["policy/action"])
    else:
        np.testing.assert_allclose(action, d["policy/action"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new.latent.deter, d["policy/new_deter"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(new.latent.stoch, d["policy/new_stoch"])


@pytest.mark.parametrize("kind", ["vector", "image"])
@pytest.mark.parametrize("size", list(MODEL_SIZES))
def test_parameter_counts_match_the_official_build(size, kind):
    """Every module of every size preset, for 5 vector features with 1 continuous action and for
    64 x 64 x 3 images with 6 discrete actions, against the official build's counts
    (``fixtures/d3_param_counts.json``, from shapes alone: PROVENANCE.md)."""
    table = json.loads((FIXTURES / "d3_param_counts.json").read_text())
    cfg = DreamerV3Config.preset(size)
    image = (64, 64, 3) if kind == "image" else None
    obs_dim = int(np.prod(image)) if image else 5
    nets = Nets.create(cfg, obs_dim, 6 if image else 1, image is not None, image)
    shapes = jax.eval_shape(lambda k: nets.init(k, obs_dim), jax.random.key(0))
    assert {m: param_count(shapes[m]) for m in MODULES} == table[size][kind]
