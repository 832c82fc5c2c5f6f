"""The one run driver: every run goes through these four steps, whether it comes from the
Python API (:meth:`~ajax.training.algorithm.Algorithm.train`), the command line (``ajax
train`` and ``resume`` through :func:`ajax.training.run.execute`; ``ajax eval``, ``collect``
and ``--video`` restore through :func:`start` and :func:`restore`) or a benchmark that trains.

1. :func:`plan`: validate the run once (steps, seeds, seed batching, replay memory, devices)
   and lay it out (:class:`Plan`: its seeds and device mesh);
2. :func:`start`: the run's chunks (a JAX env) or host runner (a host env), and its first state
   from the seeds' keys, derived once (:func:`seed_keys`);
3. :func:`restore`: the newest good checkpoint over that state (resume, eval);
4. :func:`run`: the chunks left, in segments (JAX env: each segment one jitted scan over its
   chunks, vmapped or mapped over seeds; host env: one chunk at a time), each chunk's record
   to ``on_record``, each segment checked for non-finite values and saved where asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ajax.training.checkpoint import restore_newest_good
from ajax.training.distributed import to_host
from ajax.training.sharding import (
    CHUNKS_THEN_SEEDS,
    SEEDS,
    check_batching,
    mesh_context,
    over_seeds,
    per_seed,
    shard_seeds,
)


class Chunks(NamedTuple):
    """A run as ``n_chunks`` calls of ``run_chunk`` after ``init``; each chunk is
    ``steps_per_chunk`` env steps ending with an evaluation."""

    init: Callable[[jax.Array], Any]
    run_chunk: Callable[[Any], tuple[Any, dict]]
    steps_per_chunk: int
    n_chunks: int

    @classmethod
    def of(cls, loop, total_steps: int) -> Chunks:
        """The chunks of a loop (``init``, ``run_chunk``, ``steps_per_chunk``) that cover
        ``total_steps`` env steps."""
        per = loop.steps_per_chunk
        return cls(loop.init, loop.run_chunk, per, n_chunks_for(total_steps, per))


def n_chunks_for(total_steps: int, steps_per_chunk: int) -> int:
    return max(1, math.ceil(total_steps / steps_per_chunk))


def seed_keys(seeds) -> jax.Array:
    """The PRNG keys of the seeds ``seeds`` (a list or a range), one per seed: the one place a
    run turns seeds into keys."""
    return jax.vmap(jax.random.PRNGKey)(jnp.asarray(list(seeds)))


def check_steps(total_steps: int) -> None:
    """A run's length is a positive int32: the jitted loop counts its env steps in int32."""
    from ajax.validation import INT32_MAX

    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps <= 0:
        raise ValueError(f"total_steps must be a positive integer, got {total_steps!r}")
    if total_steps > INT32_MAX:
        raise ValueError(
            f"total_steps must be at most {INT32_MAX} (the jitted loop counts env steps in "
            f"int32), got {total_steps}"
        )


