"""The TD-MPC2 side-by-side harness (issue 13 item 1): its bad-input lines and the CPU edits it
makes to a copy of the official code. The timing itself needs the official checkout and its
interpreter, which the test machine has not; see the README's "Benchmarks"."""

from __future__ import annotations

import sys

import pytest
from bench_loader import load_benchmark

_load = load_benchmark


def test_cpu_copy_edits_only_the_device_strings_and_capturable(tmp_path):
    driver = _load("tdmpc2_official")
    src = tmp_path / "repo" / "tdmpc2" / "common"
    src.mkdir(parents=True)
    (src.parent / "tdmpc2.py").write_text(
        "self.device = torch.device('cuda:0')\n"
        "opt = Adam(p, lr=1e-3, capturable=True)\n"
        'd = torch.tensor([1.0], device="cuda")\n'
        "x = y.cuda()\n"
        "name = 'cudagraph'  # not a device string\n"
    )
    (src / "scale.py").write_text("v = torch.ones(1, device=torch.device('cuda:1'))\n")
    (src / "buffer.py").write_text("mem_free, _ = torch.cuda.mem_get_info()\n")
    (src / "math.py").write_text("def f(x):\n    return x\n")
    root = driver.cpu_copy(tmp_path / "repo", tmp_path / "copy")
    assert (root / "tdmpc2.py").read_text() == (
        "self.device = torch.device('cpu')\n"
        "opt = Adam(p, lr=1e-3, capturable=False)\n"
        "d = torch.tensor([1.0], device='cpu')\n"
        "x = y.cpu()\n"
        "name = 'cudagraph'  # not a device string\n"
    )
    assert (root / "common" / "scale.py").read_text() == (
        "v = torch.ones(1, device=torch.device('cpu'))\n"
    )
    assert (root / "common" / "buffer.py").read_text() == "mem_free, _ = (0, 0)\n"
    assert (root / "common" / "math.py").read_text() == "def f(x):\n    return x\n"
    assert "cuda" in (src.parent / "tdmpc2.py").read_text()  # the checkout itself is untouched


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--official-python", sys.executable], "go together"),
        (["--official-python", "/no/such/python", "--official-repo", "."], "not an executable"),
        (["--official-python", sys.executable, "--official-repo", "."], "holds no tdmpc2"),
        (
            ["--official-python", sys.executable, "--official-repo", ".", "--official-modes", "x"],
            "invalid choice",
        ),
        (["--run-seed-steps", "500"], "--run-seed-steps > 500"),
        (["--run-steps", "0"], "--run-steps must be >= 1"),
    ],
)
def test_bad_official_flags_exit_2_with_one_line(argv, says, monkeypatch, capsys):
    speed = _load("tdmpc2_speed")
    monkeypatch.setattr(sys, "argv", ["tdmpc2_speed.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        speed.main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and err[-1].startswith("tdmpc2_speed.py: error:"), err


def test_official_code_that_fails_exits_2_with_its_last_line(tmp_path, monkeypatch, capsys):
    """A checkout the driver cannot run (here: no torch in this interpreter, no ``common``)
    ends the benchmark with exit 2 and one line quoting the driver's last error line."""
    speed = _load("tdmpc2_speed")
    (tmp_path / "tdmpc2").mkdir()
    (tmp_path / "tdmpc2" / "tdmpc2.py").write_text("")
    with pytest.raises(SystemExit) as exit_:
        speed.official_times(sys.executable, str(tmp_path), [1], 1, ["eager"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "official TD-MPC2 (eager) failed" in err[0], err
    assert "Error" in err[0]  # the driver's own last line, e.g. ModuleNotFoundError


def test_gymnasium_shims_let_a_wrapper_wrap_and_forward_to_a_non_env(monkeypatch):
    """The official envs/ under gymnasium 1.x: a Wrapper around an object that is not a
    gymnasium.Env (its DMControlWrapper), forwarding unknown attributes, and logger.set_level."""
    gymnasium = pytest.importorskip("gymnasium")
    driver = _load("tdmpc2_official")
    # undone after the test: each attribute restored, or removed where it was not there
    for owner, name in ((gymnasium.Wrapper, "__init__"), (gymnasium.Wrapper, "__getattr__"),
                        (gymnasium.logger, "set_level")):  # fmt: skip
        monkeypatch.setattr(owner, name, vars(owner).get(name), raising=False)
    monkeypatch.delattr(gymnasium.logger, "set_level")
    monkeypatch.setattr(gymnasium.Wrapper, "__init__", vars(gymnasium.Wrapper)["__init__"])
    monkeypatch.delattr(gymnasium.Wrapper, "__getattr__")
    driver.gymnasium_1x_shims(gymnasium)

    class Plain:
        max_episode_steps = 500

        def step(self, action):
            return "obs", 1.0, False, {}

    wrapped = gymnasium.Wrapper(Plain())
    assert wrapped.max_episode_steps == 500 and wrapped.step(0) == ("obs", 1.0, False, {})
    gymnasium.logger.set_level(40)
    with pytest.raises(AttributeError):
        wrapped._private  # noqa: B018
