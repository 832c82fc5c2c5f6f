"""The run options of ``ajax train`` and ``ajax resume`` (besides an agent's config fields):
where a run goes (devices, layout, processes) and what it trains on."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from ajax.cli_flags import UsageError


@dataclasses.dataclass(frozen=True)
class PlacementArgs:
    """Where a run goes (``ajax train`` and ``ajax resume``): devices, layout and processes.

    Attributes:
        devices: devices to spread the run over (default: 1; a multi-process run: all).
        parallel: "seeds" splits the vmapped seeds over the devices; "data" splits one run's
            env and update batches (replay agents).
        seed_batching: "vmap" batches the seeds in one program; "map" runs them one after
            another, each bitwise the seed trained alone on any device layout (JAX envs).
        coordinator: HOST:PORT of process 0 of a multi-process run (or JAX_COORDINATOR_ADDRESS).
        num_processes: processes of the run (or JAX_NUM_PROCESSES).
        process_id: this process (or JAX_PROCESS_ID).
        coordinator_timeout: seconds to wait for the coordinator and every process.
    """

    devices: int | None = None
    parallel: Literal["seeds", "data"] = "seeds"
    seed_batching: Literal["vmap", "map"] = "vmap"
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    coordinator_timeout: int = 60

    def connect(self) -> int:
        """Join the other processes (before JAX computes anything); returns the devices to
        use: --devices, else every process's devices in a multi-process run, else 1."""
        import jax

        from ajax.training.distributed import DistributedError, Processes, connect

        try:
            processes = Processes.from_env(
                coordinator=self.coordinator,
                num_processes=self.num_processes,
                process_id=self.process_id,
                timeout=self.coordinator_timeout,
            )
            connect(processes)
        except (ValueError, DistributedError) as err:
            raise UsageError(str(err)) from err
        if self.devices is not None:
            return self.devices
        return jax.device_count() if processes.num_processes > 1 else 1


@dataclasses.dataclass(frozen=True)
class ResumeArgs(PlacementArgs):
    """Options of ``ajax resume DIR``."""

    ignore_version: bool = False


@dataclasses.dataclass(frozen=True)
class TrainArgs(PlacementArgs):
    """Options of ``ajax train`` other than the agent's config fields.

    ``multitask`` with ``dataset`` (and optionally ``task_set``) trains TD-MPC2 offline on a
    dataset's tasks (:class:`~ajax.agents.tdmpc2.multitask.MultitaskTDMPC2`) instead of on
    ``env``; ``steps`` then counts updates. ``preset`` names the tuned settings to start from
    (:mod:`ajax.presets`; None: the default for the agent and env, "none": the plain defaults).
    """

    env: str = "Pendulum-v1"
    steps: int = 20_000
    seed: int = 0
    n_seeds: int = 1
    out: str | None = None
    overwrite: bool = False
    checkpoint_every: int = 5
    progress: bool = True
    wandb_project: str | None = None
    pixels: bool = False
    proprio: bool = False
    frame_stack: int = 1
    resize: int | None = None
    grayscale: bool = False
    multitask: bool = False
    dataset: str | None = None
    task_set: str | None = None
    preset: str | None = None

    def env_options(self) -> dict:
        """The image options given (:meth:`image_options`), or a multi-task run's ``dataset``
        and ``task_set``, as run.json records them."""
        if self.multitask:
            return {"dataset": self.dataset} | (
                {"task_set": self.task_set} if self.task_set else {}
            )
        return self.image_options()

    def image_options(self) -> dict:
        """make_env's ``pixels``, ``proprio``, ``frame_stack``, ``resize`` and ``grayscale``
        as given; defaults are left out."""
        options = {"pixels": self.pixels, "proprio": self.proprio,
                   "frame_stack": self.frame_stack,
                   "resize": None if self.resize is None else [self.resize, self.resize],
                   "grayscale": self.grayscale}  # fmt: skip
        default = {"pixels": False, "proprio": False, "frame_stack": 1, "resize": None,
                   "grayscale": False}  # fmt: skip
        return {k: v for k, v in options.items() if v != default[k]}


