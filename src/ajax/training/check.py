"""``ajax check RUN``: the state of a run directory (spec, every checkpoint, metrics) read-only.

A run "needs care" when it cannot be resumed or evaluated as it is, or when what it holds is
not what a good run leaves: each reason is one ``needs care:`` line saying what to do
(:func:`care_reasons`).
"""

from __future__ import annotations

from pathlib import Path

from ajax.training.checkpoint import (
    DAMAGED,
    MANIFEST,
    CheckpointStatus,
    check_steps,
    load_manifest,
    read_manifest,
    temporaries,
)
from ajax.training.io import read_json, split_jsonl
from ajax.training.run_dir import RunDirError, check_identity, load_spec


def read_summary(out: Path) -> dict | None:
    """``summary.json`` (written when a run finishes or diverges), or None if absent or
    unreadable."""
    try:
        summary = read_json(out / "summary.json")
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def care_reasons(statuses: list[CheckpointStatus], manifest_problem: str | None,
                 leftovers: list[Path], summary: dict | None) -> list[str]:  # fmt: skip
    """Why a run needs care, beside its identity: an invalid manifest, a newest checkpoint that
    does not verify, no checkpoint at all, a temporary a save left behind, a divergence
    (``summary.json``)."""
    reasons = []
    if manifest_problem is not None:
        reasons.append(f"{MANIFEST} is {manifest_problem}; 'ajax resume' moves it aside and "
                       "restores the newest checkpoint that reads, unverified")  # fmt: skip
    elif statuses and statuses[0].state != "ok":
        new = statuses[0]
        fix = ("restores it unverified and records it" if new.detail == f"no {MANIFEST}"
               else "moves it aside and continues from an older one")  # fmt: skip
        reasons.append(f"its newest checkpoint {new.step} is {new.state} ({new.detail}); "
                       f"'ajax resume' {fix}")  # fmt: skip
    if not statuses:
        reasons.append("it has no checkpoint: nothing to evaluate, and 'ajax resume' starts "
                       "it again from step 0")  # fmt: skip
    for path in leftovers:
        reasons.append(f"{path} is a temporary checkpoint left by a save that was killed or "
                       "failed (a full disk?); 'ajax resume' removes it")  # fmt: skip
    if summary is not None and summary.get("status") == "diverged":
        reasons.append(f"it diverged: {summary.get('diverged')} became non-finite by step "
                       f"{summary.get('step')} (summary.json); lower the learning rate or "
                       "check the environment's rewards, and train it again")  # fmt: skip
    return reasons


def check_run(out: Path) -> tuple[list[str], bool]:
    """Report lines and whether the run is good as it is (its newest checkpoint verifies and
    was made by its ``run.json``, and no :func:`care_reasons` apply). Changes nothing."""
    spec = load_spec(out)
    protocol = spec.config.get("protocol")
    lines = [f"run {out}: {spec.agent} on {spec.env}, {spec.steps} steps, seeds "
             f"{spec.seed}..{spec.seed + spec.n_seeds - 1}"
             + (f", protocol {protocol}" if protocol else "")
             + (f", preset {spec.preset}" if spec.preset else "")]  # fmt: skip
    ckpt = out / "checkpoints"
    reasons = []
    try:
        check_identity(spec, ckpt)
    except RunDirError as err:
        lines.append(f"identity: MISMATCH: {err}")
        reasons.append("its checkpoints were made by another run.json (see identity above)")
    else:
        if read_manifest(ckpt) is not None:
            lines.append("identity: the checkpoints were made by this run.json")
    statuses, manifest_problem = check_steps(ckpt), load_manifest(ckpt)[1]
    if not statuses:
        lines.append("checkpoints: none")
    for s in statuses:
        lines.append(f"checkpoint {s.step}: {s.state} ({s.detail}; {s.bytes} bytes)")
    for moved in sorted((out / DAMAGED).glob("*")) if (out / DAMAGED).is_dir() else []:
        why = moved / "WHY.txt"
        reason = why.read_text().strip() if why.exists() else "no reason recorded"
        lines.append(f"moved aside: {moved} ({reason})")
    records, malformed = split_jsonl(out / "metrics.jsonl")
    last = records[-1]["step"] if records else 0
    lines.append(f"metrics.jsonl: {len(records)} records up to step {last}, "
                 f"{len(malformed)} malformed line(s)")  # fmt: skip
    reasons += care_reasons(statuses, manifest_problem, temporaries(ckpt), read_summary(out))
    lines += [f"needs care: {reason}" for reason in reasons]
    lines.append("verdict: " + (f"needs care ({len(reasons)} reason(s) above)" if reasons
                                else "good"))  # fmt: skip
    return lines, not reasons
