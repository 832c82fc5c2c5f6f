"""The README's agent table, reproduced through the command line (issue 41).

Every learning claim in the table's last column is written as the plain command that makes it,
in backquotes, then its bar: `` `ajax train dqn --env CartPole-v1 --steps 100000 --n-seeds 2`
> 450``. The default run checks that each command parses, picks its agent's preset for the env
and validates, with the run stubbed; the slow tests run each command exactly as printed (plus
``--out`` and ``--no-progress``) and assert its bar on the score the table reports: the mean
over seeds of each seed's best of its last two evaluations.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from ajax.cli import main

README = Path(__file__).parents[1] / "README.md"
CLAIM = re.compile(r"`(ajax train [^`]+)` ([<>]) (-?\d+(?:\.\d+)?)")


def agent_table() -> str:
    """The README's "## Agents" table (its rows only)."""
    section = README.read_text().split("\n## Agents\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(ln for ln in section.splitlines() if ln.startswith("|"))


def claims() -> list[tuple[str, str, float]]:
    """``(command, comparison, bar)`` of every claim in the table, in order."""
    return [(cmd, op, float(bar)) for cmd, op, bar in CLAIM.findall(agent_table())]


def score(out: Path) -> float:
    """Mean over seeds of each seed's best of its last two evaluations (metrics.jsonl)."""
    rows = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    per_seed = np.array([r["eval_returns"] for r in rows], dtype=float)  # [evals, seeds]
    assert np.all(np.isfinite(per_seed))
    return float(np.mean(np.max(per_seed[-2:], axis=0)))


def test_every_row_that_claims_learning_prints_its_command():
    """Each model-free agent's row has at least one claim; every claim trains two seeds."""
    found = claims()
    agents = {shlex.split(cmd)[2] for cmd, _, _ in found}
    assert agents == {"sac", "td3", "ppo", "dqn", "pqn", "redq", "crossq", "asac", "avg", "apo",
                      "udrl"}  # fmt: skip
    for cmd, _, _ in found:
        assert "--n-seeds 2" in cmd and "--env" in cmd, cmd


@pytest.mark.parametrize("cmd, op, bar", claims(), ids=[c for c, _, _ in claims()])
def test_each_command_parses_with_its_preset(cmd, op, bar, tmp_path, monkeypatch, capsys):
    """The command as printed builds its run (the run itself stubbed): exit 0, one preset line
    naming a preset of the agent made for the env."""
    import ajax.training.run as run_lib

    monkeypatch.setattr(run_lib, "execute", lambda algo, spec, out, **kw: (
        {"final_eval_return": 0.0, "seeds": [0, 1], "steps": spec.steps, "wall_time_s": 0.0,
         "eval_every": algo.config.eval_freq}, None))  # fmt: skip
    argv = shlex.split(cmd)[1:] + ["--out", str(tmp_path / "run")]
    assert main(argv) == 0
    notice = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("preset ")]
    assert len(notice) == 1 and notice[0].startswith(f"preset {argv[1]}-"), notice


@pytest.mark.slow  # 40 s to 12.5 min each (REDQ, UDRL) on 2 shared cores: 66 min in all
@pytest.mark.parametrize("cmd, op, bar", claims(), ids=[c for c, _, _ in claims()])
def test_each_command_reaches_its_bar(cmd, op, bar, tmp_path):
    out = tmp_path / "run"
    assert main(shlex.split(cmd)[1:] + ["--out", str(out), "--no-progress"]) == 0
    got = score(out)
    assert (got > bar) if op == ">" else (got < bar), (cmd, got)
