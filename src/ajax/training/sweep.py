"""Sweeps in one program: a grid of config values times seeds, as purejaxrl and rejax run them.

A grid maps config fields to the values to try. Its fields fall in two kinds
(:func:`split_grid`):

- **traced** fields: the float fields (rates, coefficients, discounts...) that leave every array
  shape and every branch of the program unchanged. All combinations of their values become
  inputs of one jitted run, batched with the seeds along the run's leading axis
  (``grid points x seeds``), so the grid costs one compile and runs as one vmapped (or mapped)
  program: :func:`swept_chunks` builds the agent's functions inside the trace from a config
  whose traced fields are the run's own scalars (:func:`with_values`).
- **static** fields: everything else (widths, batch sizes, counts, booleans, strings, nested
  configs; and the floats a config class lists in ``SWEEP_STATIC``, or leaves out of its
  ``SWEEP_TRACED``, which steer Python control flow, set a shape or sit in static metadata). Each of their combinations is its own program, run one after another.

Grid point ``g``'s seeds are ``seed .. seed + n_seeds - 1``, the same keys as a plain run with
that config: under ``seed_batching="map"`` each point is bitwise the plain run (the field is a
runtime scalar instead of a compile-time constant; the tests pin SAC's and PPO's learning rates);
vmapped, it agrees to float rounding, as vmapped seeds do
(:func:`~ajax.training.sharding.per_seed`). A field the config combines with another constant
in Python before the program sees it (``1 - tau``) rounds once in float64 in a plain run and in
float32 here: one ulp.

:func:`sweep_runs` is the Python API (``Agent.sweep``); :mod:`ajax.training.sweep_dirs` writes
a sweep into ordinary run directories (``ajax sweep``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import numbers
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ajax.training import driver
from ajax.training.driver import Chunks, seed_keys
from ajax.training.sharding import mesh_context, over_seeds, per_seed, shard_seeds
from ajax.validation import ConfigError


class SweepError(ValueError):
    """A grid that cannot run; the message names the field and the fix."""


# ----------------------------------------------------------------------------- the grid


def _is_float_field(annotation: Any) -> bool:
    """``float`` or ``float | None`` (a config's annotations are strings under
    ``from __future__ import annotations``)."""
    if isinstance(annotation, str):
        return annotation.replace(" ", "") in ("float", "float|None", "None|float")
    if annotation is float:
        return True
    args = typing.get_args(annotation)
    return isinstance(annotation, types.UnionType) and set(args) == {float, type(None)}


def field_kinds(config_cls) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    """``(traced, static, refused)`` fields of ``config_cls``: floats not in its
    ``SWEEP_STATIC`` are traced (only those in its ``SWEEP_TRACED``, when it has one); the fields
    set from Python only (``PYTHON_ONLY``) cannot be swept (``refused``: field -> why); every
    other field runs one program per value."""
    python_only = getattr(config_cls, "PYTHON_ONLY", {})
    static_floats = set(getattr(config_cls, "SWEEP_STATIC", ()))
    allowed = getattr(config_cls, "SWEEP_TRACED", None)
    if allowed is not None:
        static_floats |= {f.name for f in dataclasses.fields(config_cls)} - set(allowed)
    traced, static = [], []
    for f in dataclasses.fields(config_cls):
        if f.name in python_only:
            continue
        if _is_float_field(f.type) and f.name not in static_floats:
            traced.append(f.name)
        else:
            static.append(f.name)
    return tuple(traced), tuple(static), dict(python_only)


def split_grid(config_cls, grid: dict[str, Sequence]) -> tuple[dict, dict]:
    """``(traced, static)`` parts of ``grid`` (field -> tuple of values); :class:`SweepError`
    for an unknown field, one set from Python only, or an empty list of values. A float field
    given ``None`` among its values runs one program per value."""
    traced_fields, static_fields, refused = field_kinds(config_cls)
    name = config_cls.__name__
    traced, static = {}, {}
    for field, values in grid.items():
        if field in refused:
            raise SweepError(f"{name}.{field} cannot be swept: it {refused[field]}")
        if field not in traced_fields and field not in static_fields:
            known = ", ".join(sorted(traced_fields + static_fields))
            raise SweepError(f"{name} has no field {field!r} to sweep; its fields: {known}")
        values = tuple(values)
        if not values:
            raise SweepError(f"the grid gives {field} no values; give at least one")
        if len(set(map(repr, values))) != len(values):
            raise SweepError(f"the grid gives {field} a value twice ({list(values)}); drop one")
        floats = field in traced_fields and all(
            isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values
        )
        (traced if floats else static)[field] = values
    return traced, static


def combinations(grid: dict[str, tuple]) -> list[dict]:
    """Every combination of ``grid``'s values, the first field slowest (``itertools.product``)."""
    fields = list(grid)
    return [dict(zip(fields, values, strict=True)) for values in itertools.product(*grid.values())]


def point_configs(config, grid: dict[str, tuple]) -> list[Any]:
    """The validated config of every grid point (``dataclasses.replace`` runs the config's
    validator: :class:`~ajax.validation.ConfigError` names a refused value)."""
    return [dataclasses.replace(config, **values) for values in combinations(grid)]


