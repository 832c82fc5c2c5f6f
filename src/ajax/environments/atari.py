"""Atari through ale-py (0.12.1, ROMs included) as a host simulator, DreamerV3's way.

The settings are DreamerV3's Atari wrapper and ``env.atari`` config as the PyPI sdist
dreamerv3 1.5.0 has them (embodied/envs/atari.py, configs.yaml; the 2023 code base: HEAD
e3f0224 could not be fetched here, deviations.md D55): 4 frames per agent step with rewards
summed and the last two frames max-pooled, sticky actions with probability 0.25, the full
18-action set (``actions: all``), lives not used (an episode ends at game over), no no-op
starts, frames area-resized to 64 x 64 (OpenCV's INTER_AREA there, Pillow's BOX filter here),
RGB (``gray: False``; ``grayscale=True`` for one channel), and 108,000 frames (27,000 agent
steps) per episode at most. Observations follow Ajax's host contract: flat floats in [0, 1] with
``spec.image_shape`` set.
"""

from __future__ import annotations

import numpy as np

from ajax.environments.host import HostStep, HostVecEnv
from ajax.environments.types import Discrete, EnvSpec

MAX_FRAMES = 108_000


def atari_ids() -> tuple[str, ...]:
    """``atari:<Game>`` for every ALE v5 game gymnasium registers (imports ale_py)."""
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    names = (k[4:-3] for k in gymnasium.registry if k.startswith("ALE/") and k.endswith("-v5"))
    return tuple(f"atari:{n}" for n in sorted(names))


class AtariSimulator:
    """One ALE game: ``repeat`` frames per step, max over the last two, resized to ``size``."""

    def __init__(self, game: str, repeat: int = 4, size: int = 64, gray: bool = False,
                 sticky: float = 0.25):  # fmt: skip
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
        self.env = gymnasium.make(
            f"ALE/{game}-v5", frameskip=1, repeat_action_probability=sticky,
            full_action_space=True, max_num_frames_per_episode=MAX_FRAMES,
        )  # fmt: skip
        self.repeat, self.size, self.gray = repeat, size, gray
        self.frames: list[np.ndarray] = []

    def _obs(self) -> np.ndarray:
        from PIL import Image

        pooled = np.maximum(self.frames[-2], self.frames[-1])
        image = Image.fromarray(pooled).resize((self.size, self.size), Image.BOX)
        if self.gray:
            image = image.convert("L")
        return (np.asarray(image, np.float32) / 255.0).ravel()

    def reset(self, seed: int | None) -> np.ndarray:
        frame, _ = self.env.reset(seed=seed)
        self.frames = [frame, frame]
        return self._obs()

    def step(self, action: np.ndarray) -> HostStep:
        total, terminated, truncated = 0.0, False, False
        for _ in range(self.repeat):
            frame, reward, terminated, truncated, _ = self.env.step(int(action))
            total += float(reward)
            self.frames = [self.frames[-1], frame]
            if terminated or truncated:
                break
        return HostStep(self._obs(), total, bool(terminated), bool(truncated and not terminated))

    def close(self) -> None:
        self.env.close()


def make_atari(game: str, n_envs: int = 1, max_episode_steps: int | None = None,
               gray: bool = False) -> HostVecEnv:  # fmt: skip
    """``n_envs`` copies of the ALE game ``game`` (e.g. ``"Pong"``), env ``i`` seeded by reset."""
    sims = [AtariSimulator(game, gray=gray) for _ in range(n_envs)]
    channels = 1 if gray else 3
    size = sims[0].size
    spec = EnvSpec(
        env_id=f"atari:{game}",
        family="atari",
        observation_shape=(size * size * channels,),
        action_space=Discrete(int(sims[0].env.action_space.n)),
        max_episode_steps=max_episode_steps or MAX_FRAMES // sims[0].repeat,
        image_shape=(size, size, channels),
    )
    return HostVecEnv(sims, spec)
