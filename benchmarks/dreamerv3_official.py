"""The official DreamerV3 (danijar/dreamerv3) on CPU, run by ``dreamerv3_speed.py`` and
``dreamerv3_vs_official.py``.

This script runs in the official code's own interpreter (jax 0.4.33, elements, ninjax, portal,
gymnasium; see ../shared/reference/README.md), never in Ajax's, and it never edits the
official tree: ``--repo DIR`` goes on ``sys.path`` as it is (read-only is fine). At module level
it imports the standard library only, so Ajax's tests can import it for its flags, its
gymnasium adapter and its output parsing without the official interpreter.

Subcommands (each prints one JSON line per measurement on stdout, every line that starts with
``{``; the official code's own prints go to stderr):

- ``speed``: builds ``dreamerv3.agent.Agent`` from ``configs.yaml`` (``defaults`` + the size
  preset, ``jax.platform cpu``, ``jax.compute_dtype`` as asked, its logdir a temporary folder,
  its profiler off) on a vector task (``--obs-dim`` floats, ``--action-dim`` continuous actions
  or ``--discrete`` ones) and times (a) ``agent.train(carry, batch)`` on a random batch of
  ``batch_size x (batch_length + replay_context)`` rows built as ``embodied/jax/agent.py``
  builds its own (``agent._zeros`` of every space, the ``seed`` key the stream adds), blocking
  on the new parameters; (b) ``agent.policy(carry, obs)`` at batch 1; (d) the build (parameter
  init, compilation of train and report: the ``Agent`` constructor) and the policy's first
  call (its compilation). Lines: ``{"kind": "train", ...}``, ``{"kind": "policy", ...}``.
- ``run``: one whole run of the official ``embodied.run.train`` driver (``run.debug`` on, as
  in configs.yaml: envs stepped in this process) on a gymnasium task through
  :class:`GymnasiumEnv`, wrapped as ``dreamerv3/main.py`` wraps every env (``wrap_env``), with
  ``main.make_agent``, ``make_replay``, ``make_stream`` and ``make_logger`` as ``main.main``
  calls them (logger outputs ``jsonl`` only). It records (c) env steps/s from the first train
  call to the end, the build time (start to the first env step) and every episode's score,
  both from the adapter and from the logger's own ``scores.jsonl`` (``episode/score``), which
  must agree. Line: ``{"kind": "run", ...}``; ``--out PATH`` writes the same JSON to a file.

Settings left at configs.yaml's ``defaults`` unless a flag names them: replay (uniform, online,
5e6), report every 300 s and checkpoint every 900 s (into the temporary logdir), LaProp, the
losses. Set differently, and why: ``jax.platform cpu`` (the default is cuda),
``jax.profiler`` off (on by default it traces updates 100-120 into the logdir, which would
land in the timed window), ``logger.outputs [jsonl]`` (the default adds ``scope``, a second
writer of the same metrics), ``run.usage.nvsmi`` off (no GPU); for ``run`` also
``report_length`` min(32, batch_length) (the report stream cuts its rows from the train
replay's windows of batch_length + 1 rows, so configs.yaml's 32 fails an assertion in
``embodied/core/streams.py`` below batch length 32).

No file of the official tree is edited, here or in a copy. What ``run`` does at run time,
in this process only: ``dreamerv3.main.make_env`` is replaced by a function that builds
:class:`GymnasiumEnv` and wraps it with the official ``main.wrap_env`` (``main.make_agent``
reads the spaces from ``make_env(config, 0)``), and the agent's ``train`` method is wrapped on
the instance to note the time and env step of the first update and count the updates.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

SIZES = ("1m", "12m", "25m", "50m", "100m", "200m", "400m")
DTYPES = ("float32", "bfloat16")


# ----------------------------------------------------------------------------- the adapter


class GymnasiumEnv:
    """A gymnasium env behind the official ``embodied.Env`` interface (a sibling of the
    official ``embodied/envs/from_gym.py``, which targets the old ``gym`` API).

    ``obs_space``: ``{"vector": float32 (D,), "reward", "is_first", "is_last",
    "is_terminal"}``; ``act_space``: ``{"action": int32 () in [0, n) or float32 box, "reset":
    bool}``. ``step(action)`` resets when asked (``reset``) or after an episode's last step and
    returns the first observation (reward 0, ``is_first``); otherwise it steps, with
    ``is_last`` = terminated or truncated and ``is_terminal`` = terminated. The first reset is
    seeded with ``seed``.

    Each finished episode is appended to ``episodes`` (when given) as ``[step, score, length,
    index]``, where ``step`` is the driver's env-step count at which the official logger
    records that episode's ``episode/score``: ``step_fn()`` (the count before this lockstep
    batch of the sequential driver) plus ``index + 1``.
    """

    def __init__(self, task: str, index: int = 0, seed: int | None = None, step_fn=None,
                 episodes: list | None = None):  # fmt: skip
        import gymnasium as gym

        self._env = gym.make(task)
        self._index, self._seed = index, seed
        self._step_fn, self._episodes = step_fn, episodes
        self._discrete = hasattr(self._env.action_space, "n")
        self._done, self._return, self._length = True, 0.0, 0

    @property
    def obs_space(self):
        import elements
        import numpy as np

        shape = tuple(self._env.observation_space.shape)
        return {
            "vector": elements.Space(np.float32, shape),
            "reward": elements.Space(np.float32),
            "is_first": elements.Space(bool),
            "is_last": elements.Space(bool),
            "is_terminal": elements.Space(bool),
        }

    @property
    def act_space(self):
        import elements
        import numpy as np

        space = self._env.action_space
        if self._discrete:
            action = elements.Space(np.int32, (), 0, int(space.n))
        else:
            action = elements.Space(np.float32, tuple(space.shape), space.low, space.high)
        return {"action": action, "reset": elements.Space(bool)}

    def step(self, action):
        import numpy as np

        if action["reset"] or self._done:
            obs, _ = self._env.reset(seed=self._seed)
            self._seed = None  # seeded once; later episodes follow the env's own generator
            self._done, self._return, self._length = False, 0.0, 0
            return self._obs(obs, 0.0, is_first=True)
        act = action["action"]
        act = int(act) if self._discrete else np.asarray(act, np.float32)
        obs, reward, terminated, truncated, _ = self._env.step(act)
        self._done = bool(terminated or truncated)
        self._return += float(reward)
        self._length += 1
        if self._done and self._episodes is not None:
            step = (self._step_fn() if self._step_fn else 0) + self._index + 1
            self._episodes.append([step, self._return, self._length, self._index])
        return self._obs(obs, reward, is_last=self._done, is_terminal=bool(terminated))

    def _obs(self, obs, reward, is_first=False, is_last=False, is_terminal=False):
        import numpy as np

        return {
            "vector": np.asarray(obs, np.float32),
            "reward": np.float32(reward),
            "is_first": is_first,
            "is_last": is_last,
            "is_terminal": is_terminal,
        }

    def close(self):
        self._env.close()


# ----------------------------------------------------------------------------- official setup


def load_official(repo: Path):
    """Put ``repo`` on ``sys.path`` and import the official modules (Agent, main, embodied)."""
    sys.path.insert(0, str(repo))
    import dreamerv3.main as main  # noqa: F401  (main's own sys.path lines add repo again)
    from dreamerv3.agent import Agent

    return Agent, main


def official_config(repo: Path, size: str, dtype: str, logdir: str, **updates):
    """configs.yaml ``defaults`` + ``size<size>`` with the CPU settings the docstring lists."""
    import elements
    import ruamel.yaml as yaml

    configs = yaml.YAML(typ="safe").load((repo / "dreamerv3" / "configs.yaml").read_text())
    # jax.profiler is an Options field of embodied/jax/agent.py that configs.yaml leaves unset
    # (True); the key has to exist before elements.Config.update can set it.
    configs["defaults"]["jax"]["profiler"] = False
    config = elements.Config(configs["defaults"]).update(configs[f"size{size}"])
    return config.update({
        "logdir": logdir, "jax.platform": "cpu", "jax.compute_dtype": dtype,
        "jax.prealloc": False, "logger.outputs": ["jsonl"], "run.usage.nvsmi": False,
        **updates,
    })  # fmt: skip


def agent_config(config):
    """The config ``dreamerv3/main.py make_agent`` hands to ``Agent``."""
    import elements

    return elements.Config(
        **config.agent, logdir=config.logdir, seed=config.seed, jax=config.jax,
        batch_size=config.batch_size, batch_length=config.batch_length,
        replay_context=config.replay_context, report_length=config.report_length,
        replica=config.replica, replicas=config.replicas,
    )  # fmt: skip


def vector_spaces(obs_dim: int, action_dim: int, discrete: bool):
    """(obs_space, act_space) of a vector task, as an env's after ``main.wrap_env``."""
    import elements
    import numpy as np

    obs = {
        "vector": elements.Space(np.float32, (obs_dim,)),
        "reward": elements.Space(np.float32),
        "is_first": elements.Space(bool),
        "is_last": elements.Space(bool),
        "is_terminal": elements.Space(bool),
    }
    if discrete:
        act = {"action": elements.Space(np.int32, (), 0, action_dim)}
    else:
        act = {"action": elements.Space(np.float32, (action_dim,), -1.0, 1.0)}
    return obs, act