def derived_by(config, traced: dict[str, tuple]) -> list[str]:
    """The traced fields whose value changes another field of the config when set (its
    validator derives something from it): they must run one program per value."""
    base = dataclasses.asdict(config)
    out = []
    for field, values in traced.items():
        for v in values:
            other = dataclasses.asdict(dataclasses.replace(config, **{field: v}))
            if any(other[k] != base[k] for k in base if k != field):
                out.append(field)
                break
    return out


# ----------------------------------------------------------------------------- the program


def with_values(config, values: dict[str, Any]):
    """``config`` with ``values`` set as they are (tracers), skipping its validator: the grid's
    concrete values were validated by :func:`point_configs`."""
    new = copy.copy(config)
    for field, value in values.items():
        object.__setattr__(new, field, value)
    return new


def weak_scalar(x: jax.Array) -> jax.Array:
    """``x`` as a weakly typed scalar, as a Python float is inside a program: it takes the
    dtype of what it meets (a bfloat16 activation stays bfloat16)."""
    from jax._src.lax.lax import _convert_element_type  # no public spelling of weak_type

    return _convert_element_type(x, weak_type=True)


class Swept(NamedTuple):
    """One run of a sweep: its state's leaves (or, before init, its key) and its traced values.

    The state travels as leaves: a state's static parts (a flax ``TrainState``'s optimizer)
    are built from the config, so a run's are made of its program's tracers and must not cross
    from one trace to the next. Each trace rebuilds them from its own (:func:`swept_chunks`)."""

    state: Any
    values: dict[str, jax.Array]


def swept_chunks(algo, total_steps: int) -> Chunks:
    """``algo``'s chunks over :class:`Swept` runs: ``init(Swept(key, values))`` and
    ``run_chunk(Swept(leaves, values))`` build the agent's functions inside the trace from
    ``algo.config`` with ``values`` set (:func:`with_values`), so each run of the batch trains
    with its own values. The state's structure, static parts included, comes from an init traced
    with those values (its ops unused, so compiled away). The chunk layout is ``algo``'s (the
    traced fields set no size)."""
    base = algo.make_chunks(total_steps)

    def chunks_at(values: dict) -> Chunks:
        at = copy.copy(algo)
        at.config = with_values(algo.config, {k: weak_scalar(v) for k, v in values.items()})
        return at.make_chunks(total_steps)

    def init(run: Swept) -> Swept:
        return Swept(jax.tree.leaves(chunks_at(run.values).init(run.state)), run.values)

    def run_chunk(run: Swept) -> tuple[Swept, dict]:
        chunks = chunks_at(run.values)
        structure = jax.tree.structure(chunks.init(jax.random.PRNGKey(0)))
        state, record = chunks.run_chunk(jax.tree.unflatten(structure, run.state))
        return Swept(jax.tree.leaves(state), run.values), record

    return Chunks(init, run_chunk, base.steps_per_chunk, base.n_chunks)


def state_structure(algo, total_steps: int):
    """The treedef of ``algo``'s state (a point's concrete config): what a run's leaves are
    rebuilt into, to save or return."""
    chunks = algo.make_chunks(total_steps)
    return jax.tree.structure(jax.eval_shape(chunks.init, jax.random.PRNGKey(0)))


class Group(NamedTuple):
    """The runs of one program: its algo (static values set), the traced values of each of its
    grid points, and the indices of those points in the whole grid."""

    algo: Any
    traced: list[dict]
    indices: list[int]


def groups(algo, order: Sequence[str], traced: dict, static: dict,
           make_algo: Callable[[Any], Any]) -> list[Group]:  # fmt: skip
    """The grid as programs: one per combination of static values (``make_algo(config)`` builds
    its algo), each batching every combination of traced values. Point indices follow
    :func:`combinations` of the whole grid, its fields in ``order`` (the grid's)."""
    whole = combinations({f: {**traced, **static}[f] for f in order})
    out = []
    for statics in combinations(static) if static else [{}]:
        config = dataclasses.replace(algo.config, **statics) if statics else algo.config
        at = make_algo(config) if statics else algo
        tr = combinations(traced) if traced else [{}]
        idx = [whole.index({**t, **statics}) for t in tr]
        out.append(Group(at, tr, idx))
    return out


def plan_group(algo, total_steps, seed, n_seeds, n_points, devices, parallel, batching):
    """:func:`~ajax.training.driver.plan` for ``n_points x n_seeds`` runs in one program (the
    replay memory check, the device and batching rules over the whole batch); its seeds are
    ``seed..seed + n_seeds - 1`` for each point."""
    try:
        p = driver.plan(algo, total_steps, seed, n_seeds * n_points, devices, parallel, batching)
    except ValueError as err:
        if n_points == 1:
            raise
        raise SweepError(
            f"{err} (the sweep runs {n_points} grid points x {n_seeds} seeds = "
            f"{n_points * n_seeds} runs in one program: fewer values of the traced fields or "
            "seeds also fit)"
        ) from err
    return p._replace(seeds=[seed + i for _ in range(n_points) for i in range(n_seeds)])


