"""Failures of the machine a command runs on (a full disk, a read-only or vanished directory):
one ``ajax: error:`` line naming the path, the cause and the fix, and exit status 4.

Every write of a run goes through code that raises :class:`OSError` with the path it wrote
(:func:`naming`); orbax's errors, which arrive as a ``ValueError`` from its writer threads,
are turned into one (:func:`from_orbax`); a run's error gains how to continue it
(:func:`run_write_failed`); the CLI prints any of them as one line (:func:`describe`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

EXIT_ENVIRONMENT = 4  # the CLI's exit status when the machine failed the command
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


class WriteFailed(OSError):
    """An OS error with its one-line report (path, cause, what to do) already written."""

    def __init__(self, err: OSError, line: str):
        super().__init__(err.errno, err.strerror, err.filename)
        self.line = line

    def __str__(self) -> str:
        return self.line


def cause(err: OSError) -> str:
    """The OS's reason in lower case ("no space left on device"), or the error's text."""
    if err.errno is not None:
        return os.strerror(err.errno).lower()
    return str(err.strerror or err) or type(err).__name__


def fix(err: OSError) -> str:
    """What frees the machine to write again."""
    if err.errno in NO_SPACE:
        return "free space on that disk"
    if err.errno in READ_ONLY:
        return "make it writable"
    return "check that disk"


def describe(err: OSError) -> str:
    """One line for any OS error that ended a command: the path, the cause and the fix."""
    if isinstance(err, WriteFailed):
        return err.line
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{cause(err)}; {fix(err)} and run the command again"


def environment_failed(err: OSError) -> int:
    """Report ``err`` as the CLI's one ``ajax: error:`` line; the exit status (4). A closed
    pipe (``ajax agents | head``) is not the machine failing: it is raised again."""
    if isinstance(err, BrokenPipeError):
        raise err
    print(f"ajax: error: {describe(err)}", file=sys.stderr)
    return EXIT_ENVIRONMENT


def run_write_failed(err: OSError, out: Path, checkpoint: int | None) -> WriteFailed:
    """``err`` (a write into the run directory ``out`` failed; ``checkpoint`` is the newest
    step on disk, if any) with what is kept and how to continue the run."""
    if isinstance(err, WriteFailed):
        return err
    kept = "it has no checkpoint yet"
    if checkpoint is not None:
        kept = f"its last good checkpoint ({Path(out) / 'checkpoints' / str(checkpoint)}) is kept"
    what = "cannot write " if err.errno in NO_SPACE + (errno.EROFS,) else ""  # else: read, too
    line = (f"{what}{err.filename or out}: {cause(err)}; the run stopped and {kept}; "
            f"{fix(err)}, then 'ajax resume {out}' continues it")  # fmt: skip
    return WriteFailed(err, line)


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Give an :class:`OSError` raised inside (e.g. by a write to an open file) ``path`` as
    its file name when it has none."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err


_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


def from_orbax(err: BaseException, path: str | Path) -> OSError | None:
    """The OS error behind an orbax save failure (an :class:`OSError` in its chain, or
    tensorstore's ``[os_error_code='28']`` in its text), named after ``path``; None for any
    other failure (a bug, which should surface as it is)."""
    seen = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            return OSError(seen.errno, os.strerror(seen.errno), str(path))
        match = _OS_ERROR_CODE.search(str(seen))
        if match:
            code = int(match.group(1))
            return OSError(code, os.strerror(code), str(path))
        seen = seen.__cause__ or seen.__context__
    return None
