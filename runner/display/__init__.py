"""The display seam: see the guest's screen and drive its mouse and keyboard."""

from runner.display.base import BUTTONS, Display, DisplayInfo
from runner.display.keys import KEY_NAMES, parse_hotkey

__all__ = ["BUTTONS", "Display", "DisplayInfo", "KEY_NAMES", "parse_hotkey"]