def start_group(group: Group, total_steps: int, p: driver.Plan) -> driver.Start:
    """The group's first state: one jitted init over its ``points x seeds`` runs."""
    chunks = swept_chunks(group.algo, total_steps)
    n_seeds = len(p.seeds) // len(group.traced)
    values = {
        k: jnp.repeat(jnp.asarray([t[k] for t in group.traced], jnp.float32), n_seeds)
        for k in group.traced[0]
    }
    runs = shard_seeds(Swept(seed_keys(p.seeds), values), p.mesh)
    with mesh_context(p.mesh):
        state = group.algo.jit(over_seeds(per_seed(chunks.init, p.batching), p.mesh))(runs)
    return driver.Start(chunks, None, state, chunks.steps_per_chunk, chunks.n_chunks)


def point_slice(tree, point: int, n_seeds: int):
    """Grid point ``point``'s seeds of a batch laid out ``points x seeds``."""
    return jax.tree.map(lambda x: x[point * n_seeds : (point + 1) * n_seeds], tree)


# ----------------------------------------------------------------------------- Python API


class SweepResult(NamedTuple):
    """A sweep's grid points (``points[g]``: field -> value), each point's final state (leaves
    ``[seeds, ...]``; a list, as each point's optimizer is its own) and the per-chunk metrics,
    ``[points, seeds, chunks]``."""

    points: list[dict]
    states: list
    metrics: dict


class Sweep(NamedTuple):
    """A validated sweep, nothing written yet: its point configs and its programs."""

    points: list[dict]
    configs: list[Any]
    traced: list[str]
    programs: list  # (Group, Plan)


def plan_sweep(algo, grid: dict, steps: int, seed: int, n_seeds: int, devices, parallel,
               batching: str, make_algo) -> Sweep:  # fmt: skip
    """Validate the whole sweep before anything is written (:class:`SweepError`,
    :class:`~ajax.validation.ConfigError`, or ``make_algo``'s errors for a point's config)."""
    if not algo.is_jax:
        raise SweepError(f"{algo.env_id!r} is a host env; a sweep batches its runs in one "
                         "jitted program and needs a JAX env")  # fmt: skip
    if parallel == "data":
        raise SweepError("--parallel data splits one run over devices; a sweep splits its "
                         "runs: use --parallel seeds")  # fmt: skip
    traced, static = split_grid(type(algo.config), grid)
    configs = point_configs(algo.config, {k: grid[k] for k in grid})
    for field in derived_by(algo.config, traced):
        static[field] = traced.pop(field)
    gs = groups(algo, list(grid), traced, static, make_algo)
    programs = [(g, plan_group(g.algo, steps, seed, n_seeds, len(g.traced), devices, parallel,
                               batching)) for g in gs]  # fmt: skip
    points = combinations({k: tuple(v) for k, v in grid.items()})
    return Sweep(points, configs, list(traced), programs)


def sweep_runs(algo, grid: dict[str, Sequence], total_steps: int, seed: int = 0,
               n_seeds: int = 1, devices: int | None = None,
               seed_batching: str = "vmap") -> SweepResult:  # fmt: skip
    """Train every point of ``grid`` (config field -> values) for ``n_seeds`` seeds each, the
    traced fields batched in one program per combination of static ones (module docstring).
    :class:`SweepError` or :class:`~ajax.validation.ConfigError` for a grid that cannot run."""
    sw = plan_sweep(algo, grid, total_steps, seed, n_seeds, devices, "seeds", seed_batching,
                    lambda c: rebuilt(algo, c))  # fmt: skip
    states: list = [None] * len(sw.points)
    metrics: list = [None] * len(sw.points)
    for g, p in sw.programs:
        state, records = driver.run(g.algo, start_group(g, total_steps, p), p, check=False)
        records = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), records)  # [runs, chunks]
        for j, (index, structure) in enumerate(
            zip(g.indices, point_structures(g, total_steps), strict=True)
        ):
            states[index] = jax.tree.unflatten(structure, point_slice(state.state, j, n_seeds))
            metrics[index] = point_slice(records, j, n_seeds)
    stack = lambda *xs: jnp.stack(xs)  # noqa: E731
    return SweepResult(sw.points, states, jax.tree.map(stack, *metrics))


def point_structures(group: Group, total_steps: int) -> list:
    """The state treedef of each of ``group``'s points (its concrete config): what the point's
    leaves are rebuilt into, to save or return."""
    return [state_structure(rebuilt(group.algo, with_values(group.algo.config, t)), total_steps)
            for t in group.traced]  # fmt: skip


def rebuilt(algo, config):
    """``algo`` with ``config`` (a static grid point): its class rebuilt on its env id (the
    config may set how the env is made, e.g. ``action_repeat``), or, on an env object, a copy."""
    if algo.env is algo.eval_env:  # built on an env object
        at = copy.copy(algo)
        at.config = config
        return at
    try:
        return type(algo)(env=algo.env_id, config=config, **algo.env_options)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise SweepError(str(err)) from err


def grid_size(grid: dict[str, Sequence]) -> int:
    return math.prod(len(v) for v in grid.values())
