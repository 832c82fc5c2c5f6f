"""The options of the ``ajax`` commands besides an agent's config fields: where a run goes
(devices, layout, processes) and what it trains on; ``collect``'s and ``eval``'s; the limits
they are checked against (counts a jitted program can hold, optional packages, an output
directory that belongs to another run); and each command's usage and help."""

from __future__ import annotations

import dataclasses
from pathlib import Path
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

        check_count("--coordinator-timeout", self.coordinator_timeout, "seconds")
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

    def check_counts(self) -> None:
        """UsageError naming the flag of a count that is not positive or that the jitted
        program cannot hold (:func:`check_count`)."""
        check_count("--steps", self.steps, "env steps")
        check_count("--n-seeds", self.n_seeds, "seeds")
        check_count("--checkpoint-every", self.checkpoint_every, "chunks")
        check_count("--frame-stack", self.frame_stack, "frames")
        if self.resize is not None:
            check_count("--resize", self.resize, "pixels")

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
        """UsageError naming the fix for a missing ``--out``, a bad count, noise or seed, or
        policy options (``flags``: the tokens given) with ``--replay``."""
        if self.out is None:
            raise UsageError("ajax collect needs --out DIR, the dataset to write the episodes into")
        if self.task is not None and not self.task.strip():
            raise UsageError("--task is empty; name the task (e.g. --task pendulum), or drop "
                             "--task for the env's name")  # fmt: skip
        given = [f for f in self.POLICY_FLAGS
                 if any(tok == f or tok.startswith(f + "=") for tok in flags)]  # fmt: skip
        if self.replay and given:
            raise UsageError(f"--replay writes the run's replay as it is: drop {', '.join(given)}")
        from ajax.validation import INT32_MAX

        check_count("--episodes", self.episodes, "episodes")
        if not 0.0 <= self.noise <= 2.0:
            raise UsageError(f"--noise must be in [0, 2], got {self.noise}")
        if not 0 <= self.seed <= INT32_MAX:
            raise UsageError(
                f"--seed must be in [0, {INT32_MAX}] (an int32 PRNG seed), got {self.seed}"
            )


def check_agent_only(agent: str, tokens: list[str]) -> None:
    """UsageError naming the fix for a flag that another agent's config declares its own
    (``OWN_FLAGS``) and this agent's config lacks, or for ``--protocol`` given to an agent
    without official protocols (:func:`protocols_of`)."""
    from ajax import agents

    if flag_value(tokens, "--protocol") is not None or "--protocol" in tokens:
        if not protocols_of(agents.get(agent).config_cls):
            having = [n for n, cls in agents.available().items() if protocols_of(cls.config_cls)]
            raise UsageError(f"--protocol picks an official run protocol of {', '.join(having)}; "
                             f"{agent} has none: drop --protocol")  # fmt: skip
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


def protocols_of(config_cls) -> dict:
    """The official run protocols an agent's config class offers (``--protocol NAME``), by
    name; {} for none.

    The agent-level contract (nothing here names an agent): the config class has
    ``PROTOCOLS``, a dict of protocol objects, each with ``steps_for(env_id)`` (the run's env
    steps, None for "until stopped"), ``env_options`` (make_env options per env family) and
    ``source``; ``from_protocol(name, **overrides)``, the config a protocol gives (a
    ValueError naming the known ones for another name); and a ``protocol`` field recording the
    name in run.json."""
    return dict(getattr(config_cls, "PROTOCOLS", None) or {})


def protocol_of(agent: str, config_args: list[str]) -> tuple[str | None, object]:
    """``(name, protocol)`` of ``--protocol`` from the agent's config class
    (:func:`protocols_of`), or ``(None, None)``; UsageError naming the agent's protocols for an
    unknown name."""
    name = flag_value(config_args, "--protocol")
    if name is None:
        return None, None
    from ajax import agents

    config_cls = agents.get(agent).config_cls
    known = protocols_of(config_cls)
    if name not in known:
        try:  # the agent's own message: its protocols and where they come from
            config_cls.from_protocol(name)
        except ValueError as err:
            raise UsageError(str(err)) from err
        raise UsageError(f"unknown protocol {name!r}; {agent}'s protocols are "
                         f"{', '.join(known)}: pass one of them to --protocol")  # fmt: skip
    return name, known[name]


def protocol_steps(args: TrainArgs, own_args: list[str], protocol) -> TrainArgs:
    """``args`` with a protocol's run length on ``args.env`` (``steps_for``; a preset's
    ``steps``) unless ``--steps`` was given."""
    given = flag_value(own_args, "--steps") is not None
    if protocol is None or given:
        return args
    steps_for = getattr(protocol, "steps_for", None)
    steps = steps_for(args.env) if steps_for is not None else protocol.steps
    return args if steps is None else dataclasses.replace(args, steps=steps)


# ----------------------------------------------------------------------------- input limits


