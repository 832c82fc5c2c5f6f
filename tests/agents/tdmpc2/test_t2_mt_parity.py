"""Multi-task parity with the official PyTorch code (issue 37 item 4; deviations.md T56).

``fixtures/tdmpc2_mt_update_parity.npz`` and ``tdmpc2_mt_plan_parity.npz`` (PROVENANCE.md,
"Multi-task fixtures") hold one official ``_update`` and one ``_plan`` of a three-task model
(obs dims 3/5/4 padded to 5, action dims 1/3/2 padded to 3, episode lengths 500/50/2000, so
discounts 0.99/0.95/0.995) with every random draw. The update's state includes the task
embedding with rows above max_norm, both Adams at step 3, and the policy loss's gradient of the
embedding left over from the last warm-up update. This test replays both in Ajax and compares
losses, updated parameters, Adam moments and the carried gradient; then the planned action.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tests.agents.tdmpc2.test_t2_parity import _PREFIX, _component, _sub, _targets, _with_adam
from tests.one_shot import jit_once

from ajax.agents.tdmpc2 import TDMPC2Config, UpdateNoise, WorldModel, update_with_noise
from ajax.agents.tdmpc2.tasks import TaskSet
from ajax.agents.tdmpc2.update import init_state
from ajax.buffers.windows import TDMPC2Slice
from ajax.normalizers import RunningScale

FIXTURES = Path(__file__).parent / "fixtures"
_LOSSES = ("consistency_loss", "reward_loss", "value_loss", "total_loss", "grad_norm",
           "pi_loss", "pi_grad_norm", "pi_scaled_entropy", "pi_scale")  # fmt: skip
_EMB = "_task_emb.weight"


def _config(hp, **extra):
    return TDMPC2Config.preset(
        1, enc_dim=int(hp["enc_dim"]), mlp_dim=int(hp["mlp_dim"]),
        latent_dim=int(hp["latent_dim"]), num_q=int(hp["num_q"]), task_dim=int(hp["task_dim"]),
        **extra,
    )  # fmt: skip


def _tasks(hp):
    n = len(hp["obs_dims"])
    return TaskSet(
        names=tuple(f"task-{i}" for i in range(n)),
        obs_dims=tuple(int(x) for x in hp["obs_dims"]),
        action_dims=tuple(int(x) for x in hp["action_dims"]),
        episode_lengths=tuple(int(x) for x in hp["episode_lengths"]),
    )


def _to_flax(sd, template):
    """Ajax multi-task params from official names (the five components and the embedding)."""
    tree = {
        name: _component(sd, prefix, template[name], ensemble=name == "Qs")
        for name, prefix in _PREFIX.items()
    }
    tree["task_emb"] = {"embedding": sd[_EMB]}
    assert jax.tree.structure(tree) == jax.tree.structure(template)
    return jax.tree.map(jnp.asarray, tree)


def _moments(opt_state):
    """(mu, nu) of every parameter, merged over the Adam states inside ``opt_state``."""
    adams = [
        s for s in jax.tree.leaves(opt_state, is_leaf=lambda s: isinstance(s, optax.ScaleByAdamState))
        if isinstance(s, optax.ScaleByAdamState)
    ]  # fmt: skip
    masked = lambda x: isinstance(x, optax.MaskedNode)  # noqa: E731

    def merge(*xs):
        return next(x for x in xs if not masked(x))

    return tuple(
        jax.tree.map(merge, *(getattr(a, f) for a in adams), is_leaf=masked) for f in ("mu", "nu")
    )


def _setup(data):
    hp = _sub(data, "hp/")
    cfg = _config(hp, grad_clip_norm=float(hp["grad_clip_norm"]),
                  batch_size=int(hp["batch_size"]), dropout=float(hp["dropout"]))  # fmt: skip
    tasks = _tasks(hp)
    model = WorldModel(cfg, tasks.action_dim, tasks=tasks)
    # shapes only: every leaf is replaced below (op by op, a real init compiles every op)
    state = jax.eval_shape(
        lambda k: init_state(cfg, model, k, tasks.obs_dim), jax.random.PRNGKey(0)
    )
    params = _to_flax(_sub(data, "param/"), state.params)
    mu = _to_flax(_sub(data, "adam/exp_avg/"), state.params)
    nu = _to_flax(_sub(data, "adam/exp_avg_sq/"), state.params)
    assert set(np.unique(np.stack(list(_sub(data, "adam/step/").values())))) == {3.0}
    wm_mu, wm_nu = ({k: v for k, v in t.items() if k != "pi"} for t in (mu, nu))
    state = state.replace(
        params=params,
        target_Qs=jax.tree.map(jnp.asarray, _targets(data, "target_param/", state.params)),
        wm_opt=_with_adam(state.wm_opt, wm_mu, wm_nu, 3),
        pi_opt=_with_adam(state.pi_opt, mu["pi"], nu["pi"], 3),
        scale=RunningScale(value=jnp.asarray(data["scale/value_before"][0]), rate=cfg.tau),
        emb_grad=jnp.asarray(data["task_emb_grad_before"]),
    )
    batch = TDMPC2Slice(
        obs=jnp.asarray(data["batch/obs"]),
        action=jnp.asarray(data["batch/action"]),
        reward=jnp.asarray(data["batch/reward"][..., 0]),
        terminated=jnp.asarray(data["batch/terminated"][..., 0]),
    )
    task = jnp.asarray(data["batch/task"], jnp.int32)
    discounts = jnp.asarray(tasks.discounts(cfg))
    np.testing.assert_allclose(discounts, hp["discounts"], rtol=1e-7)
    return cfg, model, discounts[task], state, batch, task


@pytest.mark.slow  # 22-55 s on 2 cores; the single-task parity stays in the default run
def test_t2_multitask_update_parity_with_official():
    """One multi-task update (dropout 0.01, replayed masks) equals the official one."""
    data = dict(np.load(FIXTURES / "tdmpc2_mt_update_parity.npz"))
    cfg, model, discount, state, batch, task = _setup(data)
    key = jax.random.PRNGKey(0)
    noise = UpdateNoise(
        td_eps=jnp.asarray(data["draw/pi_eps_td_target"]),
        td_pair=jnp.asarray(data["draw/q_pair_td_target"], jnp.int32),
        pi_eps=jnp.asarray(data["draw/pi_eps_pi_loss"]),
        pi_pair=jnp.asarray(data["draw/q_pair_pi_loss"], jnp.int32),
        value_dropout=key,
        pi_dropout=key,
        value_mask=jnp.asarray(data["draw/dropout_mask_value"]),
        pi_mask=jnp.asarray(data["draw/dropout_mask_pi_loss"]),
    )

    @jit_once
    def run(state, batch, noise, discount, task):
        with jax.default_matmul_precision("highest"):
            return update_with_noise(cfg, model, discount, state, batch, noise, task)

    new, metrics = run(state, batch, noise, discount, task)
    for name in _LOSSES:
        np.testing.assert_allclose(metrics[name], data[f"out/{name}"], rtol=1e-5, atol=1e-6,
                                   err_msg=name)  # fmt: skip
    np.testing.assert_allclose(new.scale.value, data["scale/value_after"][0], rtol=1e-6)
    want = _to_flax(_sub(data, "updated_param/"), state.params)
    want_mu = _to_flax(_sub(data, "updated_adam/exp_avg/"), state.params)
    want_nu = _to_flax(_sub(data, "updated_adam/exp_avg_sq/"), state.params)
    mu, nu = _moments(new.wm_opt)
    pi_mu, pi_nu = _moments(new.pi_opt)
    mu, nu = {**mu, "pi": pi_mu}, {**nu, "pi": pi_nu}
    target = _targets(data, "updated_target_param/", state.params)
    pairs = (
        ("param", new.params, want, state.params, 1e-6),
        ("target_Qs", new.target_Qs, target, state.target_Qs, 1e-6),
        ("exp_avg", mu, want_mu, None, 1e-6),
        ("exp_avg_sq", nu, want_nu, None, 1e-9),
    )
    for group, got, expect, before, atol in pairs:
        flat = jax.tree.leaves_with_path(got)
        befores = jax.tree.leaves(before) if before is not None else [0.0] * len(flat)
        for (path, g), w, b in zip(flat, jax.tree.leaves(expect), befores, strict=True):
            label = f"{group}{jax.tree_util.keystr(path)}"
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=label)
            np.testing.assert_allclose(g - b, np.asarray(w) - b, rtol=1e-5, atol=atol,
                                       err_msg=label)  # fmt: skip
    np.testing.assert_allclose(new.emb_grad, data["task_emb_grad_after"], rtol=1e-5, atol=1e-6)


def test_t2_multitask_plan_parity_with_official():
    """One multi-task planning decision (the task's row above max_norm, its action mask and
    discount) equals the official; the elite is drawn by the recorded pick's uniform."""
    from ajax.agents.tdmpc2.act import ActNoise, ValueNoise, plan_one
    from ajax.agents.tdmpc2.planner import PlanNoise

    data = dict(np.load(FIXTURES / "tdmpc2_mt_plan_parity.npz"))
    hp = _sub(data, "hp/")
    cfg, tasks = _config(hp), _tasks(hp)
    model = WorldModel(cfg, tasks.action_dim, tasks=tasks)
    template = jax.eval_shape(
        lambda key: model.init(
            key, jnp.zeros((1, tasks.obs_dim)), jnp.zeros((1, tasks.action_dim))
        ),
        jax.random.PRNGKey(0),
    )["params"]
    params = _to_flax(_sub(data, "param/"), template)
    task = int(data["input/task"])
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
    discount = float(tasks.discounts(cfg)[task])

    @jit_once
    def run(params, obs, prev_mean, noise):
        with jax.default_matmul_precision("highest"):
            return plan_one(cfg, model, discount, params, obs, prev_mean,
                            bool(data["input/t0"]), noise, bool(data["input/eval_mode"]), task)  # fmt: skip

    out = run(params, jnp.asarray(data["input/obs"]), jnp.asarray(data["input/prev_mean"]), noise)
    assert int(out.elite_index) == int(data["out/elite_choice"])
    for name in ("action", "mean", "score"):
        got, want = np.asarray(getattr(out, name)), data[f"out/{name}"]
        print(name, float(np.max(np.abs(got - want))))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
    mask = tasks.action_masks()[task]
    assert np.all(np.asarray(out.action)[mask == 0] == 0)


