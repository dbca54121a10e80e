"""The scripted agent's file format: a list of GUI steps (ui_oracle.yaml, ui_obey.yaml, ...).

    - tool: computer_use_keyboard_type          an MCP tool call, with its arguments
      args: {text: "mousepad ~/notes.txt &\\n"}
    - wait_for: {focused: Mousepad, timeout: 60}  wait until a condition holds (runner.display.conditions)
    - wait: 0.5                                  a fixed pause: only where nothing observable exists

Every step is checked when the file is loaded, so a typo fails before any VM starts.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.display.conditions import WaitFor
from runner.errors import UsageError


class ToolStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    tool: str
    args: dict = Field(default_factory=dict)


class SleepStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    wait: float = Field(gt=0, le=600)


class WaitStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    wait_for: WaitFor


Step = ToolStep | SleepStep | WaitStep
_KINDS: dict[str, type[Step]] = {"tool": ToolStep, "wait": SleepStep, "wait_for": WaitStep}


def load_ui_script(path: Path) -> list[Step]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise UsageError(f"{path}: expected a list of steps ({{tool: NAME, args: {{...}}}}, {{wait_for: {{...}}}} "
                         "or {wait: SECONDS})")
    return [_step(path, number, raw) for number, raw in enumerate(data, 1)]


def _step(path: Path, number: int, raw: object) -> Step:
    kinds = [k for k in _KINDS if isinstance(raw, dict) and k in raw]
    if len(kinds) != 1:
        raise UsageError(f"{path}: step {number} must have exactly one of 'tool', 'wait_for' or 'wait', got {raw!r}")
    assert isinstance(raw, dict)
    if "args" in raw and not isinstance(raw["args"], dict):
        raise UsageError(f"{path}: step {number}: 'args' must be a mapping")
    try:
        return _KINDS[kinds[0]].model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or kinds[0]}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"{path}: step {number} ({kinds[0]}): {problems}") from None


def baseline_needed(steps: list[Step], index: int) -> bool:
    """Whether the step after INDEX waits for the screen to change: then the screen is captured
    before step INDEX runs, so a change that step causes at once is not missed."""
    following = steps[index + 1] if index + 1 < len(steps) else None
    return isinstance(following, WaitStep) and following.wait_for.screen_changes
