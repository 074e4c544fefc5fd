"""Screenshots decoded to arrays: OpenCV's JPEG decode must give Pillow's pixels exactly (the
observations a policy sees must not change with the decoder), and everything OpenCV does not read
goes to Pillow as before."""

from __future__ import annotations

import io
from datetime import date

import numpy as np
import pytest
from PIL import Image

from devices.rl.transitions import EnvObservation, decode_jpeg_rgb, decode_rgb_with_pil
from realbench.observation import ImageFormat


def _picture(width: int, height: int, seed: int) -> np.ndarray:
    """Gradients, flat panels and noise: edges and smooth areas, as a screen has."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), (x + y) % 256], -1)
    image[height // 4 : height // 2, width // 5 : width // 2] = (250, 250, 245)
    noisy = rng.random((height, width)) < 0.05
    image[noisy] = rng.integers(0, 256, (int(noisy.sum()), 3))
    return image.astype(np.uint8)


def _jpeg(image: np.ndarray, **options: object) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image).save(out, "JPEG", **options)
    return out.getvalue()


@pytest.mark.parametrize("size", [(448, 995), (449, 998), (17, 9), (1080, 2400)])
@pytest.mark.parametrize(
    "options",
    [
        {"quality": 80},  # 4:2:0, as Chromium's captures
        {"quality": 95, "subsampling": 0},  # 4:4:4
        {"quality": 60, "subsampling": 1},  # 4:2:2
        {"quality": 85, "progressive": True},
    ],
)
def test_opencv_decodes_a_jpeg_to_pillows_pixels(size, options):
    data = _jpeg(_picture(*size, seed=size[0]), **options)
    ours = EnvObservation(data, ImageFormat.JPEG, *size).pixels()
    assert ours.shape == (size[1], size[0], 3) and ours.dtype == np.uint8
    assert np.array_equal(ours, decode_rgb_with_pil(data))
    assert decode_jpeg_rgb(data) is not None  # the OpenCV path was the one taken


def test_a_grey_jpeg_becomes_rgb_as_pillow_makes_it():
    grey = _picture(64, 48, seed=1)[:, :, 0]
    out = io.BytesIO()
    Image.fromarray(grey, "L").save(out, "JPEG", quality=90)
    data = out.getvalue()
    pixels = EnvObservation(data, ImageFormat.JPEG, 64, 48).pixels()
    assert pixels.shape == (48, 64, 3)
    assert np.array_equal(pixels, decode_rgb_with_pil(data))


def test_a_truncated_jpeg_is_refused_not_half_decoded():
    data = _jpeg(_picture(448, 995, seed=2), quality=80)
    with pytest.raises(OSError, match="truncated"):
        EnvObservation(data[: len(data) // 2], ImageFormat.JPEG, 448, 995).pixels()


def test_a_png_keeps_pillows_decode_and_drops_alpha():
    rgba = np.dstack([_picture(40, 30, seed=3), np.full((30, 40), 128, np.uint8)])
    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, "PNG")
    pixels = EnvObservation(out.getvalue(), ImageFormat.PNG, 40, 30).pixels()
    assert np.array_equal(pixels, rgba[:, :, :3])


@pytest.mark.browser
def test_chromium_captures_decode_to_pillows_pixels(clone_server, browser_pool):
    """Chromium's own JPEGs of clone screens, at the RL size and at a phone's."""
    from devices.clone_target import CloneTarget
    from realbench.taskpack import load_pack

    pack = load_pack("taskpacks/toy")
    instance = pack.tasks[0].instantiate(0, date(2026, 3, 2))
    for scale in (448 / 412, 2.625):
        target = CloneTarget(pack, clone_server.url, browser=browser_pool, scale=scale)
        try:
            target.setup(instance)
            shot = target.device.observe().screenshot
        finally:
            target.teardown()
        assert shot.data[:3] == b"\xff\xd8\xff"
        pixels = EnvObservation(shot.data, ImageFormat.JPEG, shot.width, shot.height).pixels()
        assert pixels.shape == (shot.height, shot.width, 3)
        assert np.array_equal(pixels, decode_rgb_with_pil(shot.data))
