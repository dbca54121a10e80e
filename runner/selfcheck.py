"""The conformance checks every episode VM must pass, run against a live one.

Screen size and content, a click landing where it was aimed (seen from inside the
guest), typed text with shifted symbols arriving exactly, exec exit codes and
timeouts, a file round trip. `cu-run check` runs them; the e2e tests assert on them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.conditions import DisplayObserver, WaitFor, wait_for
from runner.episode import EpisodeVM
from runner.errors import CommandTimeout
from runner.guest.agent import GuestAgent
from runner.screen import color_fraction, is_blank, png_size

# Where the image's .xinitrc puts the terminal (xterm -geometry 90x24+40+40).
TERMINAL_POINT = (200, 150)
# An empty stretch of desktop: right of the terminal, above the tray.
DESKTOP_POINT = (1000, 500)
TYPED_TEXT = "echo hello-cu > /tmp/typed"
SYMBOLS = "Sym: ~!@#$%^&*()_+{}|:\"<>? -=[]\\;,./` AZ"


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    seconds: float


def run_selfcheck(vm: EpisodeVM, out: Path | None = None) -> list[CheckResult]:
    checks: list[tuple[str, Callable[[EpisodeVM, Path | None], str]]] = [
        ("exec", check_exec),
        ("exec timeout", check_exec_timeout),
        ("file round trip", check_files),
        ("screenshot", check_screenshot),
        ("click lands", check_click),
        ("typing", check_typing),
    ]
    results = []
    for name, check in checks:
        started = time.monotonic()
        try:
            detail, ok = check(vm, out), True
        except AssertionError as exc:
            detail, ok = str(exc), False
        except Exception as exc:  # a check that crashed failed; the others still run
            detail, ok = f"{type(exc).__name__}: {exc}", False
        results.append(CheckResult(name, ok, detail, round(time.monotonic() - started, 2)))
    return results


def check_exec(vm: EpisodeVM, _out: Path | None) -> str:
    result = vm.shell.run("uname -a", timeout=30)
    assert result.exit_code == 0 and "Linux" in result.stdout, f"uname -a gave {result}"
    failing = vm.shell.run("echo to-stderr >&2; exit 3", timeout=30)
    assert (failing.exit_code, failing.stderr.strip()) == (3, "to-stderr"), f"exit 3 gave {failing}"
    return result.stdout.strip()


def check_exec_timeout(vm: EpisodeVM, _out: Path | None) -> str:
    started = time.monotonic()
    try:
        vm.shell.run("sleep 60", timeout=2)
    except CommandTimeout:
        took = time.monotonic() - started
        assert took < 20, f"timeout took {took:.1f} s to fire"
        leftover = vm.shell.run("pgrep -x sleep || true", timeout=10).stdout.strip()
        assert not leftover, f"the timed-out command is still running in the guest: pids {leftover}"
        return f"killed after {took:.1f} s"
    raise AssertionError("sleep 60 with a 2 s timeout returned instead of timing out")


def check_files(vm: EpisodeVM, _out: Path | None) -> str:
    payload = os.urandom(256 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        src, back = Path(tmp) / "up.bin", Path(tmp) / "down.bin"
        src.write_bytes(payload)
        vm.shell.put(src, "/tmp/cu-roundtrip.bin")
        digest = vm.shell.run("sha256sum /tmp/cu-roundtrip.bin", timeout=30).stdout.split()[0]
        assert digest == hashlib.sha256(payload).hexdigest(), "the guest's copy differs"
        vm.shell.get("/tmp/cu-roundtrip.bin", back)
        assert back.read_bytes() == payload, "the copy fetched back differs"
    return "256 KiB up and back, sha256 equal"


def check_screenshot(vm: EpisodeVM, out: Path | None) -> str:
    png = vm.display.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    screen = vm.image.manifest.screen
    size = png_size(png)
    assert size == (screen.width, screen.height), f"screenshot is {size}, the image says {screen.width}x{screen.height}"
    assert not is_blank(png), "the screen is one flat colour"
    color = vm.image.manifest.desktop_color
    share = color_fraction(png, color) if color else 1.0
    assert share > 0.15, f"only {share:.0%} of the screen shows the desktop colour {color}"
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "screenshot.png").write_bytes(png)
    return f"{size[0]}x{size[1]} PNG, {share:.0%} desktop colour"


def check_click(vm: EpisodeVM, _out: Path | None) -> str:
    x, y = DESKTOP_POINT
    vm.display.click(x, y)
    seen = _guest_pointer(vm)
    assert seen == (x, y), f"clicked at ({x}, {y}), the guest's pointer is at {seen}"
    return f"pointer at ({x}, {y}) inside the guest"


def check_typing(vm: EpisodeVM, out: Path | None) -> str:
    vm.shell.run("rm -f /tmp/typed /tmp/symbols", timeout=10)
    vm.display.click(*TERMINAL_POINT)
    command = vm.image.manifest.guest_agent
    if command:  # keys sent before the focus moves go to another window
        wait_for(WaitFor(focused="XTerm", timeout=60), DisplayObserver(vm.display, GuestAgent(vm.shell, command)))
    vm.display.type(TYPED_TEXT + "\n")
    vm.display.type(f"cat > /tmp/symbols <<'EOF'\n{SYMBOLS}\nEOF\n")
    typed = _wait_file(vm, "/tmp/typed")
    assert typed == "hello-cu\n", f"/tmp/typed holds {typed!r}"
    symbols = _wait_file(vm, "/tmp/symbols")
    assert symbols == SYMBOLS + "\n", f"typed {SYMBOLS!r}, the guest got {symbols!r}"
    if out is not None:
        (out / "typed.png").write_bytes(vm.display.screenshot())
    return "hello-cu and every US symbol arrived exactly"


def _guest_pointer(vm: EpisodeVM) -> tuple[int, int]:
    result = vm.shell.run("DISPLAY=:0 xdotool getmouselocation --shell", timeout=15)
    values = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    assert "X" in values, f"xdotool in the guest said {result}"
    return int(values["X"]), int(values["Y"])


def _wait_file(vm: EpisodeVM, path: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        result = vm.shell.run(f"cat {path} 2>/dev/null", timeout=10)
        if result.stdout.endswith("\n") or time.monotonic() > deadline:
            return result.stdout
        time.sleep(0.5)
