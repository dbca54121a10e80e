"""The recording proxy on the host: mitmproxy in a venv of its own, a CA made per run, and one
proxy process per episode bound to 127.0.0.1 (docs/network.md).

mitmproxy pins versions of libraries cu-run also uses, so it gets its own venv in the cache
(`proxy_env`), made once from PyPI, as the scoring env is. What the proxy does with each request
is proxy_addon.py's; this module starts it, waits for it, and stops it.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from runner.choices import NetMode
from runner.errors import HostFault, InfraError, UsageError
from runner.network.proxy_log import read_entries
from runner.sockets import free_port

MITMPROXY = "mitmproxy==11.0.2"
ADDON = Path(__file__).with_name("proxy_addon.py")
CA_FILE = "mitmproxy-ca.pem"  # the key and the certificate: what mitmproxy signs with (never leaves the host)
CA_CERT_FILE = "mitmproxy-ca-cert.pem"  # the certificate alone: what a guest trusts
READY_TIMEOUT = 30.0
BODY_SIZE_LIMIT = "16m"  # a request or a response larger than this is refused, not buffered


def proxy_env(cache_dir: Path, say: Callable[[str], None] = print) -> Path:
    """The proxy venv's mitmdump, made once under CACHE_DIR/proxy-env/. A venv is not relocatable,
    so it is made in place, and counts as made only once its marker is written last."""
    venv = cache_dir / "proxy-env" / MITMPROXY.replace("==", "-")
    mitmdump, made = venv / "bin" / "mitmdump", venv / ".made"
    if made.is_file() and mitmdump.is_file():
        return mitmdump
    say(f"making the proxy's venv ({MITMPROXY}) in {venv} (once)")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True, text=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", MITMPROXY],
                       check=True, capture_output=True, text=True, timeout=900)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        tail = str(getattr(exc, "stderr", "") or "")[-1500:]
        raise InfraError(f"could not install {MITMPROXY} for the recording proxy: {tail}",
                         fix="run scripts/setup-host.sh on a machine that reaches PyPI") from exc
    made.write_text(MITMPROXY + "\n")
    return mitmdump


def make_run_ca(folder: Path, common_name: str = "cu-run episode CA") -> Path:
    """A CA for one run in FOLDER (0700): mitmproxy's key-and-certificate file, and the certificate
    alone for the guest. Valid from 2000 to 2099, so a guest with a frozen clock trusts it too."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cu-run")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
            .not_valid_after(datetime.datetime(2099, 12, 31, tzinfo=datetime.UTC))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    pem_cert = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    ca = folder / CA_FILE
    ca.touch(mode=0o600)
    ca.write_bytes(pem_key + pem_cert)
    (folder / CA_CERT_FILE).write_bytes(pem_cert)
    return folder / CA_CERT_FILE


@dataclass
class ProxyConfig:
    allow: tuple[str, ...] = ()
    mapped: dict[str, tuple[str, int]] = field(default_factory=dict)
    plain: tuple[str, ...] = ()  # mapped names served in plain HTTP, whatever scheme the guest used
    background: tuple[str, ...] = ()  # names the guest's apps ask for unbidden: refused, logged, no violation
    mode: NetMode = NetMode.live
    cassette: Path | None = None
    upstream_ca: Path | None = None  # trust this CA for upstream TLS too (a test's loopback stand-ins)
    clock: datetime.datetime | None = None  # the task's frozen clock: the certificates made for the guest are dated by it


class EpisodeProxy:
    """One episode's proxy on 127.0.0.1:PORT, its log FOLDER/network.jsonl, until the block ends."""

    def __init__(self, mitmdump: Path, ca_dir: Path, folder: Path, config: ProxyConfig) -> None:
        if config.mode == NetMode.replay and (config.cassette is None or not config.cassette.is_file()):
            raise UsageError(f"replay needs its cassette, and {config.cassette} is not a file")
        self.mitmdump, self.ca_dir, self.folder, self.config = mitmdump, ca_dir, folder, config
        self.port = 0
        self.log = folder / "network.jsonl"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def __enter__(self) -> EpisodeProxy:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def start(self) -> None:
        """Starts mitmdump on a free port (self.address) and returns at once: wait_ready() waits
        for it, stop() ends it. An episode starts its guest's end meanwhile."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        settings = self.folder / "proxy-config.json"
        settings.write_text(json.dumps({
            "allow": list(self.config.allow), "mapped": {k: list(v) for k, v in self.config.mapped.items()},
            "plain": list(self.config.plain), "background": list(self.config.background),
            "mode": self.config.mode, "cassette": str(self.config.cassette) if self.config.cassette else None,
            "log": str(self.log), "clock": self.config.clock.timestamp() if self.config.clock else None}))
        self.port = free_port()
        options = {"confdir": str(self.ca_dir), "onboarding": "false", "body_size_limit": BODY_SIZE_LIMIT,
                   # Nothing is fetched from upstream to make a certificate: replay never connects.
                   "connection_strategy": "lazy", "upstream_cert": "false", "http2": "false",
                   # HTTP only: bytes in a tunnel that are neither TLS nor HTTP are read as HTTP,
                   # and refused, rather than relayed to the allowed site as raw TCP.
                   "rawtcp": "false"}
        if self.config.upstream_ca is not None:
            options["ssl_verify_upstream_trusted_ca"] = str(self.config.upstream_ca)
        command = [str(self.mitmdump), "--listen-host", "127.0.0.1", "--listen-port", str(self.port),
                   "-s", str(ADDON), "--quiet"]
        for key, value in options.items():
            command += ["--set", f"{key}={value}"]
        with (self.folder / "proxy.log").open("wb") as out:
            # At the host's time, even at a frozen clock: the addon dates only the certificates it
            # makes for the guest at the guest's time (guest_clock.py), so the real sites'
            # certificates are checked at the real time.
            self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                             env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.folder),
                                                  "CU_RUN_PROXY_CONFIG": str(settings)})

    def wait_ready(self) -> None:
        """Returns once the proxy listens; InfraError, with proxy.log's end, when it exited or
        did not listen within READY_TIMEOUT."""
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise InfraError(f"the recording proxy exited ({self._process.returncode}): "
                                 f"{(self.folder / 'proxy.log').read_text(errors='replace')[-1500:]}")
            try:
                with socket.create_connection(self.address, timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise InfraError(f"the recording proxy did not listen on {self.address} within {READY_TIMEOUT:.0f} s")

    def check_alive(self) -> None:
        """Raises HostFault, naming proxy.log, when the proxy has exited: whatever the guest asked
        after that went unanswered, which is the host's failure, never the agent's."""
        if self._process is not None and self._process.poll() is not None:
            raise HostFault(f"the episode's proxy exited ({self._process.returncode}) while the episode ran: "
                            f"see {self.folder / 'proxy.log'}")

    def stop(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=10)
        self._process = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def entries(self) -> list[dict]:
        """network.jsonl, read back (the proxy's own log, written on the host)."""
        return read_entries(self.log)