def random_batch(agent, obs_space, act_space, batch_size: int, rows: int, seed: int = 0):
    """``agent._zeros`` of every space (obs, act, the model's extras) over [B, rows], with
    random observations, actions and rewards and ``is_first`` on the first row."""
    import numpy as np

    rng = np.random.default_rng(seed)
    data = agent._zeros(agent.spaces, (batch_size, rows))
    for key, space in obs_space.items():
        if key not in ("reward", "is_first", "is_last", "is_terminal"):
            data[key] = rng.normal(size=data[key].shape).astype(space.dtype)
    for key, space in act_space.items():
        if space.discrete:
            data[key] = rng.integers(space.low, space.high, data[key].shape).astype(space.dtype)
        else:
            data[key] = rng.uniform(-1, 1, data[key].shape).astype(space.dtype)
    data["reward"] = rng.normal(size=data["reward"].shape).astype(np.float32)
    data["is_first"][:, 0] = True
    return data


def median_ms(fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    times.sort()
    return times[len(times) // 2]


# ----------------------------------------------------------------------------- speed


def bench_speed(args) -> list[dict]:
    """(a) train step, (b) policy step at batch 1, (d) build + compile of one size and dtype."""
    Agent, _ = load_official(args.repo)
    import jax
    import numpy as np
    from embodied.jax import internal

    rows = []
    with tempfile.TemporaryDirectory(prefix="d3off_speed_") as logdir:
        config = official_config(
            args.repo, args.size, args.dtype, logdir, seed=args.seed,
            batch_size=args.batch_size, batch_length=args.batch_length,
        )  # fmt: skip
        obs_space, act_space = vector_spaces(args.obs_dim, args.action_dim, args.discrete)
        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            agent = Agent(obs_space, act_space, agent_config(config))
        build_s = time.perf_counter() - start
        B, T, C = config.batch_size, config.batch_length, config.replay_context
        data = random_batch(agent, obs_space, act_space, B, T + C, args.seed)
        data = internal.device_put(data, agent.train_sharded)
        carry = [agent.init_train(B)]
        counter = [0]

        def train():
            batch = {**data, "seed": agent._seeds(counter[0], agent.train_mirrored)}
            counter[0] += 1
            carry[0], outs, mets = agent.train(carry[0], batch)
            jax.block_until_ready((agent.params, carry[0]))

        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            train()  # compiled already (precompile); this call warms the caches
        first_train_s = time.perf_counter() - start
        train_ms = median_ms(train, 1, args.repeats)
        # the optimised modules' parameters (dreamerv3/agent.py self.modules), as the
        # "Optimizer opt has N params" line counts them
        modules = ("dyn", "enc", "dec", "rew", "con", "pol", "val")
        params = sum(math.prod(v.shape) for k, v in agent.params.items()
                     if k.split("/")[0] in modules)  # fmt: skip
        common = dict(size=args.size, dtype=args.dtype, batch_size=B, batch_length=T,
                      obs_dim=args.obs_dim, action_dim=args.action_dim,
                      discrete=args.discrete, jax=jax.__version__,
                      device=str(jax.devices()[0]), cpus=os.cpu_count())  # fmt: skip
        rows.append(dict(kind="train", **common, train_ms=train_ms, build_s=build_s,
                         first_train_s=first_train_s, params=params,
                         repeats=args.repeats))  # fmt: skip

        pcarry = [agent.init_policy(1)]
        obs = {k: np.zeros((1, *v.shape), v.dtype) for k, v in obs_space.items()}
        obs["is_first"][:] = True

        def policy():
            pcarry[0], acts, _ = agent.policy(pcarry[0], obs, mode="train")

        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            policy()  # compiles the policy
        first_policy_s = time.perf_counter() - start
        obs["is_first"][:] = False
        policy_ms = median_ms(policy, 3, args.repeats * 20)
        rows.append(dict(kind="policy", **common, policy_ms=policy_ms,
                         first_policy_s=first_policy_s, compile_s=build_s + first_policy_s,
                         repeats=args.repeats * 20))  # fmt: skip
    return rows


# ----------------------------------------------------------------------------- whole run


def logger_scores(logdir: Path) -> list[list[float]]:
    """``[step, score]`` of every ``episode/score`` in the official logger's scores.jsonl."""
    path = logdir / "scores.jsonl"
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if "episode/score" in row:
                out.append([row["step"], row["episode/score"]])
    return out


def scores_match(logged, episodes, rtol: float = 1e-5) -> bool:
    """Whether the logger's ``[step, score]`` rows are the adapter's episodes: the same steps,
    scores equal up to the logger's float32 sum (the adapter sums in float64)."""
    ours = sorted((e[0], e[1]) for e in episodes)
    theirs = sorted((s, r) for s, r in logged)
    return len(ours) == len(theirs) and all(
        a[0] == b[0] and math.isclose(a[1], b[1], rel_tol=rtol, abs_tol=1e-3)
        for a, b in zip(ours, theirs, strict=True)
    )


def run_official(args) -> dict:
    """One ``embodied.run.train`` run on ``args.task``; see the module docstring."""
    from functools import partial as bind

    _, main = load_official(args.repo)
    import elements
    import embodied
    import jax

    start = time.perf_counter()
    episodes: list = []
    state = {"logger": None, "first_train": None, "first_step": None, "updates": 0}
    keep = args.logdir is not None
    logdir = Path(args.logdir) if keep else Path(tempfile.mkdtemp(prefix="d3off_run_"))
    try:
        config = official_config(
            args.repo, args.size, args.dtype, str(logdir), seed=args.seed,
            task=f"gymnasium_{args.task}", batch_size=args.batch_size,
            batch_length=args.batch_length,
            # the report stream cuts report_length rows from the train replay's windows
            # (batch_length + context): configs.yaml's 32 needs batch_length >= 32
            report_length=min(32, args.batch_length),
            **{"run.steps": args.steps, "run.envs": args.envs,
               "run.train_ratio": args.train_ratio},
        )  # fmt: skip

        def step_now() -> int:
            logger = state["logger"]
            return int(logger.step) if logger is not None else 0

        def make_env(config, index, **overrides):
            if state["first_step"] is None and state["logger"] is not None:
                state["first_step"] = time.perf_counter()  # the driver builds its envs
            seed = hash((config.seed, index)) % (2**32 - 1)  # main.make_env's use_seed
            env = GymnasiumEnv(args.task, index, seed, step_now,
                               episodes if state["logger"] is not None else None)  # fmt: skip
            return main.wrap_env(env, config)

        main.make_env = make_env  # main.make_agent reads its spaces from make_env(config, 0)

        def make_agent():
            agent = main.make_agent(config)
            train = agent.train

            def timed_train(carry, data):
                if state["first_train"] is None:
                    state["first_train"] = (time.perf_counter(), step_now())
                state["updates"] += 1
                return train(carry, data)

            agent.train = timed_train
            return agent

        def make_logger():
            state["logger"] = main.make_logger(config)
            return state["logger"]

        run_args = elements.Config(
            **config.run, replica=config.replica, replicas=config.replicas,
            logdir=config.logdir, batch_size=config.batch_size,
            batch_length=config.batch_length, report_length=config.report_length,
            consec_train=config.consec_train, consec_report=config.consec_report,
            replay_context=config.replay_context,
        )  # fmt: skip
        with contextlib.redirect_stdout(sys.stderr):
            embodied.run.train(
                make_agent, bind(main.make_replay, config, "replay"), bind(make_env, config),
                bind(main.make_stream, config), make_logger, run_args,
            )  # fmt: skip
        end = time.perf_counter()
        steps = step_now()
        logged = logger_scores(logdir)
    finally:
        if not keep:
            shutil.rmtree(logdir, ignore_errors=True)
    first = state["first_train"]
    train_steps = steps - first[1] if first else 0
    train_s = end - first[0] if first else float("nan")
    return dict(
        kind="run", task=args.task, requested_steps=args.steps, size=args.size,
        dtype=args.dtype, seed=args.seed,
        envs=args.envs, train_ratio=args.train_ratio, batch_size=args.batch_size,
        batch_length=args.batch_length, steps=steps, wall_s=end - start,
        build_s=(state["first_step"] or end) - start, updates=state["updates"],
        train_start_step=first[1] if first else None, train_steps=train_steps, train_s=train_s,
        steps_per_s=train_steps / train_s if first and train_s > 0 else None,
        episodes=sorted(episodes), logger_scores=logged,
        logger_matches_adapter=scores_match(logged, episodes),
        jax=jax.__version__, cpus=os.cpu_count(),
    )  # fmt: skip


# ----------------------------------------------------------------------------- command line


def parse_lines(text: str) -> list[dict]:
    """The JSON measurement lines of this script's stdout (lines starting with ``{`` that
    parse to an object with a ``kind``); anything else is skipped."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "kind" in row:
            rows.append(row)
    return rows


def last_error_line(stderr: str) -> str:
    """The line that says why a run failed: the last ``...Error: ...`` / ``...Exception``
    line of ``stderr`` (a traceback's last), else its last non-empty line."""
    lines = [x.strip() for x in stderr.strip().splitlines() if x.strip()]
    errors = [x for x in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b", x)]
    return (errors or lines or ["(no output)"])[-1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dreamerv3_official.py",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", type=Path, required=True, help="danijar/dreamerv3 checkout")
    common.add_argument("--size", choices=SIZES, default="1m")
    common.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="jax.compute_dtype (configs.yaml's default is bfloat16)")  # fmt: skip
    common.add_argument("--batch-size", type=int, default=16)
    common.add_argument("--batch-length", type=int, default=64)
    common.add_argument("--seed", type=int, default=0)
    speed = sub.add_parser("speed", parents=[common], help="train step, policy step, compile")
    speed.add_argument("--repeats", type=int, default=5)
    speed.add_argument("--obs-dim", type=int, default=5)
    speed.add_argument("--action-dim", type=int, default=1)
    speed.add_argument("--discrete", action="store_true")
    run = sub.add_parser("run", parents=[common], help="one embodied.run.train run")
    run.add_argument("--task", default="CartPole-v1", help="a gymnasium id")
    run.add_argument("--steps", type=int, required=True, help="env steps, all envs together")
    run.add_argument("--envs", type=int, default=1)
    run.add_argument("--train-ratio", type=float, default=512.0)
    run.add_argument("--logdir", help="keep the official logdir here (default: a temp dir)")
    run.add_argument("--out", type=Path, help="also write the result JSON here")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not (args.repo / "dreamerv3" / "agent.py").is_file():
        parser.error(f"--repo {args.repo} holds no dreamerv3/agent.py")
    for name in ("batch_size", "batch_length"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.command == "speed":
        for row in bench_speed(args):
            print(json.dumps(row), flush=True)
    else:
        if args.steps < 1 or args.envs < 1 or args.train_ratio <= 0:
            parser.error("--steps and --envs must be >= 1 and --train-ratio > 0")
        row = run_official(args)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(row))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
