"""One run over several processes (hosts): ``jax.distributed`` from flags or environment variables.

Every process runs the same program over the global device mesh (``jax.devices()`` spans all
processes once :func:`connect` has run), so the seeds layout of :mod:`ajax.training.sharding`
spreads a run's seeds over hosts unchanged; on CPU the collectives go through gloo. Process 0
writes the run directory (metrics, checkpoints, summary); the others write nothing. Arrays
reach the host through :func:`to_host` (``process_allgather``), which every process calls.

Why a rendezvous before ``jax.distributed.initialize``: when the coordinator does not answer or
a process never joins, XLA's coordination client aborts the whole interpreter (a fatal log, no
Python exception) once ``initialization_timeout`` passes. :func:`rendezvous` first meets every
process on the coordinator's port with plain sockets, under the same timeout, so a missing
coordinator or process is an error naming the fix; then JAX's own runtime takes the port.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

import jax

from ajax.validation import Validated, at_least, positive, require

ENV = {"coordinator": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
       "process_id": "JAX_PROCESS_ID"}  # fmt: skip
HELLO = b"ajax-rendezvous"


class DistributedError(RuntimeError):
    """The processes of a run could not meet; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class Processes(Validated):
    """The processes of one run.

    Attributes:
        coordinator: ``HOST:PORT`` of process 0 (every process gives the same one).
        num_processes: processes in the run (1: no ``jax.distributed``).
        process_id: this process, in ``[0, num_processes)``.
        timeout: seconds to wait for the coordinator and every process to meet.
    """

    coordinator: str | None = None
    num_processes: int = 1
    process_id: int = 0
    timeout: int = 60

    RULES = {"num_processes": positive(), "process_id": at_least(0), "timeout": positive()}

    def relations(self) -> None:
        require(self, self.process_id < self.num_processes, "process_id",
                f"< --num-processes {self.num_processes}")  # fmt: skip
        require(self, self.num_processes == 1 or self.coordinator is not None, "coordinator",
                "HOST:PORT of process 0 when --num-processes > 1")  # fmt: skip
        if self.coordinator is not None:
            host, _, port = self.coordinator.rpartition(":")
            require(self, bool(host) and port.isdigit() and 0 < int(port) < 65536,
                    "coordinator", "HOST:PORT, e.g. 10.0.0.1:12345")  # fmt: skip

    @classmethod
    def from_env(cls, **given) -> Processes:
        """Flags given (not None) first, else ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``
        and ``JAX_PROCESS_ID``, else one process."""
        values = {}
        for field, var in ENV.items():
            value = given.get(field)
            if value is None and os.environ.get(var):
                raw = os.environ[var]
                try:
                    value = raw if field == "coordinator" else int(raw)
                except ValueError:
                    raise ValueError(f"{var}={raw!r} is not an integer") from None
            if value is not None:
                values[field] = value
        if given.get("timeout") is not None:
            values["timeout"] = given["timeout"]
        return cls(**values)

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.coordinator.rpartition(":")
        return host, int(port)


def rendezvous(p: Processes) -> None:
    """Meet every process on the coordinator's port within ``p.timeout`` seconds, or raise
    :class:`DistributedError`. Process 0 listens until all others said hello, then tells them
    to go; the others retry connecting until the deadline."""
    deadline = time.monotonic() + p.timeout
    if p.process_id == 0:
        _gather(p, deadline)
    else:
        _join(p, deadline)


def _gather(p: Processes, deadline: float) -> None:
    host, port = p.address
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("" if host not in ("127.0.0.1", "localhost") else host, port))
        except OSError as err:
            raise DistributedError(
                f"process 0 cannot listen on {p.coordinator} ({err.strerror}); pick a free "
                "--coordinator port on this host"
            ) from err
        server.listen(p.num_processes)
        peers: dict[int, socket.socket] = {}
        try:
            while len(peers) < p.num_processes - 1:
                server.settimeout(max(deadline - time.monotonic(), 0.01))
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    missing = sorted(set(range(1, p.num_processes)) - set(peers))
                    raise DistributedError(
                        f"process(es) {missing} did not join {p.coordinator} within "
                        f"{p.timeout} s; start every process with the same --coordinator and "
                        "--num-processes (or raise --coordinator-timeout)"
                    ) from None
                conn.settimeout(5)
                try:
                    hello = conn.recv(64).split(b" ")
                    peers[int(hello[1])] = conn
                except (OSError, ValueError, IndexError):
                    conn.close()
            for conn in peers.values():
                conn.sendall(b"go")
        finally:
            for conn in peers.values():
                conn.close()


def _join(p: Processes, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection(p.address, timeout=2) as conn:
                conn.sendall(HELLO + b" %d" % p.process_id)
                conn.settimeout(max(deadline - time.monotonic(), 0.01))
                if conn.recv(2) == b"go":
                    return
        except OSError:
            pass
        if time.monotonic() >= deadline:
            raise DistributedError(
                f"the coordinator {p.coordinator} did not answer within {p.timeout} s; start "
                "process 0 there first, or fix --coordinator (or raise --coordinator-timeout)"
            )
        time.sleep(0.2)


def connect(p: Processes) -> None:
    """Join the run's processes (nothing for one process): rendezvous, then
    ``jax.distributed.initialize`` with gloo collectives on CPU. Call before JAX computes."""
    if p.num_processes == 1:
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    rendezvous(p)
    # a process that dies is noticed (and the others stop) after the same timeout
    jax.distributed.initialize(
        p.coordinator,
        p.num_processes,
        p.process_id,
        initialization_timeout=p.timeout,
        heartbeat_timeout_seconds=p.timeout,
        shutdown_timeout_seconds=p.timeout,
    )


def is_primary() -> bool:
    """Whether this process writes the run directory (process 0)."""
    return jax.process_index() == 0


def to_host(tree: Any) -> Any:
    """``tree`` with every array whole on this process (``process_allgather``: every process
    must call it); unchanged in a single-process run."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)
