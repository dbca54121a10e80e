"""Ports on this host's loopback (the guest's forwarded shell, the MCP servers), and closing a socket."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (a later bind may still lose a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def close_socket(sock: socket.socket) -> None:
    """Shuts SOCK down both ways, so a thread blocked reading it returns, then closes it."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
