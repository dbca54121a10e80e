"""The conformance checks every GuestShell and Display must pass, and every episode VM.

The shell checks (exec exit codes, a timeout that kills, a file round trip) take any
GuestShell and its profile; the display checks (screen size and content, a click landing
where it was aimed) take any Display and a way to read where the pointer went. So the real
backends (SSH, WinRM, the QEMU guest agent, VNC) and the fakes the unit tests stand on
(LocalShell, FakeDisplay, the recording proxies around them) are held to the same contract.
`run_selfcheck` runs them all on an episode VM, the pointer read from inside the guest, and
the typing check (shifted symbols arriving exactly). `cu-run check` runs it; the e2e tests
assert on it. The click and typing checks need the profile's desktop probe and are skipped
without one.

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

from runner.display.conditions import DisplayObserver, WaitFor, wait_for
from runner.display.base import Display
from runner.vm.episode import EpisodeVM
from runner.errors import CommandTimeout
from runner.guest.agent import GuestAgent
from runner.guest.base import GuestShell
from runner.profiles import GuestProfile
from runner.profiles.parts import Probes
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
    """Every check on a live episode VM."""
    guest, manifest = vm.image.manifest.guest, vm.image.manifest
    results = run_shell_checks(vm.shell, guest)
    probes = guest.part(Probes)
    desktop = None if probes is None else probes.desktop_probe
    results += run_display_checks(vm.display, (manifest.screen.width, manifest.screen.height), manifest.desktop_color,
                                  click_at=None if desktop is None else desktop.empty_point,
                                  pointer=lambda: _guest_pointer(vm), out=out)
    results.append(_checked("typing", lambda: check_typing(vm, out)))
    return results + run_first_day_checks(vm)


def run_first_day_checks(vm: EpisodeVM) -> list[CheckResult]:
    """What a lab's first day needs to know about its image, each a check with its figure: how long
    the guest took to answer after its start, one round trip on each channel, the screen as the
    guest draws it, the desktop check's answer, and the desktop profile's size with the time the
    hand-home step takes over it (each episode runs that step within ADMIN_STEP_TIMEOUT)."""
    return [_checked("shell after start", lambda: _shell_after_start(vm)),
            _checked("user shell round trip", lambda: _round_trip(vm.shell)),
            _checked("admin shell round trip", lambda: _round_trip(vm.admin_shell)),
            _checked("screen size", lambda: _screen_size(vm)),
            _checked("desktop ready check", lambda: _desktop_ready(vm)),
            _checked("desktop profile", lambda: _profile_scale(vm))]


def _shell_after_start(vm: EpisodeVM) -> str:
    phases = vm.timings.phases
    started = "restore" if "restore" in phases else "domain_start"
    return (f"the shell answered {phases.get('shell_ready', 0):.1f} s after the VM's "
            f"{'restore' if started == 'restore' else 'start'} ({phases.get(started, 0):.1f} s)")


def _round_trip(shell: GuestShell) -> str:
    started = time.monotonic()
    result = shell.run("exit 0", timeout=60)
    if not result.ok:
        raise CheckFailed(f"a command that does nothing exited {result.exit_code}: {result.stderr.strip()[-200:]}")
    return f"{time.monotonic() - started:.2f} s for a command that does nothing"


def _screen_size(vm: EpisodeVM) -> str:
    size = png_size(vm.display.screenshot())
    wanted = (vm.image.manifest.screen.width, vm.image.manifest.screen.height)
    if size != wanted:
        raise CheckFailed(f"the guest draws {size[0]}x{size[1]}; the image manifest says {wanted[0]}x{wanted[1]}")
    return f"{size[0]}x{size[1]}, as the manifest says"


def _desktop_ready(vm: EpisodeVM) -> str:
    check = vm.image.manifest.desktop_ready_check
    if check is None:
        raise Skipped("the image has no desktop-ready check")
    result = vm.shell.run(check, timeout=60)
    if not result.ok:
        raise CheckFailed(f"exited {result.exit_code} on a desktop that is up: {result.stderr.strip()[-200:]}")
    return "exits 0 as the desktop user"


def _profile_scale(vm: EpisodeVM) -> str:
    from runner.tasks.scripts import ADMIN_STEP_TIMEOUT

    guest, user = vm.image.manifest.guest, vm.desktop_user
    counted = vm.admin_shell.run(probes_of(guest).count_items_script(user.home), timeout=300)
    if not counted.ok or not counted.stdout.strip().isdigit():
        raise CheckFailed(f"could not count the items of {user.home}: {counted.stderr.strip()[-200:]}")
    started = time.monotonic()
    handed = vm.admin_shell.run(guest.scripts.hand_home_script(user), timeout=ADMIN_STEP_TIMEOUT)
    took = time.monotonic() - started
    if not handed.ok:
        raise CheckFailed(f"the hand-home step failed after {took:.1f} s: {handed.stderr.strip()[-200:]}")
    detail = f"{counted.stdout.strip()} items in {user.home}; hand-home took {took:.1f} s of its {ADMIN_STEP_TIMEOUT:.0f} s"
    if took > ADMIN_STEP_TIMEOUT / 2:
        raise CheckFailed(detail + ": too close to the limit")
    return detail


def run_shell_checks(shell: GuestShell, guest: GuestProfile) -> list[CheckResult]:
    """The GuestShell contract: exit codes and stderr, a timeout that kills what it ran, files up and back."""
    return [_checked("exec", lambda: check_exec(shell, guest)),
            _checked("exec timeout", lambda: check_exec_timeout(shell, guest)),
            _checked("file round trip", lambda: check_files(shell, guest))]


def run_display_checks(display: Display, size: tuple[int, int], desktop_color: str | None, *,
                       click_at: tuple[int, int] | None, pointer: Callable[[], tuple[int, int]],
                       out: Path | None = None) -> list[CheckResult]:
    """The Display contract: a screenshot of SIZE showing the desktop, and a click at CLICK_AT
    landing there, as POINTER reads it (inside the guest, for a real VM)."""
    return [_checked("screenshot", lambda: check_screenshot(display, size, desktop_color, out)),
            _checked("click lands", lambda: check_click(display, click_at, pointer))]


def _checked(name: str, check: Callable[[], str]) -> CheckResult:
    started = time.monotonic()
    try:
        detail, ok = check(), True
    except Skipped as exc:
        detail, ok = f"skipped: {exc}", True
    except CheckFailed as exc:
        detail, ok = str(exc), False
    except Exception as exc:  # noqa: BLE001 - a check that crashed failed; the others still run
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return CheckResult(name, ok, detail, round(time.monotonic() - started, 2))


def check_exec(shell: GuestShell, guest: GuestProfile) -> str:
    probe, expected = probes_of(guest).selfcheck_probe()
    result = shell.run(probe, timeout=30)
    ensure(result.exit_code == 0 and expected in result.stdout, f"{probe} gave {result}")
    failing = shell.run(probes_of(guest).selfcheck_failing(), timeout=30)
    ensure((failing.exit_code, failing.stderr.strip()) == (3, "to-stderr"), f"exit 3 gave {failing}")
    return result.stdout.strip()


def check_exec_timeout(shell: GuestShell, guest: GuestProfile) -> str:
    sleep, leftovers = probes_of(guest).selfcheck_sleep()
    started = time.monotonic()
    try:
        shell.run(sleep, timeout=2)
    except CommandTimeout:
        took = time.monotonic() - started
        ensure(took < 20, f"timeout took {took:.1f} s to fire")
        leftover = shell.run(leftovers, timeout=30).stdout.strip()
        ensure(not leftover, f"the timed-out command is still running in the guest: pids {leftover}")
        return f"killed after {took:.1f} s"
    raise CheckFailed("a 60 s sleep with a 2 s timeout returned instead of timing out")


def check_files(shell: GuestShell, guest: GuestProfile) -> str:
    remote = probes_of(guest).selfcheck_temp_path()
    payload = os.urandom(256 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        src, back = Path(tmp) / "up.bin", Path(tmp) / "down.bin"
        src.write_bytes(payload)
        shell.put(src, remote)
        digest = shell.run(probes_of(guest).selfcheck_hash(remote), timeout=30).stdout.split()[0]
        ensure(digest == hashlib.sha256(payload).hexdigest(), "the guest's copy differs")
        shell.get(remote, back)
        ensure(back.read_bytes() == payload, "the copy fetched back differs")
    return "256 KiB up and back, sha256 equal"


def check_screenshot(display: Display, size: tuple[int, int], color: str | None, out: Path | None) -> str:
    png = display.screenshot()
    ensure(png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    got = png_size(png)
    ensure(got == size, f"screenshot is {got}, the image says {size[0]}x{size[1]}")
    ensure(not is_blank(png), "the screen is one flat colour")
    share = color_fraction(png, color) if color else 1.0
    ensure(share > 0.15, f"only {share:.0%} of the screen shows the desktop colour {color}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "screenshot.png").write_bytes(png)
    return f"{got[0]}x{got[1]} PNG, {share:.0%} desktop colour"


def check_click(display: Display, at: tuple[int, int] | None, pointer: Callable[[], tuple[int, int]]) -> str:
    if at is None:
        raise Skipped("no bare stretch of desktop is known for this guest (no desktop probe)")
    x, y = at
    display.click(x, y)
    seen = pointer()
    ensure(seen == (x, y), f"clicked at ({x}, {y}), the pointer is at {seen}")
    return f"pointer at ({x}, {y})"


def check_typing(vm: EpisodeVM, out: Path | None) -> str:
    probe, guest = _probe(vm), vm.image.manifest.guest
    typed_path, symbols_path = probe.scratch
    for path in probe.scratch:
        vm.shell.run(guest.scripts.remove_script(path), timeout=30)
    vm.display.click(*probe.terminal_point)
    command = vm.image.manifest.guest_agent
    if command:  # keys sent before the focus moves go to another window
        wait_for(WaitFor(focused=probe.terminal_focus, timeout=60),
                 DisplayObserver(vm.display, GuestAgent(vm.shell, command, guest.scripts.quote_arguments)))
    vm.display.type(probes_of(guest).typing_line(TYPED_TEXT, typed_path))
    vm.display.type(probes_of(guest).typing_line(SYMBOLS, symbols_path))
    typed = _wait_file(vm, typed_path)
    ensure(typed == TYPED_TEXT + "\n", f"{typed_path} holds {typed!r}")
    symbols = _wait_file(vm, symbols_path)
    ensure(symbols == SYMBOLS + "\n", f"typed {SYMBOLS!r}, the guest got {symbols!r}")
    if out is not None:
        (out / "typed.png").write_bytes(vm.display.screenshot())
    return f"{TYPED_TEXT} and every US symbol arrived exactly"


def probes_of(guest: GuestProfile) -> Probes:
    """GUEST's conformance probes; Skipped, for the check that asks, when it has none."""
    probes = guest.part(Probes)
    if probes is None:
        raise Skipped(f"{guest.name} guests have no conformance probes")
    return probes


def _probe(vm: EpisodeVM):
    probe = probes_of(vm.image.manifest.guest).desktop_probe
    if probe is None:
        raise Skipped(f"the {vm.image.manifest.profile} profile has no desktop probe")
    return probe


def _guest_pointer(vm: EpisodeVM) -> tuple[int, int]:
    result = vm.shell.run(_probe(vm).pointer_script, timeout=30)
    values = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    ensure("X" in values, f"the guest's pointer probe said {result}")
    return int(values["X"]), int(values["Y"])


def _wait_file(vm: EpisodeVM, path: str, timeout: float = 120.0) -> str:
    script = probes_of(vm.image.manifest.guest).read_text_script(path)
    deadline = time.monotonic() + timeout
    while True:
        result = vm.shell.run(script, timeout=30)
        if result.stdout.endswith("\n") or time.monotonic() > deadline:
            return result.stdout
        time.sleep(0.5)
