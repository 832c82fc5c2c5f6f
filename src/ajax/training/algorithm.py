"""The Python API every agent shares: ``Agent(env=..., config=...).train(seed, total_steps)``.

An algorithm binds a config to an environment and exposes the run as pure functions
(:meth:`Algorithm.make_chunks`); :meth:`Algorithm.make_train` closes them into
``train(key) -> (state, records)``, one ``jax.jit``-able function that vmaps over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from ajax.environments import is_jax_env, make_env
from ajax.training.distributed import to_host
from ajax.training.loop import Policy, evaluate, stateless
from ajax.training.memory import check_replay_fits, device_bytes, host_bytes
from ajax.training.sharding import (
    CHUNKS_THEN_SEEDS,
    SEEDS,
    check_batching,
    device_mesh,
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


def seed_keys(seeds) -> jax.Array:
    """The PRNG keys of the seeds ``seeds`` (a list or a range), one per seed: the one place a
    run turns seeds into keys."""
    return jax.vmap(jax.random.PRNGKey)(jnp.asarray(list(seeds)))


class TrainResult(NamedTuple):
    """Final state (leading seed axis when ``n_seeds > 1``) and per-chunk metrics
    (arrays ``[n_chunks]`` or ``[n_seeds, n_chunks]``)."""

    state: Any
    metrics: dict


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


def seeds_segment(run_chunk, num_chunks: int, on_record=None, mesh=None, prepare=None,
                  batching: str = "vmap", compiler_options: dict | None = None):  # fmt: skip
    """The jitted :func:`segment_fn` over every seed, sharded over ``mesh`` when given
    (:func:`~ajax.training.sharding.over_seeds`); ``prepare`` maps the input first (e.g. the
    vmapped init from keys); ``compiler_options`` go to XLA (``Algorithm.compiler_options``).
    Returns a host callable ``x -> (states, records)``. Records reach
    ``on_record`` by callback as the run goes, or, sharded, once the segment returns: a
    callback inside ``shard_map`` would see one device's block of seeds only (and an ordered
    callback is refused in a program partitioned over several devices)."""
    segment = segment_fn(run_chunk, num_chunks, on_record if mesh is None else None, batching)
    body = segment if prepare is None else (lambda x: segment(prepare(x)))
    jitted = jax.jit(
        over_seeds(body, mesh, (SEEDS, CHUNKS_THEN_SEEDS)), compiler_options=compiler_options
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


class Algorithm:
    """Base of the agents' public classes; subclasses set the class variables and
    :meth:`make_chunks`."""

    name: ClassVar[str]
    config_cls: ClassVar[type]
    continuous: ClassVar[bool] = True
    discrete: ClassVar[bool] = False
    images: ClassVar[bool] = False  # has an image encoder (else image envs are refused)
    mixed: ClassVar[bool] = False  # reads an image with vector features (spec.mixed)
    # runs on the shared replay loop, whose env and update batches split over devices
    data_parallel: ClassVar[bool] = False
    # its config's replay_on can keep the replay rows in host memory (ajax.buffers.host_store)
    host_replay: ClassVar[bool] = False
    # "module:Class" of its offline multi-task variant (``ajax train --multitask``), if any
    multitask: ClassVar[str | None] = None
    # XLA options for every program of a run (JAX run, host loop, eval; see :meth:`jit`), e.g.
    # sharding.SAME_ON_ANY_LAYOUT
    compiler_options: ClassVar[dict | None] = None

    def __init__(self, env: Any = "Pendulum-v1", config: Any = None, **env_options):
        self.config = self.config_cls() if config is None else config
        if not isinstance(self.config, self.config_cls):
            raise TypeError(
                f"{self.name} needs a {self.config_cls.__name__}, got {type(self.config).__name__}"
            )
        repeat = self.config.action_repeat
        if repeat != 1:  # an env option, so host simulators repeat (and stop) themselves
            if not isinstance(env, str):
                raise ValueError("action_repeat applies to an env id; wrap an env object yourself")
            env_options = {"action_repeat": repeat, **env_options}
        self.env_options = env_options
        if isinstance(env, str):
            self.env_id = env
            self.env = make_env(env, **env_options)
            self.eval_env = make_env(env, **env_options)
        elif not hasattr(env, "spec") or not hasattr(env, "is_jax"):
            raise TypeError(
                f"env must be an env id such as 'Pendulum-v1' or an env from ajax.make_env, "
                f"got {type(env).__name__} {env!r}"
            )
        else:  # a prebuilt env object (e.g. a probe env); evaluation uses the same pure functions
            if env_options:
                raise ValueError("env options only apply to an env id, not to an env object")
            self.env_id = env.spec.env_id
            self.env = self.eval_env = env
        self.is_jax = is_jax_env(self.env)
        check_action_space(self, not self.env.spec.discrete, env)
        check_observations(self, self.env_id)

    def make_chunks(self, total_steps: int) -> Chunks:
        raise NotImplementedError

    def jit(self, fn, **kwargs):
        """``jax.jit`` with this agent's :attr:`compiler_options`: every program of a run (host
        loop steps, ``ajax eval``, video, collect) compiles through it, so all round alike."""
        return jax.jit(fn, compiler_options=self.compiler_options, **kwargs)

    def host_run(self, total_steps: int, seeds: list[int]):
        """A :class:`~ajax.training.host_loop.HostRun` for a host (non-JAX) env."""
        raise NotImplementedError

    def replay_bytes(self, total_steps: int) -> tuple[int, int]:
        """Bytes of one seed's replay for a run of ``total_steps``, on the device and in host
        memory (``--replay-on host``); zeros: not checked."""
        return 0, 0

    def replay_nbytes(self, total_steps: int) -> int:
        """Bytes of one seed's replay for a run of ``total_steps``, wherever it lives."""
        return sum(self.replay_bytes(total_steps))

    @property
    def replay_on_host(self) -> bool:
        """Whether the run keeps its replay rows in host memory (``--replay-on host``)."""
        return getattr(self.config, "replay_on", "device") == "host"

    def check_memory(
        self, total_steps: int, n_seeds: int, devices: int | None = None, parallel: str = "seeds"
    ) -> None:
        """Refuse (``ValueError`` naming the fix) a run whose replays cannot fit on the device.

        Forced CPU devices share the host's memory, so on the CPU every seed counts; so it does
        in the data layout, where every device holds the whole (replicated) replay. Host rows
        (``--replay-on host``) count against the host's memory, every seed's."""
        on_device, on_host = self.replay_bytes(total_steps)
        if not on_device + on_host:
            return
        available, where = device_bytes()
        cpu = jax.devices()[0].platform == "cpu"
        if cpu:  # one memory holds both parts
            on_device, on_host = on_device + on_host, 0
        per_device = n_seeds if cpu or parallel == "data" else -(-n_seeds // (devices or 1))
        host_fix = self.host_replay and not cpu and not self.replay_on_host
        also = ", or keep its rows in host memory with --replay-on host" if host_fix else ""
        check_replay_fits(on_device, per_device, available, where, also)
        if on_host:
            check_replay_fits(on_host, n_seeds, host_bytes(), "the host")

    def mesh(self, devices: int | None, n_seeds: int, parallel: str = "seeds"):
        """The device mesh of a run (:mod:`ajax.training.sharding`), or None for one device.
        The data layout needs an agent on the shared replay loop and an update batch (and more
        than one env, if any) that divides over the devices; ValueError names the fix."""
        if parallel == "data" and isinstance(devices, int) and devices > 1:
            self._check_data_split(devices)
        if self.replay_on_host and ((devices or 1) > 1 or jax.process_count() > 1):
            raise ValueError(
                "--replay-on host keeps each seed's replay rows in this process's memory and "
                "runs on one device; drop --devices (and the multi-process flags) or use "
                "--replay-on device"
            )
        return device_mesh(devices, n_seeds, self.is_jax, parallel)

    def _check_data_split(self, devices: int) -> None:
        if not self.data_parallel:
            raise ValueError(
                f"{self.name} has no data-parallel layout (it is for the replay agents: "
                f"{_agents_where(lambda cls: cls.data_parallel)}); use --parallel seeds"
            )
        c = self.config
        if c.batch_size % devices:
            raise ValueError(
                f"--batch-size {c.batch_size} does not divide over --devices {devices} "
                f"(--parallel data splits the update batch); pick a multiple of {devices}"
            )
        if c.n_envs > 1 and c.n_envs % devices:
            raise ValueError(
                f"--n-envs {c.n_envs} does not divide over --devices {devices} (--parallel "
                f"data splits the env batch); pick 1 or a multiple of {devices}"
            )

    def agent_act(self) -> Callable:
        """``act(agent_state, obs, key, deterministic) -> action`` of a policy without carry."""
        raise NotImplementedError

    def policy(self) -> Policy:
        """The acting :class:`~ajax.training.loop.Policy` (evaluation, ``ajax eval``); agents
        whose policy carries state (a planner, a recurrent latent) override it."""
        return stateless(self.agent_act())

    def evaluate(self, agent_state, env_state, key: jax.Array, episodes: int) -> jax.Array:
        """Mean return of ``episodes`` deterministic episodes of one seed's ``agent_state``
        (``ajax eval``); ``env_state`` is the training env's (its observation moments)."""
        return evaluate(self.eval_env, self.policy(), agent_state, key, episodes, env_state)

    def make_train(self, total_steps: int, on_record=None) -> Callable[[jax.Array], tuple]:
        """``train(key) -> (state, records)`` for one seed; jit and vmap it as you like (jit it
        with :meth:`jit` to round as :meth:`train`)."""
        chunks = self.make_chunks(total_steps)
        segment = segment_fn(chunks.run_chunk, chunks.n_chunks, on_record)

        def train(key):
            states, records = segment(jax.tree.map(lambda x: x[None], chunks.init(key)))
            return jax.tree.map(lambda x: x[0], states), jax.tree.map(lambda x: x[:, 0], records)

        return train

    def train(
        self,
        seed: int = 0,
        total_steps: int = 20_000,
        n_seeds: int = 1,
        on_record=None,
        devices: int | None = None,
        parallel: str = "seeds",
        seed_batching: str = "vmap",
    ) -> TrainResult:
        """Train ``n_seeds`` seeds (vmapped) from ``seed`` for ``total_steps`` env steps each;
        ``devices`` spreads the run over that many devices, by seed (``parallel="seeds"``) or
        by env and update batch (``"data"``; :mod:`ajax.training.sharding`).
        ``seed_batching="map"`` runs the seeds one after another instead of vmapped, so that
        each is bitwise the seed trained alone (:func:`~ajax.training.sharding.per_seed`)."""
        check_steps(total_steps)
        check_seeds(seed, n_seeds)
        check_batching(seed_batching, self.is_jax)
        self.check_memory(total_steps, n_seeds, devices, parallel)
        mesh = self.mesh(devices, n_seeds, parallel)
        if not self.is_jax:
            return self._train_host(seed, total_steps, n_seeds, on_record)
        chunks = self.make_chunks(total_steps)
        keys = seed_keys(range(seed, seed + n_seeds))
        run = seeds_segment(chunks.run_chunk, chunks.n_chunks, on_record, mesh,
                            prepare=per_seed(chunks.init, seed_batching), batching=seed_batching,
                            compiler_options=self.compiler_options)  # fmt: skip
        states, records = run(shard_seeds(keys, mesh))
        states = to_host(states)  # whole on every process of a multi-process run
        records = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), records)  # [seeds, chunks]
        if n_seeds == 1:
            states = jax.tree.map(lambda x: x[0], states)
            records = jax.tree.map(lambda x: x[0], records)
        return TrainResult(states, records)

    def _train_host(self, seed, total_steps, n_seeds, on_record) -> TrainResult:
        run = self.host_run(total_steps, list(range(seed, seed + n_seeds)))
        n_chunks = n_chunks_for(total_steps, run.steps_per_chunk)
        records = []
        try:
            for _ in range(n_chunks):
                records.append(run.run_chunk())
                if on_record is not None:
                    on_record(records[-1])
        finally:
            run.close()
        stacked = jax.tree.map(lambda *x: jnp.stack(x, axis=1), *records)  # [seeds, chunks]
        state = run.state
        if n_seeds == 1:
            state = jax.tree.map(lambda x: x[0], state)
            stacked = jax.tree.map(lambda x: x[0], stacked)
        return TrainResult(state, stacked)