def check_count(flag: str, value: int, noun: str) -> None:
    """UsageError naming ``flag`` unless ``value`` is a positive count that the jitted program
    can hold: its step counters, indices and shapes are int32 (at most
    :data:`~ajax.validation.INT32_MAX`)."""
    from ajax.validation import INT32_MAX

    if value <= 0:
        raise UsageError(f"{flag} must be a positive number of {noun}, got {value}")
    if value > INT32_MAX:
        raise UsageError(
            f"{flag} {value} is past the int32 limit of {INT32_MAX} {noun} (a run's counts "
            f"are int32 in its jitted program); lower {flag}"
        )


def parse_eval(argv: list[str]) -> tuple[str, int, bool]:
    """``(run directory, episodes, video)`` of ``ajax eval DIR [--episodes N] [--video]``;
    UsageError for anything else, or a count the evaluation cannot hold."""
    video = "--video" in argv
    argv = [a for a in argv if a != "--video"]
    if len(argv) == 3 and argv[1] == "--episodes":
        try:
            episodes = int(argv[2])
        except ValueError:
            raise UsageError(f"--episodes needs a positive integer, got {argv[2]!r}") from None
    elif len(argv) == 1 and not argv[0].startswith("-"):
        episodes = 10
    else:
        raise UsageError(USAGE["eval"])
    check_count("--episodes", episodes, "episodes")
    return argv[0], episodes, video


# (module, pip command) of the optional packages a flag needs.
OPTIONAL = {
    "--wandb-project": ("wandb", "pip install wandb"),
    "--video": ("PIL", "pip install pillow"),
}


def check_optional(flags: list[str]) -> None:
    """UsageError with the pip command for a flag in ``flags`` whose optional package is not
    installed, before anything is written."""
    import importlib.util

    for flag, (module, pip) in OPTIONAL.items():
        if any(tok == flag or tok.startswith(flag + "=") for tok in flags):
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise UsageError(f"{flag} needs {module}, which is not installed: '{pip}', or "
                                 f"drop {flag}")  # fmt: skip


def check_out_given(out: str | None, fix: str) -> None:
    """UsageError for an ``--out ""`` (an unset shell variable, say): it would name the current
    directory (``collect``) or fall back to the default directory (``train``, ``sweep``)."""
    if out is not None and not out.strip():
        raise UsageError(f"--out is empty; {fix}")


def check_dataset_out(out: Path) -> None:
    """UsageError for a ``collect --out`` that is a run directory or inside one (the
    dataset would mix with the run's files), or inside another dataset (``--out`` that is a
    dataset adds the task to it)."""
    from ajax.training.run_dir import DATASET_INDEX, enclosing_dataset, enclosing_run

    outer = enclosing_dataset(out, itself=False)
    if outer is not None:
        raise UsageError(
            f"--out {out} is inside the dataset directory {outer} (it holds {DATASET_INDEX}); "
            f"collect into {outer} itself to add a task to it, or pick an --out outside it"
        )
    found = enclosing_run(out, itself=True)
    if found is not None:
        run, marker = found
        where = (
            "is a run directory" if run == out.resolve() else f"is inside the run directory {run}"
        )
        raise UsageError(
            f"--out {out} {where} (it holds {marker}); a dataset there would mix with the run's "
            "files: pick an --out outside it"
        )


# ----------------------------------------------------------------------------- usage and help

USAGE = {
    "resume": "usage: ajax resume DIR [--devices D] [--parallel seeds|data] "
    "[--seed-batching vmap|map] [--ignore-version]",
    "eval": "usage: ajax eval DIR [--episodes N] [--video]",
    "check": "usage: ajax check DIR",
    "collect": "usage: ajax collect RUN --out DIR [--task NAME] [--replay | --episodes N "
    "[--noise S] [--seed K]]",
    "envs": "usage: ajax envs",
    "agents": "usage: ajax agents",
}
WHAT = {
    "resume": "continue the run in DIR from its newest good checkpoint",
    "eval": "score the newest checkpoint of the run in DIR (N episodes per seed; --video writes "
    "DIR/eval.gif of one)",
    "check": "report the run's checkpoints and metrics; exit 1 when it needs care",
    "collect": "write episodes of the trained run RUN into the dataset DIR",
    "envs": "list the environments and whether each is available here",
    "agents": "list the agents and the action spaces and observations each takes",
}


def help_text(cmd: str, argv: list[str]) -> str | None:
    """The help of ``ajax CMD`` when ``argv`` asks for it (``-h``/``--help``), else None."""
    if cmd not in USAGE or not any(a in ("-h", "--help") for a in argv):
        return None
    return f"{USAGE[cmd]}\n\n{WHAT[cmd]}"


def check_no_args(cmd: str, argv: list[str]) -> None:
    """UsageError for any argument of a listing command (``envs``, ``agents``): it takes none."""
    if argv:
        kind = "option" if argv[0].startswith("-") else "argument"
        raise UsageError(f"unknown {kind} {argv[0]!r} of ajax {cmd}; {USAGE[cmd]} (no options)")