def check_seeds(seed: int, n_seeds: int) -> None:
    """Seeds are int32 PRNG seeds: ``n_seeds >= 1`` of them from ``seed >= 0``."""
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ValueError(f"n_seeds must be a positive integer, got {n_seeds!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**31 - n_seeds:
        raise ValueError(f"seed must be an integer in [0, 2**31 - n_seeds], got {seed!r}")


# ----------------------------------------------------------------------------- 1. plan


class Plan(NamedTuple):
    """A validated run layout: its seeds, the device mesh (None: one device) and how the seeds
    are batched on a device ("vmap" or "map", :func:`~ajax.training.sharding.per_seed`)."""

    seeds: list[int]
    mesh: Any
    batching: str


def plan(algo, total_steps: int, seed: int = 0, n_seeds: int = 1, devices: int | None = None,
         parallel: str = "seeds", seed_batching: str = "vmap") -> Plan:  # fmt: skip
    """Validate a run once, before anything compiles or is written: ``ValueError`` naming the
    fix for bad steps or seeds, a seed batching the env cannot take, a replay that cannot fit
    (:meth:`~ajax.training.algorithm.Algorithm.check_memory`) or a device layout that cannot
    work (:meth:`~ajax.training.algorithm.Algorithm.mesh`)."""
    check_steps(total_steps)
    check_seeds(seed, n_seeds)
    mesh = algo.mesh(devices, n_seeds, parallel)
    check_batching(seed_batching, algo.is_jax)
    algo.check_memory(total_steps, n_seeds, devices, parallel)
    return Plan(list(range(seed, seed + n_seeds)), mesh, seed_batching)


# ----------------------------------------------------------------------------- 2. start


class Start(NamedTuple):
    """A run ready to go: ``chunks`` (JAX env) or ``host`` (a
    :class:`~ajax.training.host_loop.HostRun`, host env), the state (leading seed axis) and
    the run's length in chunks of ``per_chunk`` env steps."""

    chunks: Chunks | None
    host: Any
    state: Any
    per_chunk: int
    n_chunks: int


def start(algo, total_steps: int, p: Plan) -> Start:
    """The run's first state, from the keys of ``p.seeds`` (one jitted init over the seeds,
    laid out on ``p.mesh``; a host env's runner builds its own from the same keys)."""
    if algo.is_jax:
        chunks = algo.make_chunks(total_steps)
        keys = shard_seeds(seed_keys(p.seeds), p.mesh)
        with mesh_context(p.mesh):
            state = algo.jit(over_seeds(per_seed(chunks.init, p.batching), p.mesh))(keys)
        return Start(chunks, None, state, chunks.steps_per_chunk, chunks.n_chunks)
    host = algo.host_run(total_steps, p.seeds)
    per = host.steps_per_chunk
    return Start(None, host, host.state, per, n_chunks_for(total_steps, per))


# ----------------------------------------------------------------------------- 3. restore


def restore(ckpt_dir, s: Start, p: Plan, move_damaged: bool, warn) -> tuple[int | None, Start]:
    """The newest checkpoint in ``ckpt_dir`` that verifies, over ``s``'s state (damaged ones
    moved aside when ``move_damaged``, each reported to ``warn``): ``(its chunk count or None,
    the start with that state)``."""
    step, state = restore_newest_good(
        ckpt_dir, to_host(s.state), move_damaged=move_damaged, warn=warn
    )
    if s.chunks is not None:
        state = shard_seeds(state, p.mesh)
    return step, s._replace(state=state)


# ----------------------------------------------------------------------------- 4. run


def segment_fn(run_chunk, num_chunks: int, on_record: Callable[[dict], None] | None = None,
               batching: str = "vmap"):  # fmt: skip
    """``states -> (states, records)``: ``num_chunks`` chunks of every seed (leading axis) in one
    scan, the seeds batched as ``batching`` says (:func:`~ajax.training.sharding.per_seed`);
    each chunk's records reach ``on_record`` on the host as the jitted run goes."""

    def body(states, _):
        states, record = per_seed(run_chunk, batching)(states)
        if on_record is not None:
            jax.debug.callback(on_record, record, ordered=True)
        return states, record

    def segment(states):
        return jax.lax.scan(body, states, None, length=num_chunks)

    return segment


def seeds_segment(run_chunk, num_chunks: int, on_record=None, mesh=None,
                  batching: str = "vmap", compiler_options: dict | None = None):  # fmt: skip
    """The jitted :func:`segment_fn` over every seed, sharded over ``mesh`` when given
    (:func:`~ajax.training.sharding.over_seeds`); ``compiler_options`` go to XLA
    (``Algorithm.compiler_options``).
    Returns a host callable ``x -> (states, records)``. Records reach
    ``on_record`` by callback as the run goes, or, sharded, once the segment returns: a
    callback inside ``shard_map`` would see one device's block of seeds only (and an ordered
    callback is refused in a program partitioned over several devices)."""
    segment = segment_fn(run_chunk, num_chunks, on_record if mesh is None else None, batching)
    jitted = jax.jit(
        over_seeds(segment, mesh, (SEEDS, CHUNKS_THEN_SEEDS)), compiler_options=compiler_options
    )

    def run(x):
        with mesh_context(mesh):
            states, records = jitted(x)
        records = to_host(records)  # whole on every process of a multi-process run
        if mesh is not None and on_record is not None:
            for i in range(num_chunks):
                on_record(jax.tree.map(lambda r, i=i: r[i], records))
        return states, records

    return run


class Diverged(RuntimeError):
    """A loss or a parameter went NaN or inf: the run stopped before saving it. ``kept`` says
    what of the run is kept, which the run directory's owner knows
    (:func:`ajax.training.run.run_prepared`)."""

    def __init__(self, name: str, step: int, kept: str = ""):
        self.name, self.step = name, step
        super().__init__(
            f"{name} became non-finite by step {step}; the run stopped"
            + (f" and {kept}" if kept else "")
            + " (lower the learning rate or check the environment's rewards)"
        )


def check_finite(records: dict, agent_state) -> None:
    """Raise :class:`Diverged` naming the first non-finite loss metric (by chunk) or, failing
    that, the first non-finite parameter leaf. ``records`` leaves are ``[chunks, seeds]``."""
    steps = np.asarray(records["step"]).reshape(len(records["step"]), -1)
    metrics = {k: np.asarray(v) for k, v in records.items() if "loss" in k}
    for chunk in range(steps.shape[0]):
        for name, value in sorted(metrics.items()):
            if not np.all(np.isfinite(value[chunk])):
                raise Diverged(name, int(steps[chunk].max()))
    for path, leaf in jax.tree_util.tree_leaves_with_path(agent_state):
        if jnp.issubdtype(leaf.dtype, jnp.floating) and not bool(jnp.all(jnp.isfinite(leaf))):
            raise Diverged(f"parameter {jax.tree_util.keystr(path)}", int(steps[-1].max()))


def run(algo, s: Start, p: Plan, done_chunks: int = 0, checkpoint_every: int | None = None,
        on_record=None, save=None, check: bool = True) -> tuple[Any, dict]:  # fmt: skip
    """Run ``s`` from chunk ``done_chunks`` to its end: ``(final state, records)``, the state
    whole on this host and the records ``[chunks run, seeds, ...]``.

    A JAX env runs in segments of ``checkpoint_every`` chunks (None: one segment), each one
    jitted scan; a host env one chunk at a time, a segment ending every ``checkpoint_every``
    chunks. After each segment ``check`` raises :class:`Diverged` on a non-finite loss or
    parameter (before anything is saved) and ``save(done_chunks, state)`` writes it. A host
    env's runner is closed when the run ends, however it ends."""
    every = checkpoint_every or s.n_chunks
    log = on_record if on_record is not None else (lambda record: None)
    if s.chunks is None:
        try:
            return _run_host(s, done_chunks, every, log, save, check)
        finally:  # the run is over: its envs (and their processes) go
            s.host.close()
    segments: dict[int, Any] = {}
    state, whole, records = s.state, None, []
    while done_chunks < s.n_chunks:
        n = min(every, s.n_chunks - done_chunks)
        if n not in segments:
            segments[n] = seeds_segment(s.chunks.run_chunk, n, on_record, p.mesh,
                                        batching=p.batching,
                                        compiler_options=algo.compiler_options)  # fmt: skip
        state, segment_records = segments[n](state)
        jax.block_until_ready(state)
        whole = to_host(state)
        if check:
            check_finite(segment_records, whole.agent)
        records.append(segment_records)
        done_chunks += n
        if save is not None:
            save(done_chunks, whole)
    return (to_host(state) if whole is None else whole), _concat(records)


def _run_host(s: Start, done_chunks, every, log, save, check) -> tuple[Any, dict]:
    """A host env: one Python-driven chunk at a time around the same jitted learner."""
    host, records = s.host, []
    host.state = s.state
    if done_chunks:  # a restored state: its envs start new episodes
        host.restart_episodes()
    while done_chunks < s.n_chunks:
        record = host.run_chunk()
        log(record)
        records.append(jax.tree.map(lambda x: np.asarray(x)[None], record))
        if check:
            check_finite(records[-1], host.state.agent)
        done_chunks += 1
        if save is not None and (done_chunks % every == 0 or done_chunks == s.n_chunks):
            save(done_chunks, host.state)
    return host.state, _concat(records)


def _concat(records: list) -> dict:
    if not records:
        return {}
    return jax.tree.map(lambda *x: jnp.concatenate(x, axis=0), *records)
