"""The tool sets of cu-run's MCP server by name (--tools), apart from the server itself: a run's
options name them (runner.runs.request), and every command's start-up reads those, so this module
imports nothing heavy."""

from __future__ import annotations

from runner.errors import UsageError

TOOLSETS: dict[str, tuple[str, ...]] = {
    "screen": ("computer_use_screenshot", "computer_use_screenshot_region", "computer_use_display_info"),
    "mouse": ("computer_use_mouse_position", "computer_use_mouse_move", "computer_use_mouse_click",
              "computer_use_mouse_drag", "computer_use_mouse_scroll"),
    "keyboard": ("computer_use_keyboard_type", "computer_use_keyboard_press", "computer_use_keyboard_hotkey"),
    "files": ("list_files", "file_download"),
    "accessibility": ("computer_use_windows", "computer_use_accessibility_tree"),
}
DEFAULT_TOOLSETS = ("screen", "mouse", "keyboard")


def resolve_toolsets(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """--tools screen,mouse,keyboard,files -> the tool names those sets hold."""
    tools: list[str] = []
    for name in names:
        if name not in TOOLSETS:
            raise UsageError(f"unknown tool set {name!r}", fix=f"choose from {', '.join(TOOLSETS)}")
        tools += TOOLSETS[name]
    return tuple(dict.fromkeys(tools))
