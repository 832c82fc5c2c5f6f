"""``ajax check RUN``: the state of a run directory (spec, every checkpoint, metrics) read-only."""

from __future__ import annotations

from pathlib import Path

from ajax.training.checkpoint import DAMAGED, check_steps, read_manifest
from ajax.training.io import split_jsonl
from ajax.training.run import RunDirError, check_identity, load_spec


def check_run(out: Path) -> tuple[list[str], bool]:
    """Report lines and whether the run can be resumed as it is (its newest checkpoint
    verifies and was made by its ``run.json``, or it has no checkpoint yet). Changes nothing."""
    spec = load_spec(out)
    protocol = spec.config.get("protocol")
    lines = [f"run {out}: {spec.agent} on {spec.env}, {spec.steps} steps, seeds "
             f"{spec.seed}..{spec.seed + spec.n_seeds - 1}"
             + (f", protocol {protocol}" if protocol else "")
             + (f", preset {spec.preset}" if spec.preset else "")]  # fmt: skip
    ckpt = out / "checkpoints"
    healthy = True
    try:
        check_identity(spec, ckpt)
    except RunDirError as err:
        lines.append(f"identity: MISMATCH: {err}")
        healthy = False
    else:
        if read_manifest(ckpt) is not None:
            lines.append("identity: the checkpoints were made by this run.json")
    statuses = check_steps(ckpt)
    if not statuses:
        lines.append("checkpoints: none yet (resume starts from step 0)")
    for i, s in enumerate(statuses):
        lines.append(f"checkpoint {s.step}: {s.state} ({s.detail}; {s.bytes} bytes)")
        if i == 0 and s.state != "ok":
            healthy = False
    for moved in sorted((out / DAMAGED).glob("*")) if (out / DAMAGED).is_dir() else []:
        why = moved / "WHY.txt"
        reason = why.read_text().strip() if why.exists() else "no reason recorded"
        lines.append(f"moved aside: {moved} ({reason})")
    records, malformed = split_jsonl(out / "metrics.jsonl")
    last = records[-1]["step"] if records else 0
    lines.append(f"metrics.jsonl: {len(records)} records up to step {last}, "
                 f"{len(malformed)} malformed line(s)")  # fmt: skip
    lines.append("verdict: " + ("good" if healthy else "needs attention (see above)"))
    return lines, healthy
