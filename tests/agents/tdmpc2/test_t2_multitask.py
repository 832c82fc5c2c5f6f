"""Multi-task TD-MPC2 (issue 13 item 5): task embedding, action masks, per-task discounts,
the dataset formats, window sampling and the offline run."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2.config import PlannerConfig, TDMPC2Config
from ajax.agents.tdmpc2.ensemble import reduce_pair
from ajax.agents.tdmpc2.multitask import (
    MultitaskTDMPC2,
    TaskData,
    episode_weights,
    sample_windows,
    stack_tasks,
)
from ajax.agents.tdmpc2.networks import Q_members, WorldModel
from ajax.agents.tdmpc2.planner import draw_plan_noise, plan
from ajax.agents.tdmpc2.policy import gaussian_logprob, head_scaled_entropy, sample_squashed
from ajax.agents.tdmpc2.tasks import TASK_SETS, TaskSet, check_task_set
from ajax.buffers.dataset import (
    DatasetError,
    Episodes,
    TaskMeta,
    load_dataset,
    official_to_episodes,
    write_task,
)
from ajax.environments import make_env
from ajax.environments.wrappers import PadSpaces
from ajax.validation import ConfigError

SMALL = TDMPC2Config(enc_dim=16, mlp_dim=16, latent_dim=16, num_q=3, task_dim=8)
TASKS = TaskSet(names=("a", "b"), obs_dims=(3, 5), action_dims=(1, 3), episode_lengths=(50, 200))


@pytest.fixture(scope="module")
def mt_model():
    model = WorldModel(SMALL, 3, tasks=TASKS)
    params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((2, 5)), jnp.zeros((2, 3)))
    return model, params["params"]


def test_task_set_masks_discounts_and_its_rules():
    np.testing.assert_array_equal(TASKS.action_masks(), [[1, 0, 0], [1, 1, 1]])
    assert (TASKS.obs_dim, TASKS.action_dim) == (5, 3)
    # clip(1 - 5 / T, 0.95, 0.995): T = 50 -> 0.95 (the floor), T = 200 -> 0.975
    np.testing.assert_allclose(TASKS.discounts(SMALL), [0.95, 0.975], rtol=1e-6)
    with pytest.raises(ConfigError, match=">= 2 tasks"):
        TaskSet(("a",), (3,), (1,), (50,))
    with pytest.raises(ConfigError, match="one positive value per task"):
        TaskSet(("a", "b"), (3, 4), (1,), (50, 50))
    assert len(TASK_SETS["mt30"]) == 30 and len(TASK_SETS["mt80"]) == 80
    assert len(set(TASK_SETS["mt80"])) == 80 and TASK_SETS["mt80"][:30] == TASK_SETS["mt30"]
    with pytest.raises(ValueError, match=r"missing \['walker-stand'"):
        check_task_set("mt30", TASK_SETS["mt30"][1:])


def test_every_input_gains_the_task_embedding(mt_model):
    _, params = mt_model
    assert params["task_emb"]["embedding"].shape == (2, 8)
    assert np.abs(params["task_emb"]["embedding"]).max() <= 0.02  # U(-0.02, 0.02)
    first = lambda tree: tree["trunk"]["dense_0"]["kernel"]
    assert first(params["encoder"]).shape[0] == 5 + 8  # [obs, e]
    assert first(params["dynamics"]).shape[0] == 16 + 8 + 3  # [z, e, a]
    assert first(params["reward"]).shape[0] == 16 + 8 + 3
    assert first(params["pi"]).shape[0] == 16 + 8
    assert first(params["Qs"]["member"]).shape == (3, 16 + 8 + 3, 16)


def test_task_embedding_rows_are_capped_at_norm_one(mt_model):
    model, params = mt_model
    table = jnp.array([[3.0, 4.0] + [0.0] * 6, [0.3, 0.4] + [0.0] * 6])
    params = {**params, "task_emb": {"embedding": table}}
    e = model.apply({"params": params}, jnp.array([0, 1]), method="task_emb")
    np.testing.assert_allclose(e[0, :2], [0.6, 0.8], rtol=1e-6)  # norm 5 -> 1
    np.testing.assert_allclose(e[1, :2], [0.3, 0.4], rtol=1e-6)  # norm 0.5 unchanged
    # the cap is applied without a gradient, as torch's in-place renorm
    grad = jax.grad(
        lambda t: model.apply({"params": {**params, "task_emb": {"embedding": t}}},
                              jnp.array([0]), method="task_emb")[0, 0]
    )(table)  # fmt: skip
    np.testing.assert_allclose(grad[0, 0], 0.2, rtol=1e-6)


def test_policy_masks_unused_dims_and_scales_entropy_by_the_tasks_own(mt_model):
    model, params = mt_model
    z = jax.nn.softmax(jnp.asarray(np.random.default_rng(0).normal(size=(4, 16)), jnp.float32))
    dist = model.apply({"params": params}, z, jnp.array([0, 0, 1, 1]), method="pi")
    np.testing.assert_array_equal(dist.mean[:2, 1:], 0.0)
    np.testing.assert_array_equal(dist.log_std[:2, 1:], 0.0)
    eps = jnp.asarray(np.random.default_rng(1).normal(size=(4, 3)), jnp.float32)
    sample = sample_squashed(dist, eps)
    np.testing.assert_array_equal(sample.action[:2, 1:], 0.0)  # task 0 acts 0 on dims 1, 2
    assert np.all(sample.action[2:] != 0.0)
    np.testing.assert_array_equal(dist.num_dims(), [1, 1, 3, 3])
    # HEAD: lp_g sums every dim (a masked one adds -ln(2 pi) / 2), then is scaled by n
    e0, ls0 = np.asarray(sample.eps[0]), np.asarray(dist.log_std[0])
    lp_g = np.sum(-0.5 * e0**2 - ls0 - 0.5 * math.log(2 * math.pi))
    np.testing.assert_allclose(gaussian_logprob(sample.eps, dist.log_std)[0], lp_g, rtol=1e-6)
    u = np.asarray(sample.u[0])
    log_prob = lp_g - np.sum(np.log(np.maximum(1 - np.tanh(u) ** 2, 0) + 1e-6))
    want = -log_prob * (lp_g * 1) / (log_prob + 1e-8)
    got = head_scaled_entropy(sample, dist.log_std, dist.num_dims())[0]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_q_pair_with_embedding_is_the_whole_ensembles_rows(mt_model):
    model, params = mt_model
    rng = np.random.default_rng(2)
    z = jnp.asarray(rng.normal(size=(4, 16)), jnp.float32)
    a = jnp.asarray(rng.uniform(-1, 1, size=(4, 3)), jnp.float32)
    task = jnp.array([0, 1, 1, 0])
    whole = model.apply({"params": params}, z, a, task, deterministic=True, method="Q")
    emb = model.apply({"params": params}, task, method="task_emb")
    pair = jnp.array([2, 0])
    np.testing.assert_allclose(
        Q_members(SMALL, params["Qs"], z, a, pair, emb=emb), whole[pair], rtol=1e-6, atol=1e-7
    )
    assert reduce_pair(whole[pair][..., 0], "min").shape == (4,)


def test_plan_with_an_action_mask_plans_and_acts_zero_on_masked_dims():
    cfg = PlannerConfig(horizon=3, iterations=3, num_samples=32, num_pi_trajs=4, num_elites=8)
    noise = draw_plan_noise(jax.random.key(3), cfg, 3)
    pi_actions = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, (3, 4, 3)), jnp.float32)
    target = jnp.array([0.5, -0.3, 0.7])
    value_fn = lambda actions, key: -jnp.sum(jnp.square(actions[0] - target), axis=-1)
    mask = jnp.array([1.0, 0.0, 1.0])
    out = plan(value_fn, pi_actions * mask, jnp.zeros((3, 3)), True, noise, cfg, False, mask)
    assert out.action[1] == 0.0 and np.all(out.mean[:, 1] == 0) and np.all(out.std[:, 1] == 0)
    assert np.all(out.elite_actions[..., 1] == 0.0)
    free = plan(value_fn, pi_actions, jnp.zeros((3, 3)), True, noise, cfg, False)
    assert free.action[1] != 0.0


def test_pad_spaces_widens_observations_and_reads_the_envs_own_actions():
    env = PadSpaces(make_env("Pendulum-v1"), obs_dim=8, action_dim=2)
    assert env.spec.obs_dim == 8 and env.spec.action_dim == 2
    ts = env.reset(jax.random.key(0))
    assert ts.obs.shape == (8,) and np.all(ts.obs[3:] == 0)
    a = env.step(jax.random.key(1), ts.state, jnp.array([0.5, 0.9]))
    # agent units: 0.5 of Pendulum's [-2, 2] torque box is 1.0
    b = make_env("Pendulum-v1").step(jax.random.key(1), ts.state, jnp.array([1.0]))
    np.testing.assert_array_equal(a.obs[:3], b.obs)
    with pytest.raises(ValueError, match="widens"):
        PadSpaces(make_env("Pendulum-v1"), obs_dim=2, action_dim=1)


def _episodes(e, length, obs_dim, action_dim, seed=0, lengths=None):
    rng = np.random.default_rng(seed)
    return Episodes(
        obs=rng.normal(size=(e, length + 1, obs_dim)).astype(np.float32),
        action=rng.uniform(-1, 1, size=(e, length, action_dim)).astype(np.float32),
        reward=rng.normal(size=(e, length)).astype(np.float32),
        terminated=np.zeros((e, length), bool),
        length=np.full((e,), length, np.int32)
        if lengths is None
        else np.asarray(lengths, np.int32),
    )


def test_dataset_round_trip_and_errors(tmp_path):
    eps = _episodes(3, 20, 3, 1)
    meta = TaskMeta("pend", "Pendulum-v1", 3, 1, 20, 3)
    write_task(tmp_path / "ds", meta, eps)
    write_task(
        tmp_path / "ds", TaskMeta("reach", "Reacher-misc", 8, 2, 10, 2), _episodes(2, 10, 8, 2)
    )
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == [
        "dataset.json",
        "pend.npz",
        "reach.npz",
    ]
    data = load_dataset(tmp_path / "ds")
    assert data.names == ("pend", "reach")
    np.testing.assert_array_equal(data.episodes["pend"].obs, eps.obs)
    with pytest.raises(DatasetError, match="shape"):
        write_task(tmp_path / "ds", meta, eps._replace(reward=eps.reward[:, :5]))
    (tmp_path / "ds" / "reach.npz").unlink()
    with pytest.raises(DatasetError, match="reach.npz is missing"):
        load_dataset(tmp_path / "ds")
    (tmp_path / "ds" / "dataset.json").write_text('{"format": "other"}')
    with pytest.raises(DatasetError, match="not an Ajax episode dataset"):
        load_dataset(tmp_path / "ds")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="neither dataset.json"):
        load_dataset(tmp_path / "empty")
    (tmp_path / "empty" / "chunk_0.pt").write_bytes(b"")
    with pytest.raises(DatasetError, match="pass --task-set"):
        load_dataset(tmp_path / "empty")


def test_official_rows_become_episodes_with_each_tasks_own_widths():
    # two tasks padded to obs 4 / action 2, [E, L + 1] rows, row 0's action a NaN placeholder
    e, length = 4, 6
    rng = np.random.default_rng(5)
    obs = rng.normal(size=(e, length + 1, 4)).astype(np.float32)
    action = rng.uniform(-1, 1, size=(e, length + 1, 2)).astype(np.float32)
    task = np.repeat(np.array([1, 0, 1, 0])[:, None], length + 1, axis=1)
    obs[task[:, 0] == 1, :, 3:] = 0.0  # task 1 has 3 obs and 1 action dim
    action[task[:, 0] == 1, :, 1:] = 0.0
    action[:, 0] = np.nan
    reward = rng.normal(size=(e, length + 1, 1)).astype(np.float32)
    data = official_to_episodes(obs, action, reward, task, ("x", "y"))
    assert data.names == ("x", "y")
    x, y = data.episodes["x"], data.episodes["y"]
    assert (x.obs.shape, x.action.shape, y.obs.shape, y.action.shape) == (
        (2, 7, 4), (2, 6, 2), (2, 7, 3), (2, 6, 1))  # fmt: skip
    np.testing.assert_array_equal(x.action, action[[1, 3], 1:])
    np.testing.assert_array_equal(y.reward, reward[[0, 2], 1:, 0])
    with pytest.raises(DatasetError, match="task id 1 is not in the task set"):
        official_to_episodes(obs, action, reward, task, ("x",))


LENGTHS = [12, 5, 12, 3, 8, 12]


def _episode_data() -> TaskData:
    """Six episodes (tasks 0, 0, 0, 1, 1, 1) whose obs encode (episode, step)."""
    e, length = len(LENGTHS), 12
    obs = np.zeros((e, length + 1, 2), np.float32)
    obs[..., 0] = np.arange(e)[:, None]
    obs[..., 1] = np.arange(length + 1)[None, :]
    data = TaskData(obs=obs, action=np.zeros((e, length, 1), np.float32),
                    reward=np.zeros((e, length), np.float32),
                    terminated=np.zeros((e, length), bool),
                    length=np.asarray(LENGTHS, np.int32), task=np.array([0, 0, 0, 1, 1, 1]))  # fmt: skip
    return TaskData(*map(jnp.asarray, data))


def test_windows_stay_inside_one_episode_of_one_task():
    # a window must read consecutive steps of one episode
    lengths, data = LENGTHS, _episode_data()
    horizon = 4
    valid = jnp.asarray(np.nonzero(np.asarray(lengths) >= horizon)[0])
    batch, task = jax.jit(sample_windows, static_argnums=(3, 4))(
        data, valid, jax.random.key(0), 512, horizon
    )
    ep, t = np.asarray(batch.obs[..., 0]), np.asarray(batch.obs[..., 1])
    assert np.all(ep == ep[:, :1]) and np.all(np.diff(t, axis=1) == 1)
    assert np.all(t[:, -1] <= np.asarray(lengths)[ep[:, 0].astype(int)])
    assert 3 not in ep  # 3 steps < horizon
    np.testing.assert_array_equal(task, np.asarray(data.task)[ep[:, 0].astype(int)])
    assert set(np.unique(t[:, 0])) == set(range(9))  # every start of the 12-step episodes


def test_task_sampling_gives_every_task_an_equal_share():
    # valid episodes 0, 1, 2 (task 0) and 4, 5 (task 1; 3 is shorter than the horizon):
    # "episode" draws task 1 for 2/5 of the windows, "task" for 1/2 (1/6 per task-0 episode)
    horizon, data = 4, _episode_data()
    valid = np.nonzero(np.asarray(LENGTHS) >= horizon)[0]
    p = episode_weights(np.asarray(data.task)[valid], "task")
    np.testing.assert_allclose(p, [1 / 6, 1 / 6, 1 / 6, 1 / 4, 1 / 4], rtol=1e-6)
    assert episode_weights(np.asarray(data.task)[valid], "episode") is None
    sample = jax.jit(sample_windows, static_argnums=(3, 4))
    shares = {}
    for rule, weights in (("task", jnp.asarray(p)), ("episode", None)):
        _, task = sample(data, jnp.asarray(valid), jax.random.key(1), 8192, horizon, weights)
        shares[rule] = float(np.mean(np.asarray(task) == 1))
    # binomial std over 8192 draws is 0.0055: 0.02 is more than 3.5 std
    assert abs(shares["task"] - 0.5) < 0.02 and abs(shares["episode"] - 0.4) < 0.02, shares


TINY = TDMPC2Config(
    model_size=1, enc_dim=16, mlp_dim=16, latent_dim=16, task_dim=8, batch_size=16,
    eval_freq=20, eval_episodes=2,
    planner=PlannerConfig(iterations=1, num_samples=16, num_pi_trajs=2, num_elites=4),
)  # fmt: skip


@pytest.fixture(scope="module")
def two_task_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("mt") / "ds"
    write_task(root, TaskMeta("pend", "Pendulum-v1", 3, 1, 200, 3), _episodes(3, 200, 3, 1))
    write_task(root, TaskMeta("reach", "Reacher-misc", 8, 2, 100, 4), _episodes(4, 100, 8, 2, 1))
    return root


@pytest.mark.slow  # ~70 s under the default run's load; the CLI test trains one seed there
def test_offline_run_trains_both_tasks_and_evaluates_each(two_task_dataset):
    algo = MultitaskTDMPC2(two_task_dataset, TINY)
    assert algo.tasks.action_dims == (1, 2) and algo.tasks.obs_dim == 8
    data = stack_tasks(algo.dataset, algo.tasks)
    assert data.obs.shape == (7, 201, 8) and np.all(data.obs[3:, 101:] == 0)
    result = algo.train(seed=0, total_steps=40, n_seeds=2)
    m = result.metrics
    assert m["step"].shape == (2, 2) and np.all(m["step"][:, -1] == 40)
    for name in ("eval_return/pend", "eval_return/reach", "total_loss", "value_loss"):
        assert np.all(np.isfinite(m[name])), name
    # the task embedding learns (the world-model optimiser holds it)
    init = algo.make_chunks(40).init(jax.random.PRNGKey(0)).agent.params["task_emb"]["embedding"]
    moved = np.abs(result.state.agent.params["task_emb"]["embedding"][0] - init).max()
    assert 1e-5 < moved < 0.1
    np.testing.assert_allclose(m["eval_return"], (m["eval_return/pend"] + m["eval_return/reach"]) / 2,
                               rtol=1e-5)  # fmt: skip


def test_multitask_refuses_one_task_and_conflicting_options(two_task_dataset, tmp_path):
    root = tmp_path / "one"
    write_task(root, TaskMeta("pend", "Pendulum-v1", 3, 1, 200, 2), _episodes(2, 200, 3, 1))
    with pytest.raises(DatasetError, match=">= 2 tasks"):
        MultitaskTDMPC2(root, TINY)
    with pytest.raises(ValueError, match="drop --episodic and --action-repeat"):
        MultitaskTDMPC2(two_task_dataset, TDMPC2Config(action_repeat=2))
    write_task(root, TaskMeta("cart", "Pendulum-v1", 3, 1, 150, 2), _episodes(2, 150, 3, 1))
    with pytest.raises(DatasetError, match="episodes of 200 agent steps but its data 150"):
        MultitaskTDMPC2(root, TINY)
