"""Run ``sharded_runs.py`` (four forced CPU devices need a fresh interpreter) and read its
measurements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HELPER = Path(__file__).with_name("sharded_runs.py")


def measure(agent: str, tmp_path: Path, *mode: str) -> dict:
    """The JSON object ``sharded_runs.py AGENT TMP [MODE]`` prints (asserting it ran)."""
    proc = subprocess.run(
        [sys.executable, str(HELPER), agent, str(tmp_path), *mode],
        capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))
