"""Judging a screenshot: is the desktop on screen?"""

from __future__ import annotations

import io
from typing import cast

from PIL import Image


def hex_to_rgb(color: str) -> tuple[int, int, int]:
    value = color.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def color_fraction(png: bytes, color: str, tolerance: int = 8) -> float:
    """The share of pixels within TOLERANCE of COLOR ('#rrggbb'), sampled on a grid."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    target = hex_to_rgb(color)
    raw = image.resize((160, 100), Image.Resampling.NEAREST).tobytes()
    pixels = [raw[i:i + 3] for i in range(0, len(raw), 3)]
    close = sum(1 for p in pixels if all(abs(a - b) <= tolerance for a, b in zip(p, target, strict=False)))
    return close / len(pixels)


def is_blank(png: bytes) -> bool:
    """True when the screen shows a single colour (black console, blank VGA)."""
    image = Image.open(io.BytesIO(png)).convert("L")
    low, high = cast(tuple[int, int], image.getextrema())  # one band ("L"): its lowest and highest
    return high - low < 8


def png_size(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(png)).size
