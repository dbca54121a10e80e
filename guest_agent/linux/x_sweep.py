# cu-run: runs as root
"""After the kill: the X server forgets what dead clients left behind.

Run as root in the guest by the desktop_in_verify quarantine (guest_agent/linux/quarantine.sh,
x_sweep), as `python3 -I -S -c TEXT DISPLAY UID KEEP MODE`: DISPLAY the display's number ("0"),
UID the desktop user's, KEEP the kept processes (PID:START, space-separated), MODE "dead" (only
clients whose processes are gone) or "unkept" (also the user's clients that are not kept). Exit
codes: 0 swept (or no X server on that display), 9 the sweep failed (it says why).

A client that sets its close-down mode to RetainPermanent (or RetainTemporary) and exits leaves
its windows on the screen, with the properties it gave them: a window classed and titled as the
app the verifier looks for outlives the agent's process, and no kill reaches it. The X server
knows each client's process (the X-Resource extension's LocalClientPID, taken from the socket's
peer credentials, not from anything the client says), and keeps a retained client's entry, its
PID included, until the client is killed. So, once the agent's processes are gone:

- every client whose process is gone (no such PID, or a zombie) is killed (KillClient), which
  frees all its resources;
- under desktop_in_verify, so is a client of the desktop user's process that is not kept (what
  ran before the agent, by PID and start time);
- clients the server cannot tie to a process, other than the server's own, likewise.

Clients of other accounts' processes (root's) are left alone.

The sweep is a few lines of X11 protocol over the display's Unix socket, in the guest's python3
with no X library: linux-test has none for Python, and libX11 cannot send another extension's
requests. It authenticates with the cookie of the server's own -auth file, named on the X
server's command line (the PID in the server's lock file, both root's, out of the agent's reach);
a cookie the agent spoiled fails the sweep, and with it the quarantine, which counts against the
agent. The default quarantine has no sweep: the X server, started from the user's session, is
frozen with the user's slice, so no verifier can ask it anything.
"""
import os
import socket
import stat
import struct
import sys

display, uid, keep = sys.argv[1], int(sys.argv[2]), set(sys.argv[3].split())
only_dead = sys.argv[4] == "dead"

def fail(why):
    sys.stderr.write(f"the X sweep failed: {why}\n")
    sys.exit(9)

path = "/tmp/.X11-unix/X" + display
if not os.path.exists(path):
    print(f"no X server on :{display}")
    sys.exit(0)

def owner_of(pid, effective=False):
    # The real uid (whose process it is), or the effective one (whose rights it has).
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[2 if effective else 1])
    except OSError:
        return None

def auth_file():
    # The -auth file on the X server's own command line. The server is the PID in its lock file,
    # which it made as root: the agent can change neither.
    lock = f"/tmp/.X{display}-lock"
    try:
        # Opened without following a link (the agent may make one where the server's lock is
        # gone: /tmp is everyone's), and its owner read from what was opened, not from the name.
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd) as f:
            if os.fstat(f.fileno()).st_uid != 0:
                fail(f"{lock} is not root's")
            pid = f.read(64).strip()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (OSError, ValueError) as exc:
        fail(f"cannot find the X server of :{display}: {exc}")
    # Xorg.wrap is setuid root: the server has root's rights, but its real uid is the user's,
    # so the agent could have stopped it (a kill needs no more). Continued, it answers.
    if not pid.isdigit() or owner_of(pid, effective=True) != 0:
        fail(f"the X server of :{display} does not run with root's rights")
    os.kill(int(pid), 18)  # SIGCONT
    return argv[argv.index(b"-auth") + 1] if b"-auth" in argv[:-1] else None

def cookie(name):
    # The auth file is the user's (startx made it): opened without following a link and without
    # blocking (a FIFO would hang the quarantine), then read only if it is a regular file.
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                fail("the server's auth file is not a regular file")
            data = f.read(1 << 16)
    except OSError as exc:
        fail(f"cannot read the server's auth file: {exc.strerror}")
    i = 0
    while i + 2 <= len(data):
        fields = []
        i += 2  # family
        for _ in range(4):  # address, display number, auth name, auth data
            if i + 2 > len(data):
                fail("the server's auth file is cut short")
            (n,) = struct.unpack(">H", data[i:i + 2])
            fields.append(data[i + 2:i + 2 + n])
            i += 2 + n
        if fields[2] == b"MIT-MAGIC-COOKIE-1":
            return fields[2], fields[3]
    fail("no MIT-MAGIC-COOKIE-1 in the server's auth file")

