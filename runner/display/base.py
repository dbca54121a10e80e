"""The Display interface. Every backend implements it; the contract is written here once."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

Button = Literal["left", "middle", "right"]
BUTTONS: tuple[Button, ...] = ("left", "middle", "right")
ScrollDirection = Literal["up", "down", "left", "right"]


@dataclass(frozen=True)
class DisplayInfo:
    width: int
    height: int


class Display(ABC):
    """One VM's screen, mouse and keyboard.

    Coordinates are screen pixels, (0, 0) top left. Every call has a timeout and raises
    GuestUnreachable when the screen stops answering; ValueError for a bad argument
    (outside the screen, unknown key) before anything is sent.
    """

    @abstractmethod
    def info(self) -> DisplayInfo:
        """The screen's current size."""

    @abstractmethod
    def screenshot(self) -> bytes:
        """The whole screen as PNG bytes."""

    @abstractmethod
    def move(self, x: int, y: int) -> None:
        """Moves the pointer to (x, y)."""

    @abstractmethod
    def click(self, x: int, y: int, button: Button = "left", *, double: bool = False) -> None:
        """Moves to (x, y) and clicks BUTTON once, or twice in quick succession."""

    @abstractmethod
    def drag(self, x1: int, y1: int, x2: int, y2: int, button: Button = "left") -> None:
        """Presses BUTTON at (x1, y1), moves to (x2, y2) in steps, releases."""

    @abstractmethod
    def scroll(self, x: int, y: int, direction: ScrollDirection, amount: int = 3) -> None:
        """Moves to (x, y) and turns the wheel AMOUNT notches."""

    @abstractmethod
    def key(self, key: str, modifiers: tuple[str, ...] = ()) -> None:
        """Presses KEY (a name from display.keys, or one character) with MODIFIERS held."""

    @abstractmethod
    def type(self, text: str, *, delay: float | None = None) -> None:
        """Types TEXT exactly, shifted symbols and newlines included, DELAY seconds between keys."""

    @property
    @abstractmethod
    def pointer(self) -> tuple[int, int]:
        """Where this display last put the pointer."""

    @abstractmethod
    def close(self) -> None:
        """Releases the connection. Idempotent."""

    def check_point(self, x: int, y: int) -> None:
        size = self.info()
        if not (0 <= x < size.width and 0 <= y < size.height):
            raise ValueError(f"({x}, {y}) is outside the {size.width}x{size.height} screen")
