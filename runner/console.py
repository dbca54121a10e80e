"""The rich consoles the CLI prints to."""

from __future__ import annotations

import os
from typing import IO

from rich.console import Console

# Rich gives output that is not a terminal 80 columns, which cuts task ids and wraps every
# rate of a run's summary when it goes to a CI log or a file: such output gets this many.
LOG_WIDTH = 160


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console as wide as the terminal, or LOG_WIDTH when there is none (COLUMNS wins)."""
    # No emoji codes: a task id, a path or a message like "mod:x" is printed as it is, never as a picture.
    console = Console(stderr=stderr, file=file, emoji=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = LOG_WIDTH
    return console
