"""Atari through ale-py (0.12.1, ROMs included) as a host simulator, DreamerV3's way.

danijar/dreamerv3@e3f0224 ``embodied/envs/atari.py`` with the two env blocks of
``dreamerv3/configs.yaml``, chosen by ``atari_settings``:

- ``"atari"`` (the default; configs.yaml:30 ``env.atari``): 96 x 96 grayscale frames, sticky
  actions (repeat probability 0.25), the full 18-action set;
- ``"atari100k"`` (configs.yaml:33 ``env.atari100k``): 64 x 64 RGB frames, no sticky actions,
  the game's minimal action set.

Both: 4 frames per agent step with the rewards summed and the last two frames (rendered in the
step's last two frames only) max-pooled (atari.py:104-122, 156-157), lives unused (an episode
ends at game over), 0 to 30 no-op frames after each reset drawn uniformly (atari.py:130-134),
frames resized by Pillow's bilinear filter (atari.py:163-166) and grayed with the weights
0.299 / 0.587 / 0.114 truncated to bytes (atari.py:17, 167-170), no reward clipping, and at
most 108,000 frames (27,000 agent steps) per episode, no-ops excluded. As there
(atari.py:176, ``is_terminal=is_last``) an episode's end is terminal, the frame limit's
included. Observations follow Ajax's host contract: flat floats in [0, 1] with
``spec.image_shape`` set.
"""

from __future__ import annotations

import numpy as np

from ajax.environments.host import HostStep, HostVecEnv
from ajax.environments.types import Discrete, EnvSpec

MAX_FRAMES = 108_000
REPEAT = 4
POOLING = 2
NOOPS = 30
GRAY_WEIGHTS = np.array([0.299, 0.587, 1 - (0.299 + 0.587)])
# configs.yaml:30 (env.atari) and :33 (env.atari100k): size, gray, sticky, full action set.
SETTINGS = {
    "atari": {"size": 96, "gray": True, "sticky": True, "full_actions": True},
    "atari100k": {"size": 64, "gray": False, "sticky": False, "full_actions": False},
}


def atari_ids() -> tuple[str, ...]:
    """``atari:<Game>`` for every ALE v5 game gymnasium registers (imports ale_py)."""
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    names = (k[4:-3] for k in gymnasium.registry if k.startswith("ALE/") and k.endswith("-v5"))
    return tuple(f"atari:{n}" for n in sorted(names))


class AtariSimulator:
    """One ALE game: 4 frames per step, max over the last two, resized to ``size``."""

    def __init__(self, game: str, size: int = 96, gray: bool = True, sticky: bool = True,
                 full_actions: bool = True):  # fmt: skip
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
        self.env = gymnasium.make(
            f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.25 if sticky else 0.0,
            full_action_space=full_actions, max_num_frames_per_episode=None,
        )  # fmt: skip
        self.size, self.gray = size, gray
        self.frames: list[np.ndarray] = []
        self.duration = 0
        self.rng = np.random.default_rng()

    def _obs(self) -> np.ndarray:
        from PIL import Image

        pooled = np.maximum(self.frames[-2], self.frames[-1])
        image = np.asarray(Image.fromarray(pooled).resize((self.size, self.size), Image.BILINEAR))
        if self.gray:
            image = (image * GRAY_WEIGHTS).sum(-1).astype(np.uint8)
        return (image.astype(np.float32) / 255.0).ravel()

    def reset(self, seed: int | None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        frame, _ = self.env.reset(seed=seed)
        for _ in range(self.rng.integers(NOOPS + 1)):
            frame, _, terminated, truncated, _ = self.env.step(0)  # NOOP in either action set
            if terminated or truncated:
                frame, _ = self.env.reset()
        self.frames, self.duration = [frame, frame], 0
        return self._obs()

    def step(self, action: np.ndarray) -> HostStep:
        total, over = 0.0, False
        for i in range(REPEAT):
            frame, reward, over, _, _ = self.env.step(int(action))
            total += float(reward)
            self.duration += 1
            if i >= REPEAT - POOLING:  # atari.py:107: only the last two frames are rendered
                self.frames = [self.frames[-1], frame]
            if over or self.duration >= MAX_FRAMES:
                break
        return HostStep(self._obs(), total, over or self.duration >= MAX_FRAMES, False)

    def close(self) -> None:
        self.env.close()


def make_atari(game: str, n_envs: int = 1, max_episode_steps: int | None = None,
               gray: bool = False, settings: str | None = None) -> HostVecEnv:  # fmt: skip
    """``n_envs`` copies of the ALE game ``game`` (e.g. ``"Pong"``) with the ``settings``
    block ("atari", the default, or "atari100k"); ``gray`` forces grayscale frames; env ``i``
    seeded by reset."""
    options = SETTINGS[settings or "atari"]
    options = {**options, "gray": options["gray"] or gray}
    sims = [AtariSimulator(game, **options) for _ in range(n_envs)]
    channels = 1 if options["gray"] else 3
    size = options["size"]
    spec = EnvSpec(
        env_id=f"atari:{game}",
        family="atari",
        observation_shape=(size * size * channels,),
        action_space=Discrete(int(sims[0].env.action_space.n)),
        max_episode_steps=max_episode_steps or MAX_FRAMES // REPEAT,
        image_shape=(size, size, channels),
    )
    return HostVecEnv(sims, spec)
