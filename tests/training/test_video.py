"""``ajax eval DIR --video``: frames of one deterministic episode as a GIF (image envs)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from ajax.cli import main
from ajax.training.video import PALETTE, to_rgb, write_gif


def test_channel_planes_are_painted_one_colour_per_channel_and_enlarged():
    planes = np.zeros((1, 2, 2, 4), np.float32)
    planes[0, 0, 0, 0] = 1.0  # channel 0 at (0, 0)
    planes[0, 1, 1, 3] = 1.0  # channel 3 at (1, 1)
    planes[0, 1, 1, 1] = 1.0  # channel 1 there too: the later channel paints over
    rgb = to_rgb(planes, min_size=4)
    assert rgb.shape == (1, 4, 4, 3) and rgb.dtype == np.uint8
    np.testing.assert_array_equal(rgb[0, 0, 0], PALETTE[0])
    np.testing.assert_array_equal(rgb[0, 3, 3], PALETTE[3])
    np.testing.assert_array_equal(rgb[0, 0, 3], [0, 0, 0])
    gray = to_rgb(np.full((1, 1, 1, 1), 0.5), min_size=1)
    np.testing.assert_array_equal(gray[0, 0, 0], [128, 128, 128])


def test_gif_is_written_atomically_with_every_frame(tmp_path):
    frames = np.stack([np.full((8, 8, 3), 40 * i, np.uint8) for i in range(5)])
    path = tmp_path / "eval.gif"
    write_gif(path, frames)
    assert [p.name for p in tmp_path.iterdir()] == ["eval.gif"]  # no temp file left
    with Image.open(path) as gif:
        assert gif.n_frames == 5 and gif.size == (8, 8)


@pytest.mark.slow  # 30 s on 2 cores
def test_eval_video_of_a_minatar_run_and_refused_for_vector_envs(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "dqn", "--env", "Breakout-MinAtar", "--steps", "64", "--learning-starts",
            "32", "--batch-size", "16", "--buffer-size", "64", "--eval-freq", "64",
            "--eval-episodes", "1", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "1", "--video"]) == 0
    assert "video of one episode" in capsys.readouterr().out
    with Image.open(out / "eval.gif") as gif:
        assert gif.n_frames >= 2 and min(gif.size) >= 160
    vector = tmp_path / "vector"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--steps", "64", "--learning-starts", "32",
            "--batch-size", "16", "--buffer-size", "64", "--eval-freq", "64",
            "--eval-episodes", "1", "--out", str(vector), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    assert main(["eval", str(vector), "--video"]) == 2
    assert "--video needs an image env" in capsys.readouterr().err
    assert not (vector / "eval.gif").exists()


@pytest.mark.parametrize("argv", [["eval", "--video"], ["eval", "x", "--episodes"]])
def test_eval_usage(argv, capsys):
    assert main(argv) == 2
    assert "usage: ajax eval DIR [--episodes N] [--video]" in capsys.readouterr().err