def test_t2_official_pt_dataset_is_read_as_written(tmp_path):
    """``fixtures/tdmpc2_official_dataset.pt``, a TensorDict [5, 101] that the official code
    saved and its offline Buffer loaded and sampled (PROVENANCE.md), is read without torch:
    the raw arrays keep the official dtypes and placeholders, each task's episodes come out at
    its own widths, and every window the official Buffer sampled is one of Ajax's windows."""
    from ajax.agents.tdmpc2.tasks import TASK_SETS
    from ajax.buffers import torch_pickle
    from ajax.buffers.dataset import load_dataset

    pt = FIXTURES / "tdmpc2_official_dataset.pt"
    raw = torch_pickle.load(pt)
    assert {k: (v.shape, v.dtype.name) for k, v in raw.items()} == {
        "obs": ((5, 101, 39), "float32"), "action": ((5, 101, 6), "float32"),
        "reward": ((5, 101), "float32"), "task": ((5, 101), "int64"),
    }  # fmt: skip
    assert np.isnan(raw["action"][:, 0]).all() and np.isnan(raw["reward"][:, 0]).all()
    (tmp_path / pt.name).write_bytes(pt.read_bytes())
    data = load_dataset(tmp_path, TASK_SETS["mt80"])
    widths = [(m.name, m.obs_dim, m.action_dim, m.episode_length, m.episodes) for m in data.tasks]
    assert widths == [("reacher-easy", 6, 2, 100, 2), ("pendulum-swingup", 3, 1, 100, 2),
                      ("cartpole-balance", 5, 1, 100, 1)]  # fmt: skip
    for meta in data.tasks:
        eps = data.episodes[meta.name]
        rows = raw["task"][:, 0] == TASK_SETS["mt80"].index(meta.name)
        np.testing.assert_array_equal(eps.obs, raw["obs"][rows][..., : meta.obs_dim])
        np.testing.assert_array_equal(eps.action, raw["action"][rows][:, 1:, : meta.action_dim])
        np.testing.assert_array_equal(eps.reward, raw["reward"][rows][:, 1:])
        assert eps.obs.dtype == eps.action.dtype == eps.reward.dtype == np.float32
        assert not eps.terminated.any() and (eps.length == 100).all()
        assert eps.length.dtype == np.int32
    sample = np.load(FIXTURES / "tdmpc2_official_dataset_sample.npz")
    for name in ("mt30", "mt80"):  # the official TASK_SET, whose ids the task field holds
        assert tuple(sample[f"task_set_{name}"].tolist()) == TASK_SETS[name]
    horizon = sample["action"].shape[0]
    for b, task_id in enumerate(sample["task"]):
        eps = data.episodes[TASK_SETS["mt80"][task_id]]
        o, a = eps.obs.shape[-1], eps.action.shape[-1]
        found = [
            (e, s) for e in range(eps.obs.shape[0]) for s in range(100 - horizon + 1)
            if np.array_equal(eps.obs[e, s : s + horizon + 1], sample["obs"][:, b, :o])
        ]  # fmt: skip
        assert len(found) == 1, (b, found)
        e, s = found[0]
        assert not sample["obs"][:, b, o:].any() and not sample["action"][:, b, a:].any()
        np.testing.assert_array_equal(eps.action[e, s : s + horizon], sample["action"][:, b, :a])
        np.testing.assert_array_equal(eps.reward[e, s : s + horizon], sample["reward"][:, b, 0])


