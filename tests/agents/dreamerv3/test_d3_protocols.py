"""The official DreamerV3 protocols as presets (``--protocol``), ``--eval-policy``, and the bad
input around them: each refused with exit 2 and one line naming the fix, nothing written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ajax.agents.dreamerv3.update as update_lib
from ajax.agents.dreamerv3 import PROTOCOLS, DreamerV3, DreamerV3Config
from ajax.agents.dreamerv3.agent import policy as agent_policy
from ajax.agents.dreamerv3.model import Nets, feat
from ajax.cli import main
from ajax.environments import make_env
from ajax.training.loop import Tick

CONFIGS_YAML = Path(__file__).parents[3] / "../shared/reference/dreamerv3/dreamerv3/configs.yaml"
WIDTHS = {"1m": 512, "200m": 8192}  # deter of the size blocks the protocols use


def test_protocols_set_the_official_run_settings():
    """configs.yaml at e3f0224: the size, train ratio, envs and steps of each block; every
    protocol samples its evaluation (agent.py:126) and repeats each action once."""
    want = {  # name: (model_size, train_ratio, n_envs, steps)
        "dmc_proprio": ("1m", 1024.0, 16, 1_100_000),  # :178-182, run.envs :55
        "dmc_vision": ("200m", 256.0, 16, 1_100_000),  # :184-187 (no size: defaults)
        "atari100k": ("200m", 256.0, 1, 110_000),  # :170-172
        "crafter": ("200m", 512.0, 1, 1_100_000),  # :174-176
        "bsuite": ("200m", 1024.0, 1, None),  # :189-191
        "atari": ("200m", 32.0, 16, 51_000_000),  # :162-164
    }
    assert set(PROTOCOLS) == set(want)
    for name, (size, ratio, envs, steps) in want.items():
        cfg = DreamerV3Config.from_protocol(name)
        assert (cfg.model_size, cfg.train_ratio, cfg.n_envs) == (size, ratio, envs), name
        assert (cfg.eval_policy, cfg.action_repeat, cfg.protocol) == ("sample", 1, name)
        assert PROTOCOLS[name].steps == steps
    cfg = DreamerV3Config.from_protocol("dmc_proprio", train_ratio=32.0, eval_policy="mode")
    assert (cfg.model_size, cfg.train_ratio, cfg.eval_policy) == ("1m", 32.0, "mode")
    with pytest.raises(ValueError, match="unknown protocol 'nope'; the official protocols are"):
        DreamerV3Config.from_protocol("nope")


def test_protocols_match_configs_yaml_when_it_is_here():
    """Read the settings from the reference's configs.yaml itself (skipped where it is absent)."""
    yaml = pytest.importorskip("yaml")
    if not CONFIGS_YAML.exists():
        pytest.skip("the official checkout is not next to this repository")
    blocks = yaml.safe_load(CONFIGS_YAML.read_text())
    defaults = blocks["defaults"]
    assert defaults["env"]["dmc"]["repeat"] == 1 and defaults["run"]["envs"] == 16
    for name, protocol in PROTOCOLS.items():
        run = {**defaults["run"], **blocks[name]["run"]}
        cfg = DreamerV3Config.from_protocol(name)
        assert cfg.train_ratio == run["train_ratio"] and cfg.n_envs == run["envs"], name
        steps = blocks[name]["run"].get("steps")  # "1.1e6": YAML 1.1 reads it as a string
        assert protocol.steps == (None if steps is None else int(float(steps))), name
        rssm = blocks[name].get(".*\\.rssm", defaults["agent"]["dyn"]["rssm"])
        assert WIDTHS[cfg.model_size] == rssm["deter"], name
    assert blocks["dmc_vision"]["env.dmc.proprio"] is False
    assert blocks["dmc_proprio"]["env.dmc.image"] is False
    atari100k = defaults["env"]["atari100k"]
    assert (atari100k["size"], atari100k["sticky"], atari100k["gray"]) == ([64, 64], False, False)


def test_a_protocol_sets_its_env_settings_in_the_python_api():
    """atari100k on atari:Pong: the atari100k env block (64 x 64 RGB, minimal actions)."""
    algo = DreamerV3("atari:Pong", DreamerV3Config.from_protocol("atari100k", model_size="1m"))
    assert algo.env_options == {"atari_settings": "atari100k"}
    assert algo.env.spec.image_shape == (64, 64, 3) and algo.env.spec.action_space.n == 6
    algo.env.close()
    algo.eval_env.close()
    vision = DreamerV3Config.from_protocol("dmc_vision", model_size="1m")
    with pytest.raises(ValueError, match="'Pendulum-v1' gives vectors"):
        DreamerV3(make_env("Pendulum-v1"), vision)  # an env object: checked by its spec
    with pytest.raises(ValueError, match="trains on atari envs.*'Breakout-MinAtar' is not one"):
        DreamerV3(make_env("Breakout-MinAtar"), DreamerV3Config.from_protocol("atari100k"))


