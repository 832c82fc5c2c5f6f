"""The shared replay loop on host simulators (TD-MPC2, DreamerV3): the same ticks as the JAX
loop, so on a deterministic simulator the host run and the JAX run learn the same thing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ajax.training.host_loop as host_loop
from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config
from ajax.environments.core import SimEnv, SimStep
from ajax.environments.host import HostExplicitReset, HostStep, HostVecEnv
from ajax.environments.types import Box, Discrete, EnvSpec
from ajax.environments.wrappers import ExplicitReset
from ajax.training.loop import Tick


class ChainSim:
    """Obs = (step, last action); reward = action == (step odd) (or -|a - 0.5| for a box);
    episodes end (terminated) after 3 transitions. Deterministic, so host and JAX agree."""

    def __init__(self, continuous: bool = False):
        self.continuous = continuous

    def init(self, key):
        del key
        return SimStep(
            jnp.zeros((), jnp.int32), jnp.zeros((2,)), jnp.zeros(()), jnp.zeros((), bool)
        )

    def transition(self, key, state, action):
        del key
        a = jnp.reshape(action, (-1,))[0].astype(jnp.float32)
        target = (state % 2).astype(jnp.float32)
        reward = -jnp.abs(a - 0.5) if self.continuous else (a == target).astype(jnp.float32)
        t = state + 1
        return SimStep(t, jnp.stack([t.astype(jnp.float32), a]), reward, t >= 3)


class HostChainSim:
    """:class:`ChainSim` stepped eagerly on the host, behind the host simulator protocol."""

    def __init__(self, continuous: bool = False):
        self.sim, self.state = ChainSim(continuous), None

    def reset(self, seed):
        first = self.sim.init(None)
        self.state = first.state
        return np.asarray(first.obs, np.float32)

    def step(self, action):
        nxt = self.sim.transition(None, self.state, jnp.asarray(action))
        self.state = nxt.state
        return HostStep(
            np.asarray(nxt.obs, np.float32), float(nxt.reward), bool(nxt.terminated), False
        )

    def close(self):
        pass


def _spec(continuous: bool) -> EnvSpec:
    space = Box((-1.0,), (1.0,)) if continuous else Discrete(2)
    return EnvSpec("chain", "probe", (2,), space, 10)


def _host_env(continuous: bool, n: int) -> HostVecEnv:
    return HostVecEnv([HostChainSim(continuous) for _ in range(n)], _spec(continuous))


def test_host_explicit_reset_emits_the_jax_wrappers_ticks():
    """Hold ticks on the host equal ExplicitReset's: obs, reward and the three flags, tick by
    tick, with episodes of 3 transitions in 4 ticks and the simulator idle on hold ticks."""
    jax_env = ExplicitReset(SimEnv(ChainSim(), _spec(False).replace(n_envs=2)))
    host_env = HostExplicitReset(_host_env(False, 2))
    ts_j, ts_h = jax_env.reset(jax.random.PRNGKey(0)), host_env.reset(0)
    for t in range(9):
        tick_j, tick_h = Tick.of(ts_j), Tick.of(ts_h)
        for field in ("obs", "reward", "is_first", "is_last", "is_terminal"):
            np.testing.assert_array_equal(getattr(tick_h, field), getattr(tick_j, field), field)
        action = np.asarray([t % 2, 1])
        ts_j = jax_env.step(jax.random.PRNGKey(t), ts_j.state, jnp.asarray(action))
        ts_h = host_env.step(action)
    assert [bool(f) for f in Tick.of(ts_h).is_first] == [False, False]  # tick 9: mid-episode
    # the host counts only the 6 transitions of the two finished episodes per env, not holds
    np.testing.assert_array_equal(ts_h.info["episode_length"], [3, 3])


def _host_run(monkeypatch, algo_cls, config, continuous, steps, n_seeds):
    """A run of ``algo_cls`` on host ChainSims (make_env of the host loop patched to build
    them), next to the same run on the JAX ChainSim."""
    jax_algo = algo_cls(SimEnv(ChainSim(continuous), _spec(continuous)), config)
    jax_result = jax_algo.train(seed=0, total_steps=steps, n_seeds=n_seeds)
    monkeypatch.setattr(
        host_loop, "make_env", lambda _id, n_envs, **kw: _host_env(continuous, n_envs)
    )
    host_algo = algo_cls(SimEnv(ChainSim(continuous), _spec(continuous)), config)
    host_algo.is_jax = False  # the same agent, driven by the host loop
    host_result = host_algo.train(seed=0, total_steps=steps, n_seeds=n_seeds)
    return jax_result, host_result


def _assert_same_learning(jax_state, host_state):
    np.testing.assert_array_equal(host_state.step, jax_state.step)
    np.testing.assert_array_equal(host_state.key, jax_state.key)
    leaves_j = jax.tree.leaves(jax_state.agent)
    leaves_h = jax.tree.leaves(host_state.agent)
    assert len(leaves_j) == len(leaves_h)
    for a, b in zip(leaves_j, leaves_h, strict=True):
        if jnp.issubdtype(a.dtype, jnp.integer) or a.dtype == bool:
            np.testing.assert_array_equal(b, a)
        else:
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # ~80 s under the default run's load; kept out to stay under 15 minutes
def test_dreamerv3_host_run_learns_what_the_jax_run_learns(monkeypatch):
    """DreamerV3 on host simulators (hold ticks by HostExplicitReset, jitted act and absorb per
    tick) ends with the JAX run's step count, keys, update count and parameters, for 2 seeds."""
    cfg = DreamerV3Config.preset(
        "1m", batch_size=2, batch_length=4, train_ratio=16.0, eval_freq=20, eval_episodes=1
    )
    jax_result, host_result = _host_run(monkeypatch, DreamerV3, cfg, False, 40, 2)
    assert int(host_result.state.agent.updates[0]) > 2
    _assert_same_learning(jax_result.state, host_result.state)
    np.testing.assert_array_equal(host_result.state.replay.count, jax_result.state.replay.count)