def n_chunks_for(total_steps: int, steps_per_chunk: int) -> int:
    return max(1, math.ceil(total_steps / steps_per_chunk))


def check_observations(algo: Algorithm, env_id: str) -> None:
    """Image envs only for agents with an image encoder (a flat MLP over pixels is refused);
    an image with vector features only for agents that read both."""
    spec = algo.env.spec
    shape = spec.image_shape
    if shape is not None and not algo.images:
        raise ValueError(
            f"{algo.name} has no image encoder but {env_id!r} gives images {shape}: use "
            f"{_agents_where(lambda cls: cls.images)} on it, or a vector env (drop --pixels "
            "for dmc: ids)"
        )
    if spec.mixed and not algo.mixed:
        raise ValueError(
            f"{algo.name} reads image-only observations but {env_id!r} gives images {shape} "
            f"with {spec.vector_dim} vector features: drop --proprio, or use "
            f"{_agents_where(lambda cls: cls.mixed)}"
        )


def check_steps(total_steps: int) -> None:
    if not isinstance(total_steps, int) or total_steps <= 0:
        raise ValueError(f"total_steps must be a positive integer, got {total_steps!r}")


def check_seeds(seed: int, n_seeds: int) -> None:
    """Seeds are int32 PRNG seeds: ``n_seeds >= 1`` of them from ``seed >= 0``."""
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ValueError(f"n_seeds must be a positive integer, got {n_seeds!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**31 - n_seeds:
        raise ValueError(f"seed must be an integer in [0, 2**31 - n_seeds], got {seed!r}")


def check_action_space(algo: Algorithm, continuous: bool, env_id: str) -> None:
    """Refuse a discrete env for a continuous-only agent and the reverse."""
    if continuous and not algo.continuous:
        raise ValueError(
            f"{algo.name} needs a discrete action space but {env_id!r} is continuous; "
            "pick a discrete env (e.g. CartPole-v1) or an agent that acts continuously "
            f"({_agents_where(lambda cls: cls.continuous)})"
        )
    if not continuous and not algo.discrete:
        raise ValueError(
            f"{algo.name} needs a continuous action space but {env_id!r} is discrete; "
            "pick a continuous env (e.g. Pendulum-v1) or an agent that acts discretely "
            f"({_agents_where(lambda cls: cls.discrete)})"
        )


def _agents_where(pred) -> str:
    """The registered agents whose class satisfies ``pred``, for the messages above (the
    registry, :mod:`ajax.agents`, is read only on this error path)."""
    from ajax.agents import where

    return where(pred)
