"""After the agent: its processes in the guest stop, so they play no part in verification.

A hostile agent can leave a process behind that waits for the verifier and tampers with
it, or with the files it reads, while it runs. So before the listings, the verifier and
the checks, every process of the desktop user is stopped, through the admin channel:

- By default (Linux) the user's whole slice is frozen (cgroup v2 freezer): the agent's
  processes, however they were started or daemonized, stop at once and stay stopped; the
  session is not torn down, so nothing respawns. Any process of the user outside that
  slice is killed.
- A task that needs the desktop alive while it is verified (``desktop_in_verify: true``)
  keeps what was running before the agent began; everything of the user's started since
  is killed. So is the same on Windows, where the desktop user's processes started during
  the episode are stopped.

A stop that fails after the agent ran is the agent's doing: the caller scores it.
"""

from __future__ import annotations

import shlex

from runner.errors import InfraError
from runner.guest.base import GuestShell
from runner.catalog import DesktopUser

QUARANTINE_TIMEOUT = 60.0


def user_processes(admin: GuestShell, user: DesktopUser, profile: str) -> set[int]:
    """The PIDs of the desktop user's processes now: taken just before the agent starts."""
    if profile == "windows":
        script = (f"Get-Process -IncludeUserName | Where-Object {{ $_.UserName -like '*\\{user.name}' }} | "
                  "ForEach-Object { $_.Id }\r\n")
    else:
        script = f"pgrep -u {shlex.quote(user.name)} || true\n"
    result = admin.run(script, timeout=30)
    if not result.ok:
        raise InfraError(f"could not list {user.name}'s processes: {result.stderr.strip()[-300:]}")
    return {int(word) for word in result.stdout.split() if word.isdigit()}


def quarantine(admin: GuestShell, user: DesktopUser, profile: str, *, keep: set[int] | None = None) -> str:
    """Stops the agent's processes; KEEP: the PIDs to spare (desktop_in_verify), else freeze all.
    Returns what was done, for the episode's log; raises InfraError when it could not be done."""
    if profile == "windows":
        script = _windows_stop_script(user, keep or set())
    elif keep is None:
        script = _linux_freeze_script(user)
    else:
        script = _linux_kill_new_script(user, keep)
    result = admin.run(script, timeout=QUARANTINE_TIMEOUT)
    if not result.ok:
        raise InfraError(f"could not stop {user.name}'s processes before verification (exit {result.exit_code}): "
                         f"{(result.stderr.strip() or result.stdout.strip())[-300:]}")
    return result.stdout.strip()


def _linux_kill_outside(slice_test: str) -> str:
    """Kills, until none is left, every process of user $u for which SLICE_TEST fails."""
    return (
        "for round in $(seq 50); do\n"
        "    left=0\n"
        "    for p in $(pgrep -u \"$u\"); do\n"
        f"        {slice_test} && continue\n"
        "        kill -9 \"$p\" 2>/dev/null && left=1\n"
        "    done\n"
        "    [ $left = 0 ] && break\n"
        "    sleep 0.05\n"
        "done\n")


def _linux_freeze_script(user: DesktopUser) -> str:
    return (
        f"u=$(id -u {shlex.quote(user.name)}) || exit 3\n"
        "cg=/sys/fs/cgroup/user.slice/user-$u.slice\n"
        "if [ -d \"$cg\" ]; then\n"
        "    echo 1 > \"$cg/cgroup.freeze\" || exit 4\n"
        "    for _ in $(seq 200); do grep -qx 'frozen 1' \"$cg/cgroup.events\" && break; sleep 0.05; done\n"
        "    grep -qx 'frozen 1' \"$cg/cgroup.events\" || { echo \"the user's slice did not freeze\" >&2; exit 5; }\n"
        "fi\n"
        + _linux_kill_outside("grep -q \"/user-$u.slice/\" \"/proc/$p/cgroup\" 2>/dev/null")
        + "echo \"froze $(wc -l < \"$cg/cgroup.procs\" 2>/dev/null || echo 0) processes of the desktop user\"\n")


def _linux_kill_new_script(user: DesktopUser, keep: set[int]) -> str:
    kept = " ".join(str(p) for p in sorted(keep))
    return (
        f"u=$(id -u {shlex.quote(user.name)}) || exit 3\n"
        f"keep=' {kept} '\n"
        + _linux_kill_outside("case \"$keep\" in *\" $p \"*) true;; *) false;; esac")
        + "echo \"killed the desktop user's processes started during the episode\"\n")


def _windows_stop_script(user: DesktopUser, keep: set[int]) -> str:
    kept = ",".join(str(p) for p in sorted(keep)) or "-1"
    return (
        f"$keep = @({kept})\r\n"
        "foreach ($round in 1..20) {\r\n"
        f"    $new = @(Get-Process -IncludeUserName | Where-Object {{ $_.UserName -like '*\\{user.name}' -and "
        "$keep -notcontains $_.Id })\r\n"
        "    if ($new.Count -eq 0) { break }\r\n"
        "    $new | Stop-Process -Force -ErrorAction SilentlyContinue\r\n"
        "    Start-Sleep -Milliseconds 100\r\n"
        "}\r\n"
        "Write-Output \"stopped the desktop user's processes started during the episode\"\r\n")
