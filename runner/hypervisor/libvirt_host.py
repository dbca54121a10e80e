"""Every libvirt call cu-run makes, behind one object.

libvirt-python is blocking and thread-safe: slots running in worker threads share one
connection. Errors come out as InfraError with the URI and the fix.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import libvirt
import libvirt_qemu

from runner.errors import GuestUnreachable, HostFault, InfraError
from runner.guest.qga import AgentCommandFailed
from runner.hypervisor.domain_xml import CU_NS, DOMAIN_PREFIX, NETDEV_ID, DomainSpec, build_domain_xml, parse_episode_tag
from runner.hypervisor.host import DomainInfo, Host
from runner.display.base import Display
from runner.display.vnc import VncDisplay, png_from_any
from runner.hypervisor.overlay import create_overlay
from runner.sockets import free_port
from typing_extensions import override

log = logging.getLogger(__name__)
T = TypeVar("T")

# libvirt prints every error to stderr by default; they are raised as exceptions anyway.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)

StopCause = Literal["guest", "host"]
STOP_EVENT_WAIT = 5.0  # a stopped domain's events reach us within milliseconds; a loaded host, seconds
_event_loop_lock = threading.Lock()
_event_loop_running = False


def _run_event_loop() -> None:
    """libvirt's own event loop, in a daemon thread: it delivers the domain lifecycle events,
    which say who stopped a domain. Registered once per process, before the first connection."""
    global _event_loop_running
    with _event_loop_lock:
        if _event_loop_running:
            return
        libvirt.virEventRegisterDefaultImpl()

        def loop() -> None:
            while True:
                try:
                    libvirt.virEventRunDefaultImpl()
                except libvirt.libvirtError as exc:  # a broken iteration must not end the loop
                    log.debug("libvirt event loop: %s", exc)
                    time.sleep(0.1)

        threading.Thread(target=loop, name="libvirt-events", daemon=True).start()
        _event_loop_running = True


@dataclass
class _Lifecycle:
    """What libvirt said of one domain name: how many times it started, and how its latest run
    ended (None while it runs). A name is reused (a warm slot's domain), so an end counts only
    once the start that our own call made has been seen."""

    starts_made: int = 0  # by our start() and restore()
    starts_seen: int = 0  # STARTED events
    shutdown_by: int | None = None  # the SHUTDOWN event's detail since the last start (guest, host)
    stopped: int | None = None  # the STOPPED event's detail since the last start


class LibvirtHost(Host):
    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._lock = threading.Lock()
        self._events = threading.Condition()
        self._lifecycles: dict[str, _Lifecycle] = {}
        _run_event_loop()
        self._conn = self._open()

    def _open(self) -> libvirt.virConnect:
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            raise InfraError(
                f"cannot connect to libvirt at {self.uri}: {exc.get_error_message()}",
                fix="start the daemons with scripts/setup-host.sh (libvirtd, virtlogd), "
                "or point --libvirt-uri / CU_RUN_LIBVIRT_URI at a running one",
            ) from exc
        try:
            conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None)
        except libvirt.libvirtError as exc:  # without events a stop's cause stays unknown: the host's
            log.warning("libvirt at %s gives no lifecycle events (%s): a guest that powers itself off "
                        "will count as the host's fault", self.uri, exc.get_error_message())
        return conn

    # -- who stopped a domain

    def _on_lifecycle(self, _conn, dom, event: int, detail: int, _opaque) -> None:
        with self._events:
            life = self._lifecycles.setdefault(dom.name(), _Lifecycle())
            if event == libvirt.VIR_DOMAIN_EVENT_STARTED:
                life.starts_seen += 1
                life.shutdown_by = life.stopped = None
            elif event == libvirt.VIR_DOMAIN_EVENT_SHUTDOWN:
                life.shutdown_by = detail
            elif event == libvirt.VIR_DOMAIN_EVENT_STOPPED:
                life.stopped = detail
            self._events.notify_all()

    def _started(self, name: str) -> None:
        with self._events:
            self._lifecycles.setdefault(name, _Lifecycle()).starts_made += 1

    @override
    def stop_cause(self, name: str, wait: float = STOP_EVENT_WAIT) -> StopCause | None:
        """Who ended NAME's latest run, by libvirt's lifecycle events: "guest" when the guest shut
        itself down or reset (QEMU's shutdown event said the guest asked; a reset is a shutdown
        since the domain's on_reboot is destroy), "host" for anything else (destroyed, QEMU
        killed or crashed, a failure); None when no event came within WAIT seconds."""
        deadline = time.monotonic() + wait
        with self._events:
            while True:
                life = self._lifecycles.get(name)
                if life is not None and life.starts_seen >= life.starts_made and life.stopped is not None:
                    guest = (life.stopped == libvirt.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN
                             and life.shutdown_by != libvirt.VIR_DOMAIN_EVENT_SHUTDOWN_HOST)
                    return "guest" if guest else "host"
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._events.wait(left)

    @property
    def conn(self) -> libvirt.virConnect:
        """A live connection: after libvirtd restarted, a new one (its domains live on: libvirtd
        finds its running QEMUs again), so one restart costs the episodes in flight at most."""
        with self._lock:
            try:
                alive = self._conn.isAlive() == 1
            except libvirt.libvirtError:
                alive = False
            if not alive:
                try:
                    self._conn.close()
                except libvirt.libvirtError:
                    pass
                self._conn = self._open()
            return self._conn

    def _call(self, op: Callable[[libvirt.virConnect], T]) -> T:
        """OP on the connection; once more on a new one when the old one turns out lost (a
        libvirtd restart leaves a connection that says it is alive until its first write fails)."""
        try:
            return op(self.conn)
        except libvirt.libvirtError as exc:
            if not connection_lost(exc):
                raise
            log.warning("the libvirt connection to %s was lost (%s); connecting again", self.uri,
                        exc.get_error_message())
            with self._lock:
                try:
                    self._conn.close()
                except libvirt.libvirtError:
                    pass
                self._conn = self._open()
            return op(self.conn)

    @override
    def close(self) -> None:
        try:
            self._conn.close()
        except libvirt.libvirtError:
            pass

    # -- versions, for provenance and warm-state validity

    @override
    def versions(self) -> dict[str, str]:
        return {
            "libvirt": _dotted(self._call(lambda c: c.getLibVersion())),
            "hypervisor": _dotted(self._call(lambda c: c.getVersion())),
        }

    # -- domains

    # -- disks (the overlays are files beside the domain on this machine)

    @override
    def create_overlay(self, backing: Path, overlay: Path) -> Path:
        return create_overlay(backing, overlay)

    # -- reaching a VM: QEMU's VNC and its forwarded ports listen on this machine's loopback

    @override
    def forward_address(self) -> str:
        return "127.0.0.1"

    @override
    def free_port(self) -> int:
        return free_port()

    @override
    def open_display(self, name: str, *, password: str, pointer_offset: int = 0, fast_capture: bool = True) -> Display:
        address, port = self.vnc_endpoint(name)
        capture = (lambda: png_from_any(*self.screenshot(name))) if fast_capture else None
        return VncDisplay(address, port, capture=capture, pointer_offset=pointer_offset, password=password)

    @override
    def vnc_endpoint(self, name: str) -> tuple[str, int]:
        dom = self.lookup(name)
        if dom is None:
            raise InfraError(f"domain {name} is not there to have a VNC port")
        return "127.0.0.1", self.vnc_port(dom)

    @override
    def start(self, spec: DomainSpec) -> libvirt.virDomain:
        """Creates and starts SPEC as a transient domain: it vanishes from libvirt when destroyed."""
        return self.start_xml(build_domain_xml(spec))

    @override
    def describe(self, spec: DomainSpec) -> str:
        return build_domain_xml(spec)

    def start_xml(self, domain_xml: str) -> libvirt.virDomain:
        """Creates and starts a transient domain from libvirt's own XML (a test's domain that is
        not cu-run's)."""
        try:
            dom = self._call(lambda c: c.createXML(domain_xml, 0))
        except libvirt.libvirtError as exc:
            raise InfraError(f"libvirt could not start the domain: {exc.get_error_message()}") from exc
        self._started(dom.name())
        return dom

    @override
    def restore(self, ram: Path, spec: DomainSpec) -> libvirt.virDomain:
        """Restores a saved RAM state into SPEC (same name, UUID and devices as saved; disk,
        ports and file paths may differ), running."""
        domain_xml = build_domain_xml(spec)
        name = spec.identity.name
        try:
            self._call(lambda c: c.restoreFlags(str(ram), domain_xml, libvirt.VIR_DOMAIN_SAVE_RUNNING))
        except libvirt.libvirtError as exc:
            raise InfraError(f"libvirt could not restore {ram} into {name}: {exc.get_error_message()}",
                             fix="re-warm the slot: cu-run image warm IMAGE --force") from exc
        self._started(name)
        dom = self.lookup(name)
        if dom is None:
            raise InfraError(f"libvirt restored {ram} but domain {name} is not there")
        return dom

    @override
    def save(self, name: str, ram: Path) -> None:
        """Saves NAME's RAM and device state to RAM; the domain stops (and, if transient, is gone)."""
        dom = self.lookup(name)
        if dom is None:
            raise InfraError(f"libvirt could not save {name}: no such domain")
        try:
            dom.saveFlags(str(ram), None, libvirt.VIR_DOMAIN_SAVE_RUNNING)
        except libvirt.libvirtError as exc:
            raise InfraError(f"libvirt could not save {name} to {ram}: {exc.get_error_message()}") from exc

    def lookup(self, name: str) -> libvirt.virDomain | None:
        try:
            return self._call(lambda c: c.lookupByName(name))
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise InfraError(f"libvirt lookup of {name} failed: {exc.get_error_message()}") from exc

    @override
    def is_running(self, name: str) -> bool:
        dom = self.lookup(name)
        try:
            return dom is not None and bool(dom.isActive())
        except libvirt.libvirtError:
            return False

    @override
    def destroy(self, name: str) -> bool:
        """Stops NAME and forgets it; True if there was something to remove. Idempotent."""
        dom = self.lookup(name)
        if dom is None:
            return False
        try:
            if dom.isActive():
                dom.destroyFlags(libvirt.VIR_DOMAIN_DESTROY_DEFAULT)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID):
                raise InfraError(f"libvirt could not destroy {name}: {exc.get_error_message()}") from exc
        try:
            if dom.isPersistent():
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise InfraError(f"libvirt could not undefine {name}: {exc.get_error_message()}") from exc
        return True

    def vnc_port(self, dom: libvirt.virDomain) -> int:
        root = ET.fromstring(dom.XMLDesc(0))
        graphics = root.find("./devices/graphics[@type='vnc']")
        port = int(graphics.get("port", "-1")) if graphics is not None else -1
        if port <= 0:
            raise InfraError(f"domain {dom.name()} has no VNC port")
        return port

    @override
    def screenshot(self, name: str) -> tuple[str, bytes]:
        """QEMU's screendump through libvirt: (mime type, image bytes) of screen 0 of domain NAME."""
        dom = self.lookup(name)
        if dom is None:
            raise InfraError(f"libvirt screenshot of {name} failed: no such domain")
        stream = self.conn.newStream(0)
        try:
            mime = dom.screenshot(stream, 0, 0)
            chunks = []
            while True:
                chunk = stream.recv(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            stream.finish()
        except libvirt.libvirtError as exc:
            try:
                stream.abort()
            except libvirt.libvirtError:
                pass
            raise InfraError(f"libvirt screenshot of {dom.name()} failed: {exc.get_error_message()}") from exc
        return mime or "image/x-portable-pixmap", b"".join(chunks)

    @override
    @override
    def add_forward(self, name: str, host_port: int, guest_port: int) -> None:
        # QEMU's monitor adds it to the running netdev: no domain XML changes, so the warm states
        # (keyed by the domain XML) and every episode without a network stay as they are.
        command = f"hostfwd_add {NETDEV_ID} tcp:{self.forward_address()}:{host_port}-:{guest_port}"
        try:
            said = libvirt_qemu.qemuMonitorCommand(self.conn.lookupByName(name), command,
                                                   libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP)
        except libvirt.libvirtError as exc:
            raise HostFault(f"{name}: could not add the forward {host_port}->{guest_port}: {exc}") from exc
        if said.strip():  # hostfwd_add prints nothing when it worked
            raise HostFault(f"{name}: could not add the forward {host_port}->{guest_port}: {said.strip()}")

    @override
    def agent_command(self, name: str, command: dict, timeout: float) -> object:
        """COMMAND to NAME's QEMU guest agent; its answer's "return" value.

        The agent is reached through libvirtd, so libvirtd's own trouble is a HostFault, never
        the guest's: the scheduler then retries the episode instead of blaming the agent. A
        libvirtd that is restarting is waited for; a command is never sent twice (it may have
        started a script, or read a piece of a file)."""
        deadline = time.monotonic() + LIBVIRTD_RETURN_WAIT
        while True:
            try:
                conn = self.conn
                break
            except InfraError as exc:
                if time.monotonic() >= deadline:
                    raise HostFault(f"libvirt is gone, so the guest agent of {name} cannot be reached: "
                                    f"{exc.message}", fix=exc.fix) from exc
                time.sleep(1.0)
        try:
            reply = libvirt_qemu.qemuAgentCommand(conn.lookupByName(name), json.dumps(command),
                                                  max(1, round(timeout)), 0)
        except libvirt.libvirtError as exc:
            message = exc.get_error_message()
            if connection_lost(exc):
                raise HostFault(f"libvirt's connection broke during a command to the guest agent of {name}: "
                                f"{message}") from exc
            if exc.get_error_code() in _AGENT_UNREACHABLE:
                raise GuestUnreachable(f"the guest agent of {name} does not answer: {message}") from exc
            raise AgentCommandFailed(message) from exc
        try:
            return json.loads(reply)["return"]
        except (ValueError, KeyError, TypeError) as exc:
            raise GuestUnreachable(f"the guest agent of {name} answered {reply[:200]!r}: {exc}") from exc

    @override
    def qemu_stopped(self, name: str) -> bool:
        """Whether NAME's QEMU process is stopped (SIGSTOP): libvirt still calls it running, but
        the guest is frozen and QEMU's monitor does not answer."""
        pid_file = _qemu_pid_file(self.uri, name)
        try:
            pid = int(pid_file.read_text().strip())
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (OSError, ValueError):
            return False  # not ours to see (remote, or gone): is_running says the rest
        return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")

    @override
    def cu_domains(self) -> list[DomainInfo]:
        """Every domain whose name has cu-run's prefix, with the episode tag if it has one."""
        found = []
        for dom in self._call(lambda c: c.listAllDomains(0)):
            name = dom.name()
            if not name.startswith(DOMAIN_PREFIX):
                continue
            try:
                tag = parse_episode_tag(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, CU_NS, 0))
            except (libvirt.libvirtError, ValueError, ET.ParseError):
                tag = None
            try:
                found.append(DomainInfo(name, bool(dom.isActive()), bool(dom.isPersistent()), tag))
            except libvirt.libvirtError:
                continue  # vanished while listing
        return found


