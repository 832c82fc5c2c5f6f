"""``benchmarks/before_after.py``: bad input is refused before any worktree is made or run."""

from __future__ import annotations

import subprocess

import pytest
from bench_loader import BENCH, load_benchmark

ba = load_benchmark("before_after")


def _worktrees() -> str:
    return subprocess.run(["git", "-C", str(BENCH.parent), "worktree", "list"],
                          capture_output=True, text=True).stdout  # fmt: skip


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--before", "HEAD"], "give the benchmark after --"),
        (["--before", "HEAD", "--", "benchmarks/nope.py"], "give the benchmark after --"),
        (["--before", "HEAD", "--rounds", "0", "--", "benchmarks/scaling.py"], "--rounds must be"),
    ],
    ids=["no-command", "no-script", "rounds"],
)
def test_bad_arguments_exit_2_with_one_line(argv, says, capsys):
    with pytest.raises(SystemExit) as err:
        ba.main(argv)
    assert err.value.code == 2 and says in capsys.readouterr().err


def test_an_unknown_revision_is_named_and_leaves_no_worktree():
    before = _worktrees()
    with pytest.raises(SystemExit, match="cannot check out --before no-such-rev"):
        ba.main(["--before", "no-such-rev", "--", "benchmarks/scaling.py"])
    assert _worktrees() == before
