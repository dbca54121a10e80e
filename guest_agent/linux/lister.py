# cu-run: runs as root
"""The write-set lister: every entry under the watched roots, one line each, bounded.

Runs as root in the guest through the admin channel (runner.profiles.linux: list_script), before
the agent and after it, as `python3 -I -S -c TEXT ARGS`: -I so nothing of the agent's (the
current folder, PYTHON* variables, a user site) is imported, -S for no site module, which the
lister needs none of (half of Python's start under TCG).

Under TCG each module Python imports costs: json and hashlib took ~0.4 s of a listing's ~0.7 s in
the guest (docs/performance.md). So the arguments come as words, the output is lines of fields
with each path and link target in hex (any bytes a name holds survive, tabs and newlines too), the
SHA-256 is the interpreter's built-in one where there is one, and the ignore patterns are matched
by a few lines here rather than by importing re or fnmatch.

Arguments: HASH_MAX (bytes: a bigger file is not hashed), BUDGET (seconds of hashing), MAX_ENTRIES,
SINCE_NS (a file unchanged since then is not hashed), N_IGNORE, then N_IGNORE ignore patterns,
then the roots.

A line: KIND MODE UID GID SIZE MTIME_NS CTIME_NS INODE SHA HEX-PATH HEX-TARGET XATTRS, where SHA is
the digest, "-" (not hashed) or "!" and the reason it could not be read, HEX-TARGET is a link's
target or "-", and XATTRS the extended attributes (see attributes()). Last: "complete" or
"truncated", and the guest's clock when it began.
"""
import os
import stat
import sys
import time

try:
    from _sha256 import sha256
except ImportError:
    from hashlib import sha256
started_ns = time.time_ns()
hash_max, budget, max_entries, since_ns, n_ignore = (int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]),
                                                     int(sys.argv[4]), int(sys.argv[5]))
ignore = [p.rstrip("/").split("/") for p in sys.argv[6:6 + n_ignore]]
roots = sys.argv[6 + n_ignore:]
started = time.monotonic()
seen, truncated = set(), False
out = []

def wild(pattern, name):
    # * and ? within one name, by backtracking over the last *
    p = n = 0
    star = mark = -1
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]):
            p += 1
            n += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, n
            p += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            n = mark
        else:
            return False
    return all(c == "*" for c in pattern[p:])

def fits(pattern, parts):
    # ** as a whole name stands for any number of names; a match of a parent covers what is inside
    if not pattern:
        return True
    if pattern[0] == "**":
        return any(fits(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and wild(pattern[0].replace("**", "*"), parts[0]) and fits(pattern[1:], parts[1:])

def ignored(path):
    parts = path.split("/")
    return any(fits(p, parts) for p in ignore)

def kind_of(mode):
    return "f" if stat.S_ISREG(mode) else "d" if stat.S_ISDIR(mode) else "l" if stat.S_ISLNK(mode) else "o"

def why(exc):
    return "!" + (os.strerror(exc.errno).replace(" ", "_") if exc.errno else type(exc).__name__)

def digest(path, st):
    if st.st_size > hash_max or st.st_ctime_ns < since_ns or time.monotonic() - started > budget or ignored(path):
        return "-"
    h = sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            while True:
                block = os.read(fd, 1 << 20)
                if not block:
                    break
                h.update(block)
        finally:
            os.close(fd)
    except OSError as exc:
        return why(exc)
    return h.hexdigest()

def attributes(path):
    # Every extended attribute, ACLs (system.posix_acl_*) included: NAME:SHA256-OF-VALUE, hex
    # names, comma-joined in name order; "-" for none, "!" and why where they cannot be read.
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
        return ",".join(f"{os.fsencode(n).hex()}:{sha256(os.getxattr(path, n, follow_symlinks=False)).hexdigest()}"
                        for n in names) or "-"
    except OSError as exc:
        return why(exc)

def line(kind, st, sha, path, target):
    out.append(f"{kind} {stat.S_IMODE(st.st_mode)} {st.st_uid} {st.st_gid} {st.st_size} {st.st_mtime_ns} "
               f"{st.st_ctime_ns} {st.st_ino} {sha} {os.fsencode(path).hex()} {target} {attributes(path)}")

def add(path):
    # None: the entry cap is reached; "": nothing to enter (seen, gone, not a folder, not
    # listable); else the kind, "x" for a folder on another filesystem (listed, not entered).
    global truncated
    if path in seen:  # roots that overlap
        return ""
    if len(seen) >= max_entries:
        truncated = True
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""  # gone while listing
    except OSError as exc:
        # Listed all the same, so what cannot be examined shows as a change, never as nothing.
        seen.add(path)
        out.append(f"? 0 0 0 0 0 0 0 {why(exc)} {os.fsencode(path).hex()} - -")
        return ""
    seen.add(path)
    kind = kind_of(st.st_mode)
    target = "-"
    if kind == "l":
        try:
            target = os.fsencode(os.readlink(path)).hex() or "-"
        except OSError as exc:
            line(kind, st, why(exc), path, "-")
            return ""
    line(kind, st, digest(path, st) if kind == "f" else "-", path, target)
    return kind if kind != "d" or st.st_dev == device else "x"

def unlistable(exc):
    # A folder whose entries cannot be read: its line says why, so it counts as changed.
    path = exc.filename if isinstance(exc.filename, str) else os.fsdecode(exc.filename or b"")
    for i in range(len(out) - 1, -1, -1):
        fields = out[i].split(" ")
        if fields[9] == os.fsencode(path).hex():
            fields[8] = why(exc)
            out[i] = " ".join(fields)
            return
    out.append(f"? 0 0 0 0 0 0 0 {why(exc)} {os.fsencode(path).hex()} - -")

for root in roots:
    if not os.path.lexists(root):
        continue
    device = os.lstat(root).st_dev
    if add(root) != "d":
        continue
    for folder, dirs, files in os.walk(root, onerror=unlistable):
        kept = []
        for name in sorted(dirs):
            kind = add(os.path.join(folder, name))
            if kind is None:
                break
            if kind == "d":
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            if add(os.path.join(folder, name)) is None:
                break
        if truncated:
            break
out.append(f"{'truncated' if truncated else 'complete'} {started_ns}")
sys.stdout.write("\n".join(out) + "\n")