def check_multitask(args: TrainArgs, agent: str, env_given: bool) -> None:
    """``--multitask`` needs ``--dataset`` and an agent with an offline multi-task variant
    (its class's ``multitask``), and excludes ``--env`` and the image options;
    ``--dataset``/``--task-set`` need ``--multitask``. UsageError names the fix."""
    if not args.multitask:
        if args.dataset is not None or args.task_set is not None:
            raise UsageError(
                "--dataset and --task-set are for offline multi-task runs: add --multitask"
            )
        return
    from ajax import agents

    if agents.get(agent).multitask is None:
        owners = agents.where(lambda cls: cls.multitask is not None)
        raise UsageError(f"--multitask trains {owners} offline; {agent} has no multi-task mode")
    if args.dataset is None:
        raise UsageError("--multitask needs --dataset DIR (a dataset from 'ajax collect')")
    if env_given or args.image_options():
        raise UsageError(
            "--multitask takes its tasks and envs from --dataset: drop --env and the image options"
        )


def split_positional(argv: list[str], cls) -> tuple[list[str], list[str]]:
    """``(positional arguments, option tokens)`` of ``argv``, options anywhere: an option takes
    the next token as its value unless it is one of ``cls``'s boolean switches or says
    ``--name=value``."""
    switches = set()
    for f in dataclasses.fields(cls):
        if f.type in (bool, "bool"):
            name = f.name.replace("_", "-")
            switches |= {f"--{name}", f"--no-{name}"}
    positional, flags, i = [], [], 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("-"):
            takes_value = tok.startswith("--") and "=" not in tok and tok not in switches
            flags += argv[i : i + 1 + takes_value]
            i += 1 + takes_value
        else:
            positional.append(tok)
            i += 1
    return positional, flags


@dataclasses.dataclass(frozen=True)
class CollectArgs:
    """Options of ``ajax collect RUN``.

    Attributes:
        out: the dataset directory to add the task to (created if missing).
        task: the task's name in the dataset (default: the run's env id).
        replay: write the run's whole replay buffer, cut into episodes, instead of new
            episodes of its policy (off-policy agents).
        episodes: episodes of the policy to write.
        noise: the last episode's action-noise std; episode i of E uses noise * i / (E - 1).
        seed: PRNG seed of the policy's episodes.
    """

    out: str | None = None
    task: str | None = None
    replay: bool = False
    episodes: int = 50
    noise: float = 1.0
    seed: int = 0

    POLICY_FLAGS: ClassVar[tuple[str, ...]] = ("--episodes", "--noise", "--seed")

    def check(self, flags: list[str]) -> None:
        """UsageError naming the fix for a missing ``--out``, a bad count or noise, or policy
        options (``flags``: the tokens given) with ``--replay``."""
        if self.out is None:
            raise UsageError("ajax collect needs --out DIR, the dataset to write the episodes into")
        given = [f for f in self.POLICY_FLAGS
                 if any(tok == f or tok.startswith(f + "=") for tok in flags)]  # fmt: skip
        if self.replay and given:
            raise UsageError(f"--replay writes the run's replay as it is: drop {', '.join(given)}")
        if self.episodes < 1 or not 0.0 <= self.noise <= 2.0:
            raise UsageError(
                f"--episodes must be >= 1 and --noise in [0, 2], got {self.episodes}, {self.noise}"
            )


def check_agent_only(agent: str, tokens: list[str]) -> None:
    """UsageError naming the fix for a flag that another agent's config declares its own
    (``OWN_FLAGS``) and this agent's config lacks."""
    from ajax import agents

    mine = {f.name for f in dataclasses.fields(agents.get(agent).config_cls)}
    owners = {flag: (name, what) for name, cls in agents.available().items()
              for flag, what in getattr(cls.config_cls, "OWN_FLAGS", {}).items()}  # fmt: skip
    for tok in tokens:
        name = tok[2:].split("=", 1)[0].replace("-", "_") if tok.startswith("--") else ""
        if name in owners and name not in mine:
            owner, what = owners[name]
            flag = tok.split("=", 1)[0]
            raise UsageError(f"{flag} is a {owner} option ({what}); {agent} has none: drop {flag}")


def flag_value(tokens: list[str], flag: str) -> str | None:
    """The value given to ``flag`` in ``tokens`` (``--flag V`` or ``--flag=V``), else None."""
    for i, tok in enumerate(tokens):
        if tok.startswith(flag + "="):
            return tok.split("=", 1)[1]
        if tok == flag and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            return tokens[i + 1]
    return None


def protocol_steps(args: TrainArgs, own_args: list[str], protocol) -> TrainArgs:
    """``args`` with a protocol's run length (configs.yaml ``run.steps``) unless ``--steps``
    was given."""
    given = flag_value(own_args, "--steps") is not None
    if protocol is None or protocol.steps is None or given:
        return args
    return dataclasses.replace(args, steps=protocol.steps)
