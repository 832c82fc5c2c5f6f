"""``ajax eval DIR --video``: one deterministic episode of an image env as an animated GIF.

The frames are the observations the agent acted on (image envs only: MinAtar's channel
planes, rendered dm_control pixels), so the video shows exactly what the policy saw.
Channel planes (MinAtar: one 0/1 plane per object kind) are painted one colour per channel;
one channel is grey, three are RGB. Small frames are enlarged (nearest) to at least 160 px.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import numpy as np

from ajax.environments import make_env
from ajax.failures import naming
from ajax.networks.pixels import split_image
from ajax.training.unroll import host_unroll, unroll

# Distinct colours for channel planes, in channel order (a later channel paints over).
PALETTE = np.array(
    [[230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
     [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 212]],
    np.uint8,
)  # fmt: skip


def to_rgb(images: np.ndarray, min_size: int = 160) -> np.ndarray:
    """Frames [T, H, W, C] in [0, 1] as uint8 RGB [T, H s, W s, 3], s = enlargement."""
    images = np.clip(np.asarray(images, np.float32), 0.0, 1.0)
    c = images.shape[-1]
    if c == 3:
        rgb = (images * 255).round().astype(np.uint8)
    elif c == 1:
        rgb = np.repeat((images * 255).round().astype(np.uint8), 3, axis=-1)
    else:
        rgb = np.zeros((*images.shape[:-1], 3), np.uint8)
        for k in range(c):
            rgb[images[..., k] > 0.5] = PALETTE[k % len(PALETTE)]
    scale = max(1, -(-min_size // max(images.shape[1:3])))
    return rgb.repeat(scale, axis=1).repeat(scale, axis=2)


def write_gif(path: Path, frames: np.ndarray, fps: int = 15) -> None:
    """Frames [T, H, W, 3] uint8 as a looping GIF, written atomically (temp file, rename)."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with naming(path):
            images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                           duration=int(1000 / fps), loop=0)  # fmt: skip
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def record_episode(algo, agent_state, key: jax.Array, max_frames: int = 1000) -> np.ndarray:
    """The observations [T, H, W, C] of one deterministic episode of ``algo``'s policy.

    ``agent_state`` is one seed's. Refuses envs without images (nothing to show).
    """
    image_shape = algo.env.spec.image_shape
    if image_shape is None:
        raise ValueError(
            f"--video needs an image env ({algo.env_id!r} gives vectors): e.g. "
            "Breakout-MinAtar, or a dmc: id with --pixels"
        )
    policy = algo.policy()
    if algo.is_jax:  # the evaluation env: the pure functions the unroll vmaps
        return _jax_episode(algo, algo.eval_env, policy, agent_state, key, max_frames, image_shape)
    env = make_env(algo.env_id, n_envs=1, **algo.env_options)
    act = algo.jit(policy.act, static_argnums=4)
    key, _ = jax.random.split(key)  # the host episode's keys as before the shared unroll
    frames = []
    try:
        for obs, step in host_unroll(env, act, policy, agent_state, key, 0, max_frames, split=3):
            frames.append(_frame(obs, image_shape))
            if bool(np.asarray(step.out.terminated | step.out.truncated)[0]):
                frames.append(_frame(step.out.final_obs, image_shape))
    finally:
        env.close()
    return np.stack(frames)


def _jax_episode(algo, env, policy, agent_state, key, max_frames, image_shape) -> np.ndarray:
    """The frames of one episode on the JAX ``env``: the shared unroll of one copy, cut at
    its first end (its last frame the final observation)."""

    def observe(acc, step):
        return acc, (step.tick.obs[0], step.out.final_obs[0], step.alive[0], step.out.done[0])

    run = algo.jit(lambda a, k: unroll(env, policy, a, k, 1, max_frames, observe)[1])
    obs, final, alive, done = (np.asarray(x) for x in run(agent_state, key))
    steps = int(alive.sum())
    frames = [_frame(obs[t : t + 1], image_shape) for t in range(steps)]
    if done[steps - 1]:
        frames.append(_frame(final[steps - 1 : steps], image_shape))
    return np.stack(frames)


def _frame(obs, image_shape: tuple[int, int, int]) -> np.ndarray:
    """Env 0's image [H, W, C] (a mixed observation's vector features dropped)."""
    return np.asarray(split_image(obs[0], image_shape)[0]).reshape(image_shape)