def test_t2_task_set_widths_follow_the_official_parser():
    """common/parser.py:49-62: task_dim 96 for mt80 or sizes 1/317, else 64; mt30 at size 19
    has latent_dim 512."""
    from ajax.agents.tdmpc2.tasks import task_set_widths

    assert task_set_widths("mt80", 5) == {"task_dim": 96}
    assert task_set_widths("mt30", 1) == {"task_dim": 96}
    assert task_set_widths("mt30", 5) == {"task_dim": 64}
    assert task_set_widths("mt30", 19) == {"task_dim": 64, "latent_dim": 512}


def test_a_task_set_gives_the_model_its_official_widths_and_refuses_other_chosen_ones():
    from ajax.agents.tdmpc2.tasks import with_task_set_widths
    from ajax.validation import ConfigError

    cfg = with_task_set_widths(TDMPC2Config.preset(19), "mt30")
    assert (cfg.task_dim, cfg.arch.latent_dim, cfg.arch.mlp_dim) == (64, 512, 1024)
    assert with_task_set_widths(TDMPC2Config.preset(5, task_dim=64), "mt30").task_dim == 64
    assert with_task_set_widths(TDMPC2Config.preset(5), "mt80").arch.latent_dim == 512
    with pytest.raises(ConfigError, match="--task-dim 32: task set mt30 at model size 5 has"):
        with_task_set_widths(TDMPC2Config.preset(5, task_dim=32), "mt30")
    with pytest.raises(ConfigError, match="--latent-dim 256: .* latent_dim 512"):
        with_task_set_widths(TDMPC2Config.preset(19, latent_dim=256), "mt30")