def test_eval_policy_sample_samples_in_evaluation():
    """Evaluation (deterministic=True) with eval_policy="mode" takes the actor's argmax; with
    "sample" it samples as training does (a near-uniform untrained actor: many of 64 draws
    differ from the argmax)."""
    cfg, n = DreamerV3Config.preset("1m"), 64
    nets = Nets.create(cfg, 4, 2, True)
    learner = jax.jit(lambda k: update_lib.init_state(cfg, nets, k, 4))(jax.random.PRNGKey(0))
    tick = Tick(jnp.ones((n, 4)), jnp.zeros(n), jnp.ones(n, bool), jnp.zeros(n, bool),
                jnp.zeros(n, bool))  # fmt: skip

    def run(learner, key):
        """Each eval_policy's evaluation actions from one key (so one posterior latent), and
        the actor's mode on that latent."""
        actions = {}
        for eval_policy in ("mode", "sample"):
            policy = agent_policy(dataclasses.replace(cfg, eval_policy=eval_policy), nets, 2, True)
            actions[eval_policy], carry = policy.act(learner, policy.init(n), tick, key, True)
        return actions, nets.apply("pol", learner.params, feat(carry.latent)).mode()

    actions, mode = jax.jit(run)(learner, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(actions["mode"], mode)
    assert int((actions["sample"] != mode).sum()) > 10
    with pytest.raises(ValueError, match="eval_policy = 'greedy' is invalid: it must be one of"):
        DreamerV3Config(eval_policy="greedy")


D3 = ["train", "dreamerv3", "--steps", "100"]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (D3 + ["--env", "CartPole-v1", "--protocol", "nope"],
         "unknown protocol 'nope'; the official protocols are atari, atari100k, crafter"),
        (D3 + ["--env", "CartPole-v1", "--protocol", "dmc_vision"],
         "protocol 'dmc_vision' trains on image observations (configs.yaml:184-187"),
        (D3 + ["--env", "Pendulum-v1", "--protocol", "dmc_vision"],
         "'Pendulum-v1' gives vectors: pass e.g. --env dmc:walker-walk, or --protocol "
         "dmc_proprio"),
        (D3 + ["--env", "Breakout-MinAtar", "--protocol", "dmc_proprio"],
         "protocol 'dmc_proprio' trains on vector observations"),
        (D3 + ["--env", "CartPole-v1", "--protocol", "atari100k"],
         "protocol 'atari100k' trains on atari envs (configs.yaml:170-172"),
        (D3 + ["--env", "Breakout-MinAtar", "--protocol", "crafter"],
         "trains on craftax:Craftax-Classic-Pixels-v1"),
        (D3 + ["--env", "CartPole-v1", "--protocol", "bsuite"],
         "protocol 'bsuite' trains on bsuite's own environments"),
        (["train", "sac", "--env", "Pendulum-v1", "--eval-policy", "sample"],
         "--eval-policy is a dreamerv3 option"),
        (["train", "tdmpc2", "--env", "Pendulum-v1", "--protocol=dmc_proprio"],
         "unknown protocol 'dmc_proprio'; tdmpc2's official protocols are dmc"),
        (["train", "sac", "--env", "Pendulum-v1", "--protocol=dmc_proprio"],
         "--protocol picks an official run protocol of dreamerv3, tdmpc2; sac has none: drop "
         "--protocol"),
        (D3 + ["--env", "CartPole-v1", "--eval-policy", "greedy"],
         "eval_policy = 'greedy' is invalid: it must be one of 'mode', 'sample'"),
    ],
    ids=["unknown", "vision-cartpole", "vision-pendulum", "proprio-minatar", "atari100k-cartpole",
         "crafter-minatar", "bsuite", "sac-eval-policy", "tdmpc2-protocol", "sac-protocol",
         "bad-eval-policy"],
)  # fmt: skip
def test_bad_protocol_input_is_one_line_naming_the_fix(argv, expected, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(argv + ["--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: "), captured.err
    assert expected in err[0], err[0]
    assert "Traceback" not in captured.err + captured.out and not out.exists()


def test_protocol_on_the_command_line_is_recorded_for_resume_and_check(
    tmp_path, capsys, monkeypatch
):
    """--protocol dmc_proprio gives its fields and steps, explicit flags win, run.json records
    the config with the protocol's name, and ``ajax resume`` / ``ajax check`` read it back.
    (The run itself is stubbed: this checks what the command line hands it.)"""
    import ajax.training.run as run_lib

    seen = []

    def execute(algo, spec, out, **kwargs):
        seen.append((algo.config, spec))
        summary = {"final_eval_return": 0.0, "seeds": [0], "steps": spec.steps,
                   "wall_time_s": 0.0, "eval_every": algo.config.eval_freq}  # fmt: skip
        return summary, None

    monkeypatch.setattr(run_lib, "execute", execute)
    out = tmp_path / "run"
    argv = ["train", "dreamerv3", "--env", "Pendulum-v1", "--protocol", "dmc_proprio",
            "--train-ratio", "64", "--buffer-size", "100000", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    config, spec = seen[-1]
    assert (config.protocol, config.model_size, config.n_envs) == ("dmc_proprio", "1m", 16)
    assert (config.train_ratio, config.buffer_size, config.eval_policy) == (64.0, 100_000, "sample")
    assert spec.steps == 1_100_000  # the protocol's run.steps, --steps not given
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["config"]["protocol"] == "dmc_proprio" and recorded["steps"] == 1_100_000
    assert main(["resume", str(out)]) == 0
    assert seen[-1][0] == config
    capsys.readouterr()
    assert main(["check", str(out)]) == 1  # needs care: nothing trained, so no checkpoint
    assert "protocol dmc_proprio" in capsys.readouterr().out.splitlines()[0]
    steps = ["train", "dreamerv3", "--env", "Pendulum-v1", "--protocol", "dmc_proprio",
             "--steps", "5000", "--out", str(tmp_path / "short")]  # fmt: skip
    assert main(steps) == 0 and seen[-1][1].steps == 5000
