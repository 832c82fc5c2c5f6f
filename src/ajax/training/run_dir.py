"""A run directory's files and what they promise: ``run.json`` (:class:`RunSpec`), where a new
run may be written (not inside another run or an episode dataset), and the identity a
checkpoint must share with ``run.json`` to be resumed.

:mod:`ajax.training.run` runs an agent into such a directory.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ajax.buffers.dataset import FORMAT, INDEX
from ajax.training.checkpoint import MANIFEST, identity_of
from ajax.training.io import jsonable, read_json, write_json_atomic
from ajax.validation import Validated, between, positive, require

RUN_FILE = "run.json"


@dataclasses.dataclass(frozen=True)
class RunSpec(Validated):
    """What a run was asked to do; saved as ``run.json`` so ``ajax resume`` can rebuild it."""

    agent: str
    env: str
    steps: int
    seed: int = 0
    n_seeds: int = 1
    checkpoint_every: int = 5
    config: dict = dataclasses.field(default_factory=dict, hash=False)
    # make_env options beyond the id (the CLI's image flags: pixels, frame_stack, resize, ...)
    env_options: dict = dataclasses.field(default_factory=dict, hash=False)
    # the preset the config started from (ajax.presets; None: none), for ``ajax check``
    preset: str | None = None

    RULES = {
        "steps": positive(),
        "seed": between(0, 2**31 - 1),
        "n_seeds": positive(),
        "checkpoint_every": positive(),
    }

    def relations(self) -> None:
        require(self, self.seed + self.n_seeds <= 2**31, "seed",
                f"<= 2**31 - n_seeds = {2**31 - self.n_seeds} (seeds are int32)")  # fmt: skip


def is_run_dir(path: Path) -> bool:
    return (path / RUN_FILE).exists() or (path / "metrics.jsonl").exists()


# The files that mark a run directory (its spec, its checkpoints' manifest).
RUN_MARKERS = (RUN_FILE, f"checkpoints/{MANIFEST}")


def enclosing_run(path: Path, itself: bool = False) -> tuple[Path, str] | None:
    """``(directory, marker)`` of the nearest run directory above ``path`` (symbolic links
    followed; ``path`` itself too when ``itself``), or None: what writing into ``path`` would
    overwrite."""
    path = Path(path).resolve()
    for directory in [path, *path.parents][0 if itself else 1 :]:
        for marker in RUN_MARKERS:
            try:
                if (directory / marker).is_file():
                    return directory, marker
            except OSError:  # an unreadable directory holds no run we can see
                continue
    return None


# The file that marks an episode dataset (``ajax collect``'s output), and its format.
DATASET_INDEX, DATASET_FORMAT = INDEX, FORMAT


def enclosing_dataset(path: Path, itself: bool = True) -> Path | None:
    """The nearest episode dataset directory (one whose ``dataset.json`` is Ajax's format) at
    ``path`` (when ``itself``) or above it, or None: a run written there would mix with it."""
    import json

    path = Path(path).resolve()
    for directory in [path, *path.parents][0 if itself else 1 :]:
        try:
            index = directory / DATASET_INDEX
            if index.is_file() and json.loads(index.read_text()).get("format") == DATASET_FORMAT:
                return directory
        except (OSError, ValueError, AttributeError):  # unreadable, or not Ajax's dataset.json
            continue
    return None


def refuse_dataset_out(out: Path, what: str = "a run") -> None:
    """FileExistsError for an ``--out`` that is, or is inside, an episode dataset directory."""
    dataset = enclosing_dataset(out)
    if dataset is not None:
        where = ("is a dataset directory" if dataset == Path(out).resolve()
                 else f"is inside the dataset directory {dataset}")  # fmt: skip
        raise FileExistsError(
            f"{out} {where} (it holds {DATASET_INDEX}, from 'ajax collect'); {what} written "
            "there would mix with the dataset's files: pick an --out outside it"
        )


def prepare_run_dir(out: Path, spec: RunSpec, overwrite: bool) -> None:
    """Create ``out`` for a new run; refuse one inside another run's directory (even with
    ``overwrite``), one that is or is inside an episode dataset, and one that holds another
    run unless ``overwrite``."""
    inside = enclosing_run(out)
    if inside is not None:
        raise FileExistsError(
            f"{out} is inside the run directory {inside[0]} (it holds {inside[1]}); a run "
            "written there would overwrite that run's files: pick an --out outside it"
        )
    refuse_dataset_out(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(20, "it exists and is not a directory", str(out))
    if out.exists() and is_run_dir(out):
        if not overwrite:
            raise FileExistsError(
                f"{out} already holds a run; pass --overwrite to replace it, or "
                f"'ajax resume {out}' to continue it"
            )
        import shutil

        for child in ("checkpoints", "tensorboard"):
            shutil.rmtree(out / child, ignore_errors=True)
        for child in ("metrics.jsonl", "summary.json", "curve.png", RUN_FILE):
            (out / child).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / RUN_FILE, dataclasses.asdict(spec))


class RunDirError(ValueError):
    """A run directory that cannot be resumed or evaluated as it is; the message names the fix."""


def load_spec(out: Path) -> RunSpec:
    """The run's ``run.json``, checked like a new run's options (:class:`RunDirError`)."""
    path = out / RUN_FILE
    if not path.exists():
        raise FileNotFoundError(f"{out} is not a run directory (no {RUN_FILE})")
    try:
        data = read_json(path)
    except ValueError as err:
        raise RunDirError(
            f"{path} is not valid JSON ({err}); restore it or start a new run"
        ) from err
    fields = [f.name for f in dataclasses.fields(RunSpec)]
    if (
        not isinstance(data, dict)
        or set(data) - set(fields)
        or not isinstance(data.get("config", {}), dict)
        or not isinstance(data.get("env_options", {}), dict)
    ):
        extra = sorted(set(data) - set(fields)) if isinstance(data, dict) else type(data).__name__
        raise RunDirError(f"{path} has unexpected content ({extra}); it holds the fields {fields}")
    try:
        return RunSpec(**data)
    except TypeError as err:
        raise RunDirError(f"{path}: {err}; it holds the fields {fields}") from err
    except ValueError as err:
        raise RunDirError(f"{path}: {err}") from err


def identity(spec: RunSpec) -> dict:
    """What a checkpoint must have been made with to be resumed by ``spec`` (all of the spec
    but ``checkpoint_every``, which only splits the same scan, and ``preset``, the name of where
    its config came from), plus the package version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ajax_version = version("ajax-rl")
    except PackageNotFoundError:
        ajax_version = "unknown"
    fields = dataclasses.asdict(spec)
    fields.pop("checkpoint_every")
    fields.pop("preset")  # where the config came from; the config itself is compared
    if not fields["env_options"]:  # runs from before the field existed recorded none
        fields.pop("env_options")
    return jsonable({**fields, "ajax_version": ajax_version})


def _differences(recorded: dict, current: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(recorded) | set(current)):
        a, b = recorded.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key} {a!r} (checkpoint) vs {b!r} (run.json)")
    return out


def check_identity(spec: RunSpec, ckpt_dir: Path, ignore_version: bool = False) -> None:
    """Refuse to resume checkpoints made by a different run, naming the differing fields."""
    recorded = identity_of(ckpt_dir)
    if recorded is None:
        return
    current = identity(spec)
    if ignore_version:
        recorded = {**recorded, "ajax_version": current["ajax_version"]}
    diff = _differences(recorded, current)
    if not diff:
        return
    fix = (
        "pass --ignore-version to resume with this version"
        if all(d.startswith("ajax_version") for d in diff)
        else "restore those values in run.json, or start a new run with 'ajax train ... --out NEW'"
    )
    raise RunDirError(
        f"the checkpoints in {ckpt_dir} were made by a different run: {'; '.join(diff)}; {fix}"
    )
