#!/usr/bin/env python3
"""A FAKE container engine's CLI, for tests on a host where none runs: the narrowest seam of
runner.network.services.ContainerService, which drives docker or podman through their commands.

An "image" is a folder under $FAKE_IMAGES named by the image (its / and : made _): `run` serves it
over HTTP on the published host port with python's http.server, in a process of its own; an image
folder holding a file `never-ready` runs a process that never listens. Every command is appended
to $FAKE_STATE/commands, and each container's process id and port are kept in $FAKE_STATE/NAME.pid
and NAME.port.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

state, images = Path(os.environ["FAKE_STATE"]), Path(os.environ["FAKE_IMAGES"])
state.mkdir(parents=True, exist_ok=True)
args = sys.argv[1:]
with (state / "commands").open("a") as log:
    log.write(" ".join(args) + "\n")

if args[0] == "run":
    name = args[args.index("--name") + 1]
    host, port, _inner = args[args.index("-p") + 1].split(":")
    folder = images / args[-1].replace("/", "_").replace(":", "_")
    if not folder.is_dir():
        sys.exit(f"Error: {args[-1]}: image not known")
    command = [sys.executable, "-c", "import time; time.sleep(600)"] if (folder / "never-ready").exists() else \
        [sys.executable, "-m", "http.server", port, "--bind", host, "--directory", str(folder)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    (state / f"{name}.pid").write_text(str(process.pid))
    (state / f"{name}.port").write_text(port)
    print(f"fake{process.pid:08x}")
elif args[0] == "rm":
    # As an engine's `rm -f` does, it returns once the container is gone: its port closed.
    pid_file, port_file = state / f"{args[-1]}.pid", state / f"{args[-1]}.port"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", int(port_file.read_text())), timeout=1).close()
            except OSError:
                break
            time.sleep(0.05)
        pid_file.unlink()
        port_file.unlink()
elif args[0] == "logs":
    print(f"fake logs of {args[-1]}")
else:
    sys.exit(f"the fake engine does not do {args[0]}")
