"""The official TD-MPC2 run protocol as data: ``--protocol dmc`` runs what the published DMC
curves ran.

The protocol is nicklashansen/tdmpc2@e9f5932 ``tdmpc2/config.yaml`` (single-task online
training, ``train.py task=<domain>-<task>``) with its DMControl env
(``tdmpc2/envs/dmcontrol.py``) and the length of the curves it published
(``results/tdmpc2/<task>.csv``). Field by field against :class:`TDMPC2Config`'s defaults:

- action repeat 2: ``DMControlWrapper.step`` runs each action twice and sums the rewards
  (envs/dmcontrol.py:54-60; so since the first commit, b67b21c ``ActionRepeatWrapper(env, 2)``).
  TDMPC2Config's default is 1: the protocol sets ``action_repeat`` 2.
- episode length 500 agent steps: ``Timeout(env, max_episode_steps=500)`` over the repeated env
  (envs/dmcontrol.py:110, envs/wrappers/timeout.py:21-25), the suite's own ``LAST`` ignored
  (dmcontrol.py:60 returns done False): 1,000 simulator steps for every task. The protocol sets
  the dmc env option ``max_episode_steps`` 1000 (simulator steps; with the repeat, 500 agent
  steps), which most suite tasks have anyway.
- seed steps max(1000, 5 x episode length) = 2,500 agent steps of uniform actions, then as many
  pretraining updates (envs/__init__.py:81-82, trainer/online_trainer.py:107-119): the
  default ``seed_steps`` None derives the same number from the env's 500-step episodes.
- evaluation: 10 episodes (config.yaml:11, the default) every 50,000 agent steps
  (config.yaml:12; ``eval_freq`` default 2,000): the protocol sets ``eval_freq`` 50,000 and
  ``eval_episodes`` 10.
- run length: the curves end at 4,000,000 env (simulator) steps (14,000,000 on the dog and
  humanoid tasks) in ``results/tdmpc2/*.csv``, not config.yaml's ``steps`` 10M (config.yaml:15,
  which runs pass on the command line, README.md:117). The trainer's ``_step`` counts agent
  steps (trainer/online_trainer.py:22, :125: one per call of the repeated env), but the csv
  ``step`` was multiplied by the action repeat before it was written (the author in
  nicklashansen/tdmpc2 issue 45, 2024-10-07: "the results in results/ indeed do account for
  action repeat"; the curves' points fall every 100,000 = 2 x ``eval_freq``). So the runs are
  2,000,000 agent steps (7,000,000 on dog and humanoid), as Ajax's ``--steps`` counts them
  with ``action_repeat`` 2.
- model size 5 (README.md:121 "the default model size of 5M"; ``model_size: ???`` at
  config.yaml:55 leaves the yaml widths, config.yaml:56-64, which are the 5M row,
  common/__init__.py:7-10): TDMPC2Config's default, set here explicitly.
- the rest is TDMPC2Config's defaults already, pinned by tests/agents/tdmpc2/test_protocol.py:
  batch 256 (config.yaml:16), replay 1M (:29, capped at the run's steps, common/buffer.py:16),
  the losses' coefficients, rates and discount heuristic (:17-28), the planner (:34-42), the
  actor and two-hot critic (:45-52), simnorm and dropout (:63-64), ``episodic`` false (:7).

Not mapped: the official loop also evaluates at step 0 and runs ``steps + 1`` steps
(online_trainer.py:77-79); its single-task model has no task embedding (``task_dim`` 0,
common/parser.py:77), which Ajax's single-task model leaves unused too.

Other protocols the official code defines equally well but Ajax does not build: DMC from pixels
(``obs=rgb``: 3 stacked 64 x 64 frames, envs/dmcontrol.py:66-89, 108-109;
results/tdmpc2-pixels end at 2M), Meta-World (envs/metaworld.py: repeat 2, 100-step episodes),
ManiSkill2 (envs/maniskill.py) and MyoSuite (envs/myosuite.py), whose envs Ajax lacks.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Protocol:
    """One official protocol (the agent-level contract the CLI reads: ``steps_for``,
    ``env_options``, ``source``).

    Attributes:
        source: the official files and lines it follows.
        config: the TDMPC2Config fields it sets.
        steps: agent steps of the whole run (the published curves' length).
        long_steps: the run length on the ``long_domains`` (the curves' longer runs).
        long_domains: dm_control domains whose curves run ``long_steps``.
        family: the env family it trains on.
        env_options: make_env options it sets, per family.
        example: an env id it takes, for error messages.
    """

    source: str
    config: dict[str, Any]
    steps: int
    long_steps: int
    long_domains: tuple[str, ...]
    family: str
    env_options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    example: str = ""

    def steps_for(self, env_id: str) -> int:
        """The run's agent steps on ``env_id`` (``dmc:<domain>-<task>``): the length of the
        published curve of its task."""
        domain = env_id.split(":", 1)[-1].split("-", 1)[0]
        return self.long_steps if domain in self.long_domains else self.steps


PROTOCOLS: dict[str, Protocol] = {
    "dmc": Protocol(
        source="nicklashansen/tdmpc2@e9f5932 config.yaml:11-12, envs/dmcontrol.py:57, :110, "
        "envs/__init__.py:82, results/tdmpc2/*.csv",
        config={
            "action_repeat": 2,  # envs/dmcontrol.py:57 (for _ in range(2))
            "eval_freq": 50_000,  # config.yaml:12, in agent steps (online_trainer.py:79)
            "eval_episodes": 10,  # config.yaml:11
            "model_size": 5,  # README.md:121; config.yaml:56-64 are the 5M widths
        },
        steps=2_000_000,  # results/tdmpc2/<dmc task>.csv: last step 4,000,000 env steps
        long_steps=7_000_000,  # results/tdmpc2/{dog,humanoid}-*.csv: last step 14,000,000
        long_domains=("dog", "humanoid"),
        family="dmc",
        # Timeout(500) over the 2-repeat env (envs/dmcontrol.py:110): 1,000 simulator steps
        env_options={"dmc": {"max_episode_steps": 1000}},
        example="dmc:walker-walk",
    ),
}


def get(name: str) -> Protocol:
    """The protocol ``name``; ValueError naming the known ones."""
    if name not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {name!r}; tdmpc2's official protocols are "
            f"{', '.join(PROTOCOLS)} (nicklashansen/tdmpc2 config.yaml with its DMControl env): "
            "pass one of them to --protocol"
        )
    return PROTOCOLS[name]


def check_env_id(name: str, env_id: str) -> str:
    """The family of the id ``env_id`` if protocol ``name`` can train on it, else ValueError
    naming the fix."""
    from ajax.environments.registry import resolve_env_id

    family, _ = resolve_env_id(env_id)
    check_family(name, env_id, family)
    return family


def check_family(name: str, env_id: str, family: str) -> None:
    """ValueError naming the fix unless protocol ``name`` trains on envs of ``family``."""
    protocol = get(name)
    if family != protocol.family:
        raise ValueError(
            f"protocol {name!r} trains on {protocol.family} envs (the official DMControl env, "
            f"nicklashansen/tdmpc2 envs/dmcontrol.py); "
            f"{env_id!r} is not one: pass e.g. --env {protocol.example}"
        )


def check_observation(name: str, env_id: str, image: bool) -> None:
    """ValueError naming the fix for image observations: the protocol is the state one."""
    if image:
        raise ValueError(
            f"protocol {name!r} trains on state observations (config.yaml:6 obs: state); "
            f"{env_id!r} gives images: drop --pixels (the official pixel protocol, obs=rgb, "
            "is not built here)"
        )


def env_options(name: str, family: str) -> dict[str, Any]:
    """The make_env options protocol ``name`` sets on an env of ``family`` ({} for none)."""
    return dict(get(name).env_options.get(family, {}))
