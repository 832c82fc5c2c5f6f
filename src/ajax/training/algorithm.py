"""The Python API every agent shares: ``Agent(env=..., config=...).train(seed, total_steps)``.

An algorithm binds a config to an environment and exposes the run as pure functions
(:meth:`Algorithm.make_chunks`); :meth:`Algorithm.make_train` closes them into
``train(key) -> (state, records)``, one ``jax.jit``-able function that vmaps over seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from ajax.environments import is_jax_env, make_env
from ajax.training import driver
from ajax.training.driver import Chunks, segment_fn
from ajax.training.loop import Policy, evaluate, stateless
from ajax.training.memory import check_replay_fits, device_bytes, host_bytes
from ajax.training.sharding import device_mesh


class TrainResult(NamedTuple):
    """Final state (leading seed axis when ``n_seeds > 1``) and per-chunk metrics
    (arrays ``[n_chunks]`` or ``[n_seeds, n_chunks]``)."""

    state: Any
    metrics: dict


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
    # every command calls ajax.host_memory.keep_host_buffers before building it: for agents
    # whose large per-call temporaries glibc would unmap and fault in again
    keeps_host_buffers: ClassVar[bool] = False

    def __init__(self, env: Any = "Pendulum-v1", config: Any = None, **env_options):
        config, env_options = self.auto_config(env, config, env_options)
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

    @classmethod
    def auto_config(cls, env: Any, config: Any, env_options: dict) -> tuple[Any, dict]:
        """``(config, env_options)``: for ``config="auto"`` the default preset's for the env id
        (:mod:`ajax.presets`; the plain defaults where there is none) and its env options under
        the ones given; otherwise as given."""
        if not (isinstance(config, str) and config == "auto"):
            return config, env_options
        from ajax import presets

        return presets.auto(cls, env, env_options)

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

    def first_update(self) -> tuple[int, str] | None:
        """The env step (all envs) of the run's first update and the setting that puts it
        there, for the run's note when ``--steps`` ends before it; None when updates start at
        once (the rollout agents)."""
        return None

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
        with :meth:`jit` to round as :meth:`train`). ValueError for a ``total_steps`` that is
        not a positive int32 (:func:`~ajax.training.driver.check_steps`)."""
        driver.check_steps(total_steps)
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
        p = driver.plan(self, total_steps, seed, n_seeds, devices, parallel, seed_batching)
        start = driver.start(self, total_steps, p)
        state, records = driver.run(self, start, p, on_record=on_record, check=False)
        records = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), records)  # [seeds, chunks]
        if n_seeds == 1:
            state = jax.tree.map(lambda x: x[0], state)
            records = jax.tree.map(lambda x: x[0], records)
        return TrainResult(state, records)

    def sweep(self, grid: dict, n_seeds: int = 1, seed: int = 0, total_steps: int = 20_000,
              devices: int | None = None, seed_batching: str = "vmap"):  # fmt: skip
        """Train every point of ``grid`` (config field -> list of values) for ``n_seeds`` seeds:
        the float fields batched with the seeds in one program, the others one program per
        value (:mod:`ajax.training.sweep`). Returns a
        :class:`~ajax.training.sweep.SweepResult`: ``points``, each point's final ``states``
        and ``metrics`` ``[points, seeds, chunks]``. E.g. ``SAC("Pendulum-v1").sweep(
        {"learning_rate": [1e-4, 3e-4, 1e-3]}, n_seeds=4)``."""
        from ajax.training.sweep import sweep_runs

        return sweep_runs(self, grid, total_steps, seed, n_seeds, devices, seed_batching)


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
