"""The X sweep after the kill (guest_agent/linux/x_sweep.py, as the quarantine's x_sweep step runs
it), against a real X server (Xvfb, which has the X-Resource extension as Xorg does), run as root
as in the guest: a window whose client set RetainPermanent and exited outlives the client until
the sweep frees it; live clients of kept processes, and other accounts' clients, are left alone."""

import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.profiles import DesktopUser
from runner.profiles.linux import quarantine_steps

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("Xvfb") is None,
                                reason="runs Xvfb as root (scripts/setup-host.sh --test installs xvfb)")

COOKIE = bytes(range(16))
NOBODY = 65534

# A client in a few lines of ctypes and libX11: a window named NAME, its close-down mode
# RetainPermanent when asked (1), then it exits, or waits for stdin to close ("wait").
CLIENT = r"""
import ctypes, sys
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
x.XDefaultRootWindow.restype = ctypes.c_ulong
x.XCreateSimpleWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong] + [ctypes.c_int] * 4 + [ctypes.c_uint] + [ctypes.c_ulong] * 2
x.XCreateSimpleWindow.restype = ctypes.c_ulong
for f in ("XStoreName", "XMapWindow", "XSync", "XSetCloseDownMode", "XCloseDisplay"):
    getattr(x, f).argtypes = [ctypes.c_void_p] + {"XStoreName": [ctypes.c_ulong, ctypes.c_char_p],
                                                  "XMapWindow": [ctypes.c_ulong], "XSync": [ctypes.c_int],
                                                  "XSetCloseDownMode": [ctypes.c_int], "XCloseDisplay": []}[f]
d = x.XOpenDisplay(None)
if not d:
    sys.exit("no display")
w = x.XCreateSimpleWindow(d, x.XDefaultRootWindow(d), 0, 0, 200, 100, 0, 0, 0)
x.XStoreName(d, w, sys.argv[1].encode())
x.XMapWindow(d, w)
if sys.argv[2] == "retain":
    x.XSetCloseDownMode(d, 1)
x.XSync(d, 0)
print("up", flush=True)
if sys.argv[2] == "wait":
    sys.stdin.read()
x.XCloseDisplay(d)
"""