def pad(b):
    return b + b"\0" * (-len(b) % 4)

found = auth_file()
name, data = cookie(found) if found else (b"", b"")
x = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
x.settimeout(10)
try:
    x.connect(path)
except OSError as exc:
    fail(f"cannot connect to :{display}: {exc.strerror}")

def read(n):
    out = b""
    while len(out) < n:
        got = x.recv(n - len(out))
        if not got:
            fail("the X server closed the connection")
        out += got
    return out

x.sendall(struct.pack("<BxHHHHxx", 0x6C, 11, 0, len(name), len(data)) + pad(name) + pad(data))
head = read(8)
rest = read(struct.unpack("<H", head[6:8])[0] * 4)
if head[0] != 1:
    fail(f"the X server refused the connection: {rest[:head[1]].decode('latin-1')!r}")
(own_base,) = struct.unpack("<I", rest[4:8])
sequence = 0

def request(body):
    # One request, then its reply (errors raise); requests here all have replies.
    global sequence
    x.sendall(body)
    sequence += 1
    while True:
        packet = read(32)
        if packet[0] == 0 and packet[10] != 113:
            fail(f"X error {packet[1]} on request {packet[10]}")
        # A KillClient's error: the client left between the query and the kill. Nothing to free.
        if packet[0] == 1:
            return packet + read(struct.unpack("<I", packet[4:8])[0] * 4)

ext = b"X-Resource"
reply = request(struct.pack("<BxHHxx", 98, 2 + len(pad(ext)) // 4, len(ext)) + pad(ext))
if not reply[8]:
    fail("the X server has no X-Resource extension")
res = reply[9]

reply = request(struct.pack("<BBH", res, 1, 1))  # XResQueryClients
(count,) = struct.unpack("<I", reply[8:12])
clients = [struct.unpack("<II", reply[32 + 8 * i:40 + 8 * i]) for i in range(count)]
bases = [base for base, _ in clients]
mask = max((m for _, m in clients), default=0x1FFFFF)

# KillClient names a client by one of its resources, not by its base: one ID of each client's,
# from XResQueryResourceBytes over every resource of every client (a retained client's too).
reply = request(struct.pack("<BBHIIII", res, 5, 5, 0, 1, 0, 0))
(count,) = struct.unpack("<I", reply[8:12])
resource_of, at = {}, 32
for _ in range(count):
    (rid,) = struct.unpack("<I", reply[at:at + 4])
    (refs,) = struct.unpack("<I", reply[at + 20:at + 24])
    resource_of.setdefault(rid & ~mask, rid)
    at += 24 + 20 * refs

reply = request(struct.pack("<BBHIII", res, 4, 4, 1, 0, 2))  # XResQueryClientIds: every client's PID
(count,) = struct.unpack("<I", reply[8:12])
pids, at = {}, 32
for _ in range(count):
    client, mask, length = struct.unpack("<III", reply[at:at + 12])
    if mask == 2 and length == 4:
        pids[client] = struct.unpack("<I", reply[at + 12:at + 16])[0]
    at += 12 + length

def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None  # gone
    return None if fields[0] == "Z" else fields[19]

freed = []
for base in bases:
    if base in (0, own_base):  # the server's own client; this one
        continue
    pid = pids.get(base)
    started = start_time(pid) if pid else None
    if started is not None:
        if owner_of(pid) != uid or only_dead or f"{pid}:{started}" in keep:
            continue
    rid = resource_of.get(base)
    if rid is None:  # nothing left to free, and nothing to name it by
        continue
    x.sendall(struct.pack("<BxHI", 113, 2, rid))  # KillClient: all of its resources
    sequence += 1
    freed.append(base)
request(struct.pack("<BxH", 43, 1))  # GetInputFocus: a round trip, so every kill above is done
if freed:
    print(f"freed the X resources of {len(freed)} clients whose processes are gone or were the agent's")
