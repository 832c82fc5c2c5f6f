"""One benchmark, before and after a change, side by side in one run.

Usage (from the repository root)::

    python benchmarks/before_after.py --before REV [--rounds 2] -- benchmarks/X.py [X's flags]

Checks out ``REV`` (a commit, a tag, ``HEAD~3``) into a temporary git worktree and runs the
benchmark script ``X.py`` ``--rounds`` times against each tree, alternating (before, after,
before, after, ...), so that drift in the machine's load falls on both sides alike. Each run is
a fresh interpreter (this one) with ``PYTHONPATH`` set to the tree's ``src`` and the script
taken from that tree, so both the library and the script are the revision's (quote a change
that touched the script as such). The script's own output is printed whole, headed by the side and round;
the worktree is removed at the end.

Issue 38 asks for "speed unchanged (within noise) from one run of the benchmarks before and
after"; this is that run, for any of the benchmarks here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worktree(rev: str, where: Path) -> Path:
    """A detached worktree of ``rev`` at ``where``; SystemExit naming the problem if git
    cannot make one."""
    proc = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f",
                           str(where), rev], capture_output=True, text=True)  # fmt: skip
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["git worktree failed"])[-1]
        raise SystemExit(f"cannot check out --before {rev}: {last}")
    return where


def run_side(tree: Path, script: str, args: list[str], label: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    print(f"\n===== {label}: {tree} =====", flush=True)
    proc = subprocess.run([sys.executable, str(tree / script), *args], env=env, cwd=tree)
    return proc.returncode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="before_after.py", description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=2, help="runs per side, alternating")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- benchmarks/X.py [its flags]")  # fmt: skip
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not (ROOT / command[0]).is_file():
        parser.error("give the benchmark after --, e.g. -- benchmarks/model_free_speed.py")
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    tmp = Path(tempfile.mkdtemp(prefix="ajax-before-"))
    try:
        before = worktree(args.before, tmp / "tree")
    except SystemExit:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    failed = 0
    try:
        for i in range(args.rounds):
            failed |= run_side(before, command[0], command[1:], f"before ({args.before}) #{i + 1}")
            failed |= run_side(ROOT, command[0], command[1:], f"after (working tree) #{i + 1}")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