def start_xvfb(auth: Path) -> tuple[str, subprocess.Popen]:
    """Xvfb on the first display from :60 it can hold, and the display. Another test run may take
    a display between the look and the start (two runs of this module at once did): a server whose
    start fails, or whose display's lock names another process, was not ours, and the next is tried."""
    for number in range(60, 200):
        if Path(f"/tmp/.X{number}-lock").exists() or Path(f"/tmp/.X11-unix/X{number}").exists():
            continue
        # -noreset: as on a desktop, whose clients never all leave; else Xvfb resets when the last
        # client goes, and that frees what was retained.
        server = subprocess.Popen(["Xvfb", f":{number}", "-auth", str(auth), "-nolisten", "tcp", "-noreset"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lock, socket_path = Path(f"/tmp/.X{number}-lock"), Path(f"/tmp/.X11-unix/X{number}")
        deadline = time.monotonic() + 30
        while server.poll() is None and not (socket_path.exists() and lock.exists()):
            assert time.monotonic() < deadline, "Xvfb did not start"
            time.sleep(0.05)
        try:
            holder = int(lock.read_text().strip()) if server.poll() is None else None
        except (OSError, ValueError):
            holder = None
        if holder == server.pid:
            return str(number), server
        server.kill()
        server.wait()
    raise AssertionError("no free X display from :60 to :199")


@pytest.fixture
def xserver():
    """Xvfb on the first display from :60 that no other X server holds (its lock file, which the
    sweep reads as it does the guest's, is made only for a display given by number)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="cu-run-test-x-"))  # nobody's clients read the cookie too
    folder.chmod(0o755)
    auth = folder / "serverauth"
    entry = b"".join(struct.pack(">H", len(field)) + field
                     for field in (b"", b"", b"MIT-MAGIC-COOKIE-1", COOKIE))
    auth.write_bytes(struct.pack(">H", 0xFFFF) + entry)  # FamilyWild, any display: as libXau reads it
    auth.chmod(0o644)
    display, server = start_xvfb(auth)
    yield {**os.environ, "DISPLAY": f":{display}", "XAUTHORITY": str(auth), "X_NUMBER": display}
    server.terminate()  # SIGTERM: Xvfb removes its lock file and socket (a SIGKILL leaves them behind)
    server.wait(timeout=30)
    shutil.rmtree(folder)


def client(env, name: str, mode: str, user: int | None = None) -> subprocess.Popen:
    """A client as USER (None: root) that says "up" once its window is mapped."""
    as_user = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    proc = subprocess.Popen([*as_user, sys.executable, "-I", "-S", "-c", CLIENT, name, mode], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n", f"client {name} did not come up"
    return proc


def windows(env) -> str:
    return subprocess.run(["xwininfo", "-root", "-children"], env=env, capture_output=True, text=True,
                          check=True).stdout


def sweep_script(display: str, uid: int, keep: frozenset[str] | None) -> str:
    """The quarantine's own x_sweep step, on DISPLAY (the guest's is :0) for the user UID: only dead
    clients go when KEEP is None (as after the default quarantine), else also the unkept ones."""
    return (quarantine_steps(DesktopUser("nobody", "/nonexistent"), keep) + f"X_DISPLAY={display}\nu={uid}\n"
            + ("x_sweep dead\n" if keep is None else "x_sweep unkept\n"))


def sweep(env, keep: frozenset[str] | None) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", sweep_script(env["X_NUMBER"], NOBODY, keep)], capture_output=True, text=True,
                          timeout=60)


def start_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_a_window_retained_after_its_client_exited_is_freed(xserver):
    retained = client(xserver, "Fake Editor - report.txt", "retain")
    assert retained.wait(timeout=30) == 0
    assert '"Fake Editor - report.txt"' in windows(xserver)  # outlived its client: the attack
    done = sweep(xserver, None)
    assert done.returncode == 0, done.stderr
    assert "freed the X resources of 1 clients" in done.stdout
    assert "Fake Editor" not in windows(xserver)


def test_under_desktop_in_verify_only_kept_and_other_accounts_clients_stay(xserver):
    kept = client(xserver, "kept-app", "wait", NOBODY)
    unkept = client(xserver, "agent-app", "wait", NOBODY)
    roots = client(xserver, "roots-app", "wait")
    try:
        done = sweep(xserver, frozenset({f"{kept.pid}:{start_of(kept.pid)}"}))
        assert done.returncode == 0, done.stderr
        shown = windows(xserver)
        assert '"kept-app"' in shown and '"roots-app"' in shown and "agent-app" not in shown
        # Frozen (the default quarantine): a live client of the user's stays, dead ones go.
        assert sweep(xserver, None).returncode == 0 and '"kept-app"' in windows(xserver)
    finally:
        for proc in (kept, unkept, roots):
            proc.kill()
            proc.wait()


def test_a_spoiled_cookie_fails_the_sweep(xserver):
    first = client(xserver, "first", "retain")  # the server has read its cookie by now
    assert first.wait(timeout=30) == 0
    auth = Path(xserver["XAUTHORITY"])
    loaded = auth.stat()
    auth.write_bytes(auth.read_bytes()[:-16] + bytes(16))  # the agent's own cookie in the server's file
    # The X server reloads its auth file when the file's mtime, in whole seconds, is newer than at
    # its last load, and a reload adds the file's cookies to those it holds (xserver os/auth.c,
    # CheckAuthorization): a spoil that fell in a later second than the file was written made the
    # server accept the spoiled cookie too, and the sweep connected. The server keeps the cookie it
    # loaded; only the file the sweep reads is changed.
    os.utime(auth, ns=(loaded.st_atime_ns, loaded.st_mtime_ns))
    done = sweep(xserver, None)
    assert done.returncode == 9 and "refused the connection" in done.stderr


def test_an_auth_file_made_a_fifo_fails_the_sweep_at_once(xserver):
    # startx makes the auth file as the user: the agent may put a FIFO in its place, where root's
    # plain open() once waited for a writer until the quarantine's time ran out.
    auth = Path(xserver["XAUTHORITY"])
    auth.unlink()
    os.mkfifo(auth)
    done = sweep(xserver, None)
    assert done.returncode == 9 and "not a regular file" in done.stderr, done.stderr


def test_no_x_server_is_nothing_to_sweep():
    done = subprocess.run(["sh", "-c", sweep_script("999", 1, None)], capture_output=True, text=True)
    assert done.returncode == 0 and "no X server on :999" in done.stdout


def test_a_link_where_the_servers_lock_was_is_not_followed(tmp_path):
    # The agent may make /tmp/.X<n>-lock a link (to a root file naming a root process) where the
    # server's lock is gone, and a socket of its own: the sweep, as root, opens the lock without
    # following it and fails, rather than trusting what the link led to.
    number = "997"
    lock, socket_path = Path(f"/tmp/.X{number}-lock"), Path(f"/tmp/.X11-unix/X{number}")
    if lock.exists() or lock.is_symlink() or socket_path.exists():
        pytest.skip(f"display :{number} is in use here")
    target = tmp_path / "roots-pid"
    target.write_text("1\n")  # root's file, naming init
    socket_path.parent.mkdir(exist_ok=True)
    listener = __import__("socket").socket(__import__("socket").AF_UNIX)
    listener.bind(str(socket_path))
    lock.symlink_to(target)
    try:
        done = subprocess.run(["sh", "-c", sweep_script(number, NOBODY, None)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 9 and "cannot find the X server" in done.stderr, (done.stdout, done.stderr)
    finally:
        lock.unlink()
        listener.close()
        socket_path.unlink()
