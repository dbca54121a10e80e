# cu-run: runs as root
"""Hides folders the desktop user may have made, each under an empty read-only tmpfs, without
following a link anywhere on the way to it.

Run as root by the desktop_in_verify quarantine (guest_agent/linux/quarantine.sh,
hide_bus_services), as `python3 -I -S -c TEXT BASE REL [BASE REL ...]`: BASE a folder whose own
name the user cannot change (the user's home; /run/user/UID, which logind made), REL a path below
it that the user may have made. Each part of REL is opened from the one above it with O_NOFOLLOW
and O_DIRECTORY, so a link the agent made leads nowhere, and the tmpfs is mounted on the folder
that was opened (/proc/self/fd/N), never on its name, which the kernel would resolve again.
Prints each folder it hid, by its name; skips one that is not there. Exit codes: 0 done, 10 a
link or a file on the way (the agent made it: the quarantine fails, which counts against it),
7 a mount failed.
"""
import ctypes
import errno
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
libc = ctypes.CDLL(None, use_errno=True)


def opened(base, rel):
    """The folder BASE/REL opened without following a link, or None when a part is not there."""
    try:
        fd = os.open(base, FOLDER)
    except FileNotFoundError:
        return None
    try:
        for part in rel.split("/"):
            below = os.open(part, FOLDER, dir_fd=fd)
            os.close(fd)
            fd = below
    except FileNotFoundError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            sys.stderr.write(f"{base}/{rel}: a link or a file is on the way to it, which is not followed\n")
            sys.exit(10)
        raise
    return fd


pairs = sys.argv[1:]
for base, rel in zip(pairs[0::2], pairs[1::2], strict=True):
    fd = opened(base, rel)
    if fd is None:
        continue
    target = f"/proc/self/fd/{fd}".encode()
    if libc.mount(b"cu-run-quarantine", target, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  b"size=4k,mode=0555") != 0:
        sys.stderr.write(f"{base}/{rel}: mount failed: {os.strerror(ctypes.get_errno())}\n")
        sys.exit(7)
    os.close(fd)
    print(f"{base}/{rel}")
