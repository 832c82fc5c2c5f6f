"""Adding an agent is its own code plus one registry line (issue 38): a toy agent defined in
this test module, registered with :func:`ajax.agents.register`, trains, lists, evaluates and
resumes through the command line with no change to the CLI or the training layer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ajax
from ajax import agents
from ajax.cli import main
from ajax.training.api import OnPolicyAgent, OnPolicyAlgorithm, feedforward
from ajax.training.config import LoopConfig
from ajax.validation import positive


@dataclass(frozen=True)
class ToyConfig(LoopConfig):
    """A constant-mean Gaussian policy moved by a one-line evolution-strategy step.

    Attributes:
        n_steps: env steps per env in one rollout.
        step_size: how far one update moves the mean.
    """

    n_steps: int = 16
    step_size: float = 0.1

    RULES = {**LoopConfig.RULES, "n_steps": positive(), "step_size": positive()}


class ToyState(flax.struct.PyTreeNode):
    mean: jax.Array


def _init(key, env) -> ToyState:
    del key
    return ToyState(jnp.zeros((env.spec.action_dim,), jnp.float32))


def _act(state, obs, key, deterministic):
    del key, deterministic
    return jnp.broadcast_to(jnp.tanh(state.mean), (obs.shape[0], state.mean.shape[0]))


def _sample(state, obs, key):
    noise = 0.3 * jax.random.normal(key, (obs.shape[0], state.mean.shape[0]))
    action = jnp.clip(jnp.tanh(state.mean) + noise, -1.0, 1.0)
    zeros = jnp.zeros((obs.shape[0],))
    return action, zeros, zeros


def _update(config: ToyConfig, state, rollout, last_obs, key):
    del last_obs, key
    advantage = rollout.reward - rollout.reward.mean()
    direction = (advantage[..., None] * (rollout.action - jnp.tanh(state.mean))).mean((0, 1))
    return ToyState(state.mean + config.step_size * direction), {"toy_loss": -advantage.std()}


class Toy(OnPolicyAlgorithm):
    """A toy agent that lives in a test module."""

    name = "toy"
    config_cls = ToyConfig

    def agent(self, total_steps: int) -> OnPolicyAgent:
        del total_steps
        return feedforward(_init, _act, _sample, partial(_update, self.config))


@pytest.fixture
def toy():
    agents.register("toy", Toy)
    yield
    agents.unregister("toy")


def test_a_toy_agent_trains_through_ajax_train_by_one_registry_line(toy, tmp_path, capsys):
    out = tmp_path / "toy"
    argv = ["train", "toy", "--env", "Pendulum-v1", "--steps", "256", "--eval-freq", "128",
            "--eval-episodes", "1", "--n-steps", "8", "--step-size", "0.2",
            "--checkpoint-every", "1", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [128, 256]
    assert all(np.isfinite(r["eval_return"]) and "toy_loss" in r for r in records)
    assert json.loads((out / "run.json").read_text())["agent"] == "toy"
    assert json.loads((out / "run.json").read_text())["config"]["step_size"] == 0.2

    capsys.readouterr()
    assert main(["agents"]) == 0
    assert "toy" in capsys.readouterr().out
    assert main(["eval", str(out), "--episodes", "1"]) == 0
    assert "eval return over 1 episodes" in capsys.readouterr().out
    assert ajax.Toy is Toy and ajax.ToyConfig is ToyConfig  # `import ajax` reads it too


def test_the_registry_refuses_bad_names_and_a_second_owner(toy):
    with pytest.raises(ValueError, match="already registered"):
        agents.register("toy", "elsewhere:Toy")
    with pytest.raises(ValueError, match="lowercase letters"):
        agents.register("Toy Agent", Toy)
    with pytest.raises(ValueError, match="'module:Class'"):
        agents.register("toy2", "no_colon")
    with pytest.raises(ValueError, match="unknown agent 'nope'; known agents: .*toy"):
        agents.get("nope")