LIBVIRTD_RETURN_WAIT = 30.0  # a restarting libvirtd is back within seconds; its domains live on
# The agent is not there (not connected yet, gone, or broken) or the domain is not running: its
# answer to a command it got is any other error.
_AGENT_UNREACHABLE = (libvirt.VIR_ERR_AGENT_UNRESPONSIVE, libvirt.VIR_ERR_NO_DOMAIN,
                      libvirt.VIR_ERR_OPERATION_INVALID, libvirt.VIR_ERR_OPERATION_TIMEOUT)


def connection_lost(exc: libvirt.libvirtError) -> bool:
    """Whether EXC says the connection itself is gone (libvirtd restarted or died), not that the
    call failed: only then is a new connection worth a try."""
    return exc.get_error_domain() == libvirt.VIR_FROM_RPC or exc.get_error_code() in (
        libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_ERR_INVALID_CONN, libvirt.VIR_ERR_NO_CONNECT)


def _qemu_pid_file(uri: str, name: str) -> Path:
    if uri.startswith("qemu:///session"):
        runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
        return Path(runtime) / "libvirt" / "qemu" / "run" / f"{name}.pid"
    return Path("/run/libvirt/qemu") / f"{name}.pid"


def _dotted(version: int) -> str:
    return f"{version // 1_000_000}.{version // 1000 % 1000}.{version % 1000}"
