"""Host-memory rows of a sequence replay, for pixel runs whose replay does not fit on the device.

A :class:`HostStore` keeps the fields a replay stores on the host (every field but the flags:
observations, actions, rewards, latents) as numpy rings, one set per seed:
``slots[s][field]`` is ``[N_env, capacity, ...]`` for the seed whose replay holds
``host_ref = (s, version)``. The jitted replay functions of :mod:`ajax.buffers.sequence` reach it
through ``jax.experimental.io_callback``: a tick's rows are written, a batch's windows gathered
and DreamerV3's latents written back on the host, and only the batch crosses to the device. The
device keeps the flags and the positions, so sampling, the online queue and TD-MPC2's episode
filter are the device replay's code, and a run draws bitwise the same batches either way.

Order. Each call takes the replay's ``host_ref`` and returns it with the version advanced, and
the replay state carries the new one, so a seed's calls run in program order through data
dependence alone. (Ordered effects would do it too, but ``vmap`` refuses them, and seeds are
vmapped.) Under ``vmap`` a callback runs once per seed, one after another.

A store is a static field of the replay state: jitted functions hold it, so its memory lives as
long as their compiled code (one run per process, as the command line runs, frees it at exit).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

REF = jax.ShapeDtypeStruct((2,), jnp.int32)  # (slot, version)


class HostStore:
    """Numpy rings of ``fields`` (one row's shape and dtype each) for ``num_envs`` envs of
    ``capacity`` rows, one set per registered seed."""

    def __init__(self, fields: Mapping[str, jax.ShapeDtypeStruct], num_envs: int, capacity: int):
        self.fields = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in fields.items()}
        self.num_envs, self.capacity = int(num_envs), int(capacity)
        self.slots: list[dict[str, np.ndarray]] = []
        self._lock = threading.Lock()

    def nbytes_per_seed(self) -> int:
        """Bytes one seed's rings hold."""
        rows = self.num_envs * self.capacity
        return sum(rows * int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize
                   for s in self.fields.values())  # fmt: skip

    def ring_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        """Each field's rings ``[N_env, capacity, ...]``, as a device replay would hold them."""
        lead = (self.num_envs, self.capacity)
        return {k: jax.ShapeDtypeStruct(lead + tuple(s.shape), s.dtype)
                for k, s in self.fields.items()}  # fmt: skip

    def split(self, fields: Mapping) -> tuple[dict, dict]:
        """``fields`` as (those kept on the device, those held here)."""
        return ({k: v for k, v in fields.items() if k not in self.fields},
                {k: v for k, v in fields.items() if k in self.fields})  # fmt: skip

    def _empty(self) -> dict[str, np.ndarray]:
        lead = (self.num_envs, self.capacity)
        return {k: np.zeros(lead + tuple(s.shape), s.dtype) for k, s in self.fields.items()}

    # ---- checkpoints: the rings as a pytree of numpy arrays, and back ----

    def arrays(self) -> list[dict[str, np.ndarray]]:
        """Every seed's rings (what a checkpoint saves beside the device state)."""
        return self.slots

    def load(self, slots: list[Mapping[str, np.ndarray]]) -> None:
        """Replace the rings by restored ones (the restored state's ``host_ref`` index them)."""
        self.slots = [{k: np.array(v) for k, v in s.items()} for s in slots]

    # ---- host side of the callbacks ----

    def _register(self, example) -> np.ndarray:
        del example  # batched per seed, so vmap calls once per seed
        with self._lock:
            self.slots.append(self._empty())
            return np.asarray([len(self.slots) - 1, 0], np.int32)

    def _check(self, ref) -> dict[str, np.ndarray]:
        slot = int(ref[0])
        if not 0 <= slot < len(self.slots):
            raise RuntimeError(
                f"host replay slot {slot} is not held ({len(self.slots)} registered): a state "
                "was restored without its host rows (restore through ajax.training.checkpoint)"
            )
        return self.slots[slot]

    def _write(self, ref, pos, rows):
        rings = self._check(ref)
        env = np.arange(self.num_envs)
        for k, v in rows.items():
            rings[k][env, pos] = v
        return _next(ref)

    def _gather(self, ref, env, pos):
        rings = self._check(ref)
        return {k: rings[k][env, pos] for k in self.fields}, _next(ref)

    def _scatter(self, ref, env, pos, fields):
        rings = self._check(ref)
        held = pos < self.capacity  # rows the ring has overwritten since sampling are dropped
        for k, v in fields.items():
            rings[k][env[held], pos[held]] = np.asarray(v)[held]
        return _next(ref)

    # ---- traced side (inside jit / vmap / scan) ----

    def register(self, example) -> jax.Array:
        """A fresh set of rings for this seed; its ``host_ref``. ``example`` must vary per seed
        under vmap (a row of the first tick does) so that each seed gets its own."""
        return _call(self._register, REF, example)

    def write(self, ref: jax.Array, pos: jax.Array, rows: Mapping[str, jax.Array]) -> jax.Array:
        """Row ``e`` of each field into slot ``pos[e]`` of env ``e``'s ring; the next ref."""
        return _call(self._write, REF, ref, pos, dict(rows))

    def gather(self, ref: jax.Array, env: jax.Array, pos: jax.Array):
        """``{field: rings[env, pos]}`` (leading dims of ``env``/``pos``) and the next ref."""
        shapes = {k: jax.ShapeDtypeStruct(env.shape + tuple(s.shape), s.dtype)
                  for k, s in self.fields.items()}  # fmt: skip
        return _call(self._gather, (shapes, REF), ref, env, pos)

    def scatter(self, ref: jax.Array, env: jax.Array, pos: jax.Array, fields) -> jax.Array:
        """``rings[env, pos] = value`` for each field given, where ``pos < capacity``."""
        return _call(self._scatter, REF, ref, env, pos, dict(fields))


def host_stores(tree) -> list[HostStore]:
    """The stores of every replay in ``tree`` that keeps rows here (a node whose ``host`` is a
    :class:`HostStore`), each once: what a checkpoint saves beside the tree."""
    holds = lambda x: isinstance(getattr(x, "host", None), HostStore)
    stores = [x.host for x in jax.tree.leaves(tree, is_leaf=holds) if holds(x)]
    return list({id(s): s for s in stores}.values())


def _next(ref) -> np.ndarray:
    return np.asarray([ref[0], ref[1] + 1], np.int32)


def _call(fn, shapes, *args):
    # unordered: the refs order a seed's calls; under vmap jax calls once per seed
    return io_callback(fn, shapes, *args, ordered=False)
