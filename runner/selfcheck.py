"""The conformance checks every episode VM must pass, run against a live one.

Screen size and content, a click landing where it was aimed (seen from inside the
guest), typed text with shifted symbols arriving exactly, exec exit codes and
timeouts, a file round trip. `cu-run check` runs them; the e2e tests assert on them.
What differs between guests comes from the image's profile (runner.profiles); the click
and typing checks need the profile's desktop probe and are skipped without one.

Checks raise CheckFailed, never assert: `python -O` strips asserts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.agents.conditions import DisplayObserver, WaitFor, wait_for
from runner.episode import EpisodeVM
from runner.errors import CommandTimeout
from runner.guest.agent import GuestAgent
from runner.screen import color_fraction, is_blank, png_size

TYPED_TEXT = "hello-cu"
SYMBOLS = "Sym: ~!@#$%^&*()_+{}|:\"<>? -=[]\\;,./` AZ"


class CheckFailed(Exception):
    """A conformance check found the VM wrong; the message says how."""


class Skipped(Exception):
    """A check that cannot run on this guest (its profile has no desktop probe)."""


def ensure(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


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
        except Skipped as exc:
            detail, ok = f"skipped: {exc}", True
        except CheckFailed as exc:
            detail, ok = str(exc), False
        except Exception as exc:  # noqa: BLE001 - a check that crashed failed; the others still run
            detail, ok = f"{type(exc).__name__}: {exc}", False
        results.append(CheckResult(name, ok, detail, round(time.monotonic() - started, 2)))
    return results


def check_exec(vm: EpisodeVM, _out: Path | None) -> str:
    guest = vm.image.manifest.guest
    probe, expected = guest.selfcheck_probe()
    result = vm.shell.run(probe, timeout=30)
    ensure(result.exit_code == 0 and expected in result.stdout, f"{probe} gave {result}")
    failing = vm.shell.run(guest.selfcheck_failing(), timeout=30)
    ensure((failing.exit_code, failing.stderr.strip()) == (3, "to-stderr"), f"exit 3 gave {failing}")
    return result.stdout.strip()


def check_exec_timeout(vm: EpisodeVM, _out: Path | None) -> str:
    sleep, leftovers = vm.image.manifest.guest.selfcheck_sleep()
    started = time.monotonic()
    try:
        vm.shell.run(sleep, timeout=2)
    except CommandTimeout:
        took = time.monotonic() - started
        ensure(took < 20, f"timeout took {took:.1f} s to fire")
        leftover = vm.shell.run(leftovers, timeout=10).stdout.strip()
        ensure(not leftover, f"the timed-out command is still running in the guest: pids {leftover}")
        return f"killed after {took:.1f} s"
    raise CheckFailed("a 60 s sleep with a 2 s timeout returned instead of timing out")


def check_files(vm: EpisodeVM, _out: Path | None) -> str:
    guest = vm.image.manifest.guest
    remote = guest.selfcheck_temp_path()
    payload = os.urandom(256 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        src, back = Path(tmp) / "up.bin", Path(tmp) / "down.bin"
        src.write_bytes(payload)
        vm.shell.put(src, remote)
        digest = vm.shell.run(guest.selfcheck_hash(remote), timeout=30).stdout.split()[0]
        ensure(digest == hashlib.sha256(payload).hexdigest(), "the guest's copy differs")
        vm.shell.get(remote, back)
        ensure(back.read_bytes() == payload, "the copy fetched back differs")
    return "256 KiB up and back, sha256 equal"


def check_screenshot(vm: EpisodeVM, out: Path | None) -> str:
    png = vm.display.screenshot()
    ensure(png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    screen = vm.image.manifest.screen
    size = png_size(png)
    ensure(size == (screen.width, screen.height), f"screenshot is {size}, the image says {screen.width}x{screen.height}")
    ensure(not is_blank(png), "the screen is one flat colour")
    color = vm.image.manifest.desktop_color
    share = color_fraction(png, color) if color else 1.0
    ensure(share > 0.15, f"only {share:.0%} of the screen shows the desktop colour {color}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "screenshot.png").write_bytes(png)
    return f"{size[0]}x{size[1]} PNG, {share:.0%} desktop colour"


def check_click(vm: EpisodeVM, _out: Path | None) -> str:
    probe = _probe(vm)
    x, y = probe.empty_point
    vm.display.click(x, y)
    seen = _guest_pointer(vm)
    ensure(seen == (x, y), f"clicked at ({x}, {y}), the guest's pointer is at {seen}")
    return f"pointer at ({x}, {y}) inside the guest"


def check_typing(vm: EpisodeVM, out: Path | None) -> str:
    probe, guest = _probe(vm), vm.image.manifest.guest
    typed_path, symbols_path = probe.scratch
    for path in probe.scratch:
        vm.shell.run(guest.remove_script(path), timeout=10)
    vm.display.click(*probe.terminal_point)
    command = vm.image.manifest.guest_agent
    if command:  # keys sent before the focus moves go to another window
        wait_for(WaitFor(focused=probe.terminal_focus, timeout=60),
                 DisplayObserver(vm.display, GuestAgent(vm.shell, command)))
    vm.display.type(guest.typing_line(TYPED_TEXT, typed_path))
    vm.display.type(guest.typing_line(SYMBOLS, symbols_path))
    typed = _wait_file(vm, typed_path)
    ensure(typed == TYPED_TEXT + "\n", f"{typed_path} holds {typed!r}")
    symbols = _wait_file(vm, symbols_path)
    ensure(symbols == SYMBOLS + "\n", f"typed {SYMBOLS!r}, the guest got {symbols!r}")
    if out is not None:
        (out / "typed.png").write_bytes(vm.display.screenshot())
    return f"{TYPED_TEXT} and every US symbol arrived exactly"


def _probe(vm: EpisodeVM):
    probe = vm.image.manifest.guest.desktop_probe
    if probe is None:
        raise Skipped(f"the {vm.image.manifest.profile} profile has no desktop probe")
    return probe


def _guest_pointer(vm: EpisodeVM) -> tuple[int, int]:
    result = vm.shell.run(_probe(vm).pointer_script, timeout=15)
    values = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    ensure("X" in values, f"the guest's pointer probe said {result}")
    return int(values["X"]), int(values["Y"])


def _wait_file(vm: EpisodeVM, path: str, timeout: float = 120.0) -> str:
    script = vm.image.manifest.guest.read_text_script(path)
    deadline = time.monotonic() + timeout
    while True:
        result = vm.shell.run(script, timeout=10)
        if result.stdout.endswith("\n") or time.monotonic() > deadline:
            return result.stdout
        time.sleep(0.5)