@pytest.mark.slow  # ~50 CPU s (planner compiles three times); the loop is DreamerV3's above
def test_tdmpc2_host_run_learns_what_the_jax_run_learns(monkeypatch):
    """TD-MPC2 on host simulators: planning, rows and updates per tick as in the JAX loop."""
    cfg = TDMPC2Config.preset(
        1, enc_dim=16, mlp_dim=16, latent_dim=16, seed_steps=8, batch_size=4, eval_freq=12,
        eval_episodes=1,
        planner=PlannerConfig(horizon=2, iterations=2, num_samples=16, num_elites=4, num_pi_trajs=2),
    )  # fmt: skip
    jax_result, host_result = _host_run(monkeypatch, TDMPC2, cfg, True, 24, 1)
    _assert_same_learning(jax_result.state, host_result.state)


class Stop(Exception):
    """The simulated interruption."""


@pytest.mark.parametrize("agent", ["dreamerv3", "tdmpc2", "dreamerv3-host"])
@pytest.mark.slow  # 40-60 CPU s each; the default run checks the host ticks against the JAX loop
def test_host_replay_agents_train_resume_and_eval_through_the_cli(tmp_path, monkeypatch, agent):
    """`ajax train` on a gymnasium env stopped after its first checkpoint, `ajax resume` to the
    end (the simulators restart their episodes) and `ajax eval`; "-host" keeps the replay rows
    in host memory (--replay-on host), which the checkpoint carries."""
    import ajax.training.run as run_module
    from ajax.cli import main
    from ajax.training.io import read_jsonl

    agent, _, host = agent.partition("-")
    env = "gymnasium:CartPole-v1" if agent == "dreamerv3" else "gymnasium:Pendulum-v1"
    size = (["--model-size", "1m", "--batch-size", "2", "--batch-length", "4"]
            + (["--replay-on", "host"] if host else [])
            if agent == "dreamerv3"
            else ["--model-size", "1", "--seed-steps", "8", "--batch-size", "4",
                  "--planner.horizon", "2", "--planner.iterations", "1", "--planner.num-samples", "8",
                  "--planner.num-elites", "2", "--planner.num-pi-trajs", "2"])  # fmt: skip
    out = tmp_path / agent
    argv = ["train", agent, "--env", env, "--steps", "20", "--eval-freq", "10",
            "--eval-episodes", "1", "--checkpoint-every", "1", "--out", str(out), *size]  # fmt: skip
    save = run_module.save_checkpoint

    def save_then_stop(directory, step, state, **kw):
        save(directory, step, state, **kw)
        raise Stop

    monkeypatch.setattr(run_module, "save_checkpoint", save_then_stop)
    with pytest.raises(Stop):
        main(argv)
    monkeypatch.setattr(run_module, "save_checkpoint", save)
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [10]
    assert main(["resume", str(out)]) == 0
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [10, 20]
    assert main(["eval", str(out), "--episodes", "1"]) == 0


@pytest.mark.parametrize("replay_on", ["device", "host"])
@pytest.mark.slow  # ~2-4 CPU min: the 64 x 64 CNN compiles, every tick renders
def test_dreamerv3_trains_from_rendered_dm_control_pixels(replay_on):
    """DreamerV3 on dmc:cartpole-swingup with pixels=True (the reference's four CNN stages on
    64 x 64 x 3): the host loop stores uint8 frames and the losses stay finite; with
    ``replay_on="host"`` the frames are stored in host memory."""
    cfg = DreamerV3Config.preset("1m", batch_size=2, batch_length=4, train_ratio=16.0,
                                 eval_freq=30, eval_episodes=1, replay_on=replay_on)  # fmt: skip
    algo = DreamerV3("dmc:cartpole-swingup", cfg, pixels=True, max_episode_steps=10)
    result = algo.train(seed=0, total_steps=30, n_seeds=1)
    replay = result.state.replay
    obs = replay.rows["obs"] if replay.host is None else replay.host.slots[0]["obs"]
    assert "obs" not in replay.rows if replay_on == "host" else "obs" in replay.rows
    assert obs.dtype == jnp.uint8 and obs.shape[-1] == 12288
    assert 0 < obs.max()  # frames were written
    assert int(result.state.agent.updates) >= 2
    assert np.all(np.isfinite(result.metrics["loss/rec"]))


@pytest.mark.slow  # ~2-4 CPU min, as above
def test_dreamerv3_trains_from_dm_control_pixels_with_proprio():
    """``proprio=True``: the host replay keeps the frames as bytes beside the float state, and
    the world model reads and reconstructs both."""
    cfg = DreamerV3Config.preset(
        "1m", batch_size=2, batch_length=4, train_ratio=16.0, eval_freq=30, eval_episodes=1
    )
    algo = DreamerV3("dmc:cartpole-swingup", cfg, pixels=True, proprio=True,
                     max_episode_steps=10)  # fmt: skip
    result = algo.train(seed=0, total_steps=30, n_seeds=1)
    obs = result.state.replay.rows["obs"]
    assert obs["image"].dtype == jnp.uint8 and obs["image"].shape[-1] == 12288
    assert obs["vector"].shape[-1] == 5 and int(result.state.agent.updates) >= 2
    assert np.all(np.isfinite(result.metrics["loss/rec"]))
    from ajax.training.video import record_episode

    frames = record_episode(algo, result.state.agent, jax.random.PRNGKey(0), max_frames=3)
    assert frames.shape == (3, 64, 64, 3)  # the image part of each observation
