# cu-run: runs as root
"""The guest's end of the carriers (runner/network/carriers.py), run in a networked episode by the
runner with the guest's own Python (standard library only): as root on Linux, as SYSTEM on
Windows (a scheduled task: guest_agent/windows/network-start.ps1), the same code on either.

It listens on 127.0.0.1:3128, the proxy's address for the guest's applications, and on
0.0.0.0:3129 for the host's carriers, which arrive from 10.0.2.2, the address user-mode
networking gives the host: a connection from anywhere else (a process in the guest) is closed at
once. An application connection takes one idle carrier once it has sent its first bytes (every
client of an HTTP proxy speaks first), and the two are joined until either ends: a connection that
sends nothing (a browser's preconnect) holds no carrier, so idle ones cannot starve the next
request. Each carrier that brings bytes has the host open another. An application that finds no
carrier within CARRIER_WAIT_S of speaking is closed. At most MOST_APPLICATIONS application
connections are open at once, far past what a browser opens; past it a new one is closed at once
(the guest's own; the host's proxy serves its other connections as before).
"""

import asyncio
import sys

HOST_SIDE = "10.0.2.2"
PROXY_PORT, CARRIER_PORT = 3128, 3129
CARRIER_WAIT_S = 30.0
MOST_APPLICATIONS = 512


async def main(host_side: str, proxy_port: int, carrier_port: int, carrier_listen: str,
               most_applications: int = MOST_APPLICATIONS) -> None:
    idle: asyncio.Queue = asyncio.Queue()
    open_applications = 0

    async def carrier(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if not peer or peer[0] != host_side:
            writer.close()
            return
        await idle.put((reader, writer))

    async def application(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_applications
        if open_applications >= most_applications:
            writer.close()
            return
        open_applications += 1
        try:
            await carried(reader, writer)
        finally:
            open_applications -= 1

    async def carried(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await reader.read(65536)
        except (ConnectionError, OSError):
            first = b""
        if not first:  # closed before it said anything
            writer.close()
            return
        deadline = asyncio.get_running_loop().time() + CARRIER_WAIT_S
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                host_reader, host_writer = await asyncio.wait_for(idle.get(), max(left, 0.01))
            except TimeoutError:
                writer.close()
                return
            if not host_reader.at_eof() and not host_writer.is_closing():
                break
            host_writer.close()  # the host closed it while it waited
        host_writer.write(first)
        await asyncio.gather(pipe(reader, host_writer), pipe(host_reader, writer))

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()

    carriers = await asyncio.start_server(carrier, carrier_listen, carrier_port)
    applications = await asyncio.start_server(application, "127.0.0.1", proxy_port)
    print("listening", flush=True)
    async with carriers, applications:
        await asyncio.gather(carriers.serve_forever(), applications.serve_forever())


def wait_to_be_woken(fifo: str) -> None:
    """Kept in a warm state: loaded, its modules imported, listening on nothing, until a line (or
    its end) comes through FIFO, which only root can open (guest_agent/linux/network-warm.sh)."""
    print("dormant", flush=True)
    with open(fifo, "rb") as wake:
        wake.readline()


if __name__ == "__main__":
    # --wake FIFO: dormant until woken. Then arguments for a test on one host: the host side's
    # address, the two ports, where carriers are listened for, and optionally the most
    # application connections. In a guest there are none.
    args = sys.argv[1:]
    if args[:1] == ["--wake"]:
        wait_to_be_woken(args[1])
        args = args[2:]
    args = args or [HOST_SIDE, str(PROXY_PORT), str(CARRIER_PORT), "0.0.0.0"]
    try:
        asyncio.run(main(args[0], int(args[1]), int(args[2]), args[3],
                         int(args[4]) if len(args) > 4 else MOST_APPLICATIONS))
    except KeyboardInterrupt:
        sys.exit(0)
