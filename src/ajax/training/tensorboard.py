"""TensorBoard scalars written in the caller's thread, one whole record at a time.

tensorboardX's ``SummaryWriter`` writes from a thread of its own and flushes again at exit, so
a write the OS refuses (a full disk) fails there, with a traceback each time, and the run
never hears of it. :class:`ScalarWriter` writes the same event file (TFRecord framing of
``Event`` protos, as TensorBoard reads them) with :func:`~ajax.training.io.append_whole`:
each record's scalars in one write, an :class:`OSError` raised to the caller, no torn record.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.record_writer import masked_crc32c

from ajax.training.io import append_whole


def framed(event: Event) -> bytes:
    """One event as a TFRecord: length, its CRC, the bytes, their CRC."""
    data = event.SerializeToString()
    header = struct.pack("Q", len(data))
    return (header + struct.pack("I", masked_crc32c(header)) + data
            + struct.pack("I", masked_crc32c(data)))  # fmt: skip


class ScalarWriter:
    """Scalars of a run into ``logdir/events.out.tfevents.<time>.<host>``."""

    def __init__(self, logdir: str | Path):
        logdir = Path(logdir)
        logdir.mkdir(parents=True, exist_ok=True)
        self.path = logdir / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        append_whole(self.path, framed(Event(wall_time=time.time(), file_version="brain.Event:2")))

    def add_scalars(self, values: dict[str, float], step: int) -> None:
        """The scalars of one step, written whole and synced."""
        summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
        append_whole(self.path, framed(Event(wall_time=time.time(), step=step, summary=summary)))
