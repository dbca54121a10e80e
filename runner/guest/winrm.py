"""The Windows guest's shell: PowerShell over WinRM (pywinrm's WS-Management protocol).

Every script travels as a file, whatever its length: a command line stops at ~8K
characters, so the script (UTF-8 with a BOM, which Windows PowerShell 5.1 needs to read
non-ASCII) is uploaded in base64 chunks, decoded in the guest and run with
`powershell -File`. A prelude (guest_agent/windows/winrm-prelude.ps1) makes output UTF-8
and silences progress records; errors that arrive as CLIXML are decoded to their text. Every call has a wall-clock limit: the
Receive loop polls with a short WS-Man operation timeout and, past the deadline, signals
the command to terminate and deletes the shell, which ends its processes in the guest.
Only transient failures are retried, decided by is_transient_winrm_error.
"""

from __future__ import annotations

import base64
import errno
import re
import socket
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import requests
from winrm.exceptions import (
    InvalidCredentialsError,
    WinRMError,
    WinRMOperationTimeoutError,
    WinRMTransportError,
    WSManFaultError,
)
from winrm.protocol import Protocol

from runner.errors import CommandTimeout, GuestUnreachable
from runner.guest.powershell_quote import ps_quote
from runner.guest.programs import program_text
from runner.guest.base import MAX_OUTPUT_BYTES, ExecResult, GuestShell, NotReady, output_too_large, poll_until_ready
from typing_extensions import override

PRELUDE = program_text("windows/winrm-prelude.ps1")  # before every script: UTF-8 out, no progress records
CHUNK_CHARS = 2400  # base64 characters per upload command: ~6.5K once UTF-16 and base64 encoded again
OPERATION_TIMEOUT_S = 5  # one Receive waits at most this long, so the wall clock is checked often
TEMP_DIR = r"C:\Windows\Temp"
POWERSHELL = "powershell.exe"
PS_ARGS = ("-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass")


def is_transient_winrm_error(exc: BaseException) -> bool:
    """True for failures that a retry after a pause may cure: the guest still booting, the
    WinRM service starting, a dropped connection. False for what a retry cannot fix:
    refused credentials, a SOAP fault about the request itself, anything unknown."""
    if isinstance(exc, InvalidCredentialsError):
        return False
    if isinstance(exc, WinRMOperationTimeoutError):
        return True
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return True
    if isinstance(exc, WinRMTransportError):
        if exc.code in (401, 403):
            return False
        # A bare 5xx (no SOAP fault) comes from a service that is still coming up.
        return exc.code in (502, 503, 504) or (exc.code == 500 and "Fault" not in (exc.response_text or ""))
    if isinstance(exc, (ConnectionResetError, ConnectionRefusedError, ConnectionAbortedError, socket.timeout)):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH):
        return True
    return False


ACCESS_DENIED_FAULT = 5  # WSManFault Code of "Access is denied."


def sddl_refusal(exc: BaseException, user: str) -> str | None:
    """What to tell a person when the guest's WinRM service turned USER away by its RootSDDL:
    the credentials were right (else a 401), the account is just not admitted to a shell.
    None for any other failure."""
    if isinstance(exc, WSManFaultError) and exc.wsman_fault_code == ACCESS_DENIED_FAULT:
        return (f"the guest's WinRM refused {user} a shell: access denied (WSManFault {ACCESS_DENIED_FAULT}), "
                "not allowed by the guest's WinRM SDDL (RootSDDL admits Administrators and Interactive users "
                "unless the image adds Remote Management Users)")
    return None


SDDL_FIX = "rebuild the image: cu-run image build windows-11 --force (setup/enable-winrm.ps1 admits Remote Management Users)"

_CLIXML_ESCAPE = re.compile(r"_x([0-9A-Fa-f]{4})_")


def decode_clixml(text: str) -> str:
    """PowerShell's serialized error stream ('#< CLIXML' then <Objs>) as the text a person
    would have seen; progress records are dropped. Anything else is returned unchanged."""
    if not text.lstrip().startswith("#< CLIXML"):
        return text
    lines = []
    for block in re.findall(r"<Objs.*?</Objs>", text, flags=re.DOTALL):
        try:
            root = ET.fromstring(block)
        except ET.ParseError:
            continue
        for element in root.iter():
            if element.tag.split("}")[-1] == "S" and element.get("S") in ("Error", "Warning", "Verbose", "Debug"):
                value = _CLIXML_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), element.text or "")
                prefix = "" if element.get("S") == "Error" else element.get("S", "").upper() + ": "
                lines.append(prefix + value)
    return "".join(lines).replace("\r\n", "\n").rstrip("\n") + ("\n" if lines else "")


def encoded(script: str) -> str:
    """The script as powershell -EncodedCommand wants it: base64 of UTF-16LE."""
    return base64.b64encode(script.encode("utf-16-le")).decode("ascii")


class WinRmShell(GuestShell):
    def __init__(self, host: str, port: int, user: str, password: str, *, transport: Literal["ntlm", "basic"] = "ntlm",
                 protocol_factory: Callable[[], Protocol] | None = None) -> None:
        self.address = f"{host}:{port}"
        self.user = user
        self.endpoint = f"http://{host}:{port}/wsman"
        self._factory = protocol_factory or (lambda: Protocol(
            endpoint=self.endpoint, transport=transport, username=user, password=password,
            server_cert_validation="ignore", operation_timeout_sec=OPERATION_TIMEOUT_S,
            read_timeout_sec=OPERATION_TIMEOUT_S + 10))
        self._lock = threading.Lock()  # one WinRM shell at a time per guest connection

    # -- GuestShell

    @override
    def wait_ready(self, timeout: float) -> float:
        def echo(left: float) -> None:
            try:
                result = self._session(lambda p, s: self._command(p, s, "cmd.exe", ("/c", "echo ready"),
                                                                  deadline=time.monotonic() + min(left, 30)))
            except CommandTimeout as exc:
                raise NotReady from exc
            except Exception as exc:
                cause = exc.__cause__ if isinstance(exc, GuestUnreachable) and exc.__cause__ else exc
                refusal = sddl_refusal(cause, self.user)
                if refusal is not None:
                    raise GuestUnreachable(f"WinRM at {self.address}: {refusal}", fix=SDDL_FIX) from exc
                if not is_transient_winrm_error(cause):
                    raise GuestUnreachable(
                        f"WinRM at {self.address} refused for good: {type(cause).__name__}: {cause}",
                        fix="check the image's credentials in its manifest and that WinRM allows them",
                    ) from exc
                raise NotReady from exc
            if result.stdout.strip() != "ready":
                raise NotReady from RuntimeError(f"unexpected answer {result.stdout!r}")

        return poll_until_ready(f"WinRM at {self.address}", timeout, 1.0, echo)

    @override
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        deadline = time.monotonic() + timeout
        remote = f"{TEMP_DIR}\\cu-run-{uuid.uuid4().hex}.ps1"
        data = b"\xef\xbb\xbf" + (PRELUDE + script).encode("utf-8")

        def go(protocol: Protocol, shell_id: str) -> ExecResult:
            self._upload(protocol, shell_id, data, remote, deadline)
            try:
                result = self._command(protocol, shell_id, POWERSHELL, PS_ARGS + ("-File", remote), deadline=deadline)
            finally:
                self._powershell(protocol, shell_id, f"Remove-Item -LiteralPath {ps_quote(remote)} -Force",
                                 deadline=time.monotonic() + 30, check=False)
            return result

        return self._session(go)

    @override
    def put(self, local: Path, remote: str) -> None:
        data = local.read_bytes()
        self._session(lambda p, s: self._upload(p, s, data, remote, time.monotonic() + 60 + len(data) / 20_000))

    @override
    def get(self, remote: str, local: Path) -> None:
        script = f"[Convert]::ToBase64String([IO.File]::ReadAllBytes({ps_quote(remote)}))"
        result = self._session(lambda p, s: self._powershell(p, s, script, deadline=time.monotonic() + 300))
        local.write_bytes(base64.b64decode(result.stdout.strip()))

    @override
    def close(self) -> None:
        pass  # every call opens and deletes its own WinRM shell

    # -- WS-Management

    def _session(self, work: Callable[[Protocol, str], object]):
        """Runs WORK in a fresh WinRM shell, deleted afterwards however WORK ends."""
        with self._lock:
            protocol = self._factory()
            try:
                shell_id = protocol.open_shell(codepage=65001)
            except Exception as exc:
                raise self._unreachable(exc) from exc
            try:
                return work(protocol, shell_id)
            except (WinRMError, requests.exceptions.RequestException) as exc:
                raise self._unreachable(exc) from exc
            finally:
                try:
                    protocol.close_shell(shell_id)
                except Exception:  # noqa: BLE001 - cleanup of a failed command is best effort
                    pass  # the shell dies with the guest's WinRM service anyway

    def _unreachable(self, exc: BaseException) -> BaseException:
        if isinstance(exc, (GuestUnreachable, CommandTimeout)):
            return exc
        refusal = sddl_refusal(exc, self.user)
        if refusal is not None:
            return GuestUnreachable(f"WinRM at {self.address}: {refusal}", fix=SDDL_FIX)
        if is_transient_winrm_error(exc) or isinstance(exc, (WinRMError, requests.exceptions.RequestException)):
            return GuestUnreachable(f"WinRM at {self.address} failed: {type(exc).__name__}: {exc}")
        return exc

    def _upload(self, protocol: Protocol, shell_id: str, data: bytes, remote: str, deadline: float) -> None:
        text = base64.b64encode(data).decode("ascii")
        staging = remote + ".b64"
        self._powershell(protocol, shell_id, f"Set-Content -LiteralPath {ps_quote(staging)} -Value '' -NoNewline "
                                             "-Encoding ASCII", deadline=deadline)
        for start in range(0, len(text), CHUNK_CHARS):
            chunk = text[start:start + CHUNK_CHARS]
            self._powershell(protocol, shell_id, f"Add-Content -LiteralPath {ps_quote(staging)} -Value '{chunk}' "
                                                 "-NoNewline -Encoding ASCII", deadline=deadline)
        self._powershell(protocol, shell_id,
                         f"[IO.File]::WriteAllBytes({ps_quote(remote)}, [Convert]::FromBase64String("
                         f"[IO.File]::ReadAllText({ps_quote(staging)}))); Remove-Item -LiteralPath {ps_quote(staging)}",
                         deadline=deadline)

    def _powershell(self, protocol: Protocol, shell_id: str, script: str, *, deadline: float,
                    check: bool = True) -> ExecResult:
        result = self._command(protocol, shell_id, POWERSHELL, PS_ARGS + ("-EncodedCommand", encoded(script)),
                               deadline=deadline)
        if check and result.exit_code != 0:
            raise GuestUnreachable(f"WinRM at {self.address}: a transfer step failed (exit {result.exit_code}): "
                                   f"{result.stderr.strip()[:300]}")
        return result

    def _command(self, protocol: Protocol, shell_id: str, command: str, args: tuple[str, ...], *,
                 deadline: float) -> ExecResult:
        command_id = protocol.run_command(shell_id, command, args)
        out, err = bytearray(), bytearray()
        try:
            while True:
                if time.monotonic() >= deadline:
                    self._terminate(protocol, shell_id, command_id)
                    raise CommandTimeout(f"{command} on {self.address} ran past its time limit and was stopped",
                                         stdout=out.decode("utf-8", "replace"),
                                         stderr=decode_clixml(err.decode("utf-8", "replace")))
                try:
                    stdout, stderr, code, done = protocol.get_command_output_raw(shell_id, command_id)
                except WinRMOperationTimeoutError:
                    continue  # no output within one operation timeout: look at the clock, ask again
                out += stdout
                err += stderr
                if len(out) + len(err) > MAX_OUTPUT_BYTES:
                    self._terminate(protocol, shell_id, command_id)
                    raise output_too_large(f"WinRM at {self.address}")
                if done:
                    break
        except CommandTimeout:
            raise
        protocol.cleanup_command(shell_id, command_id)
        return ExecResult(code, out.decode("utf-8", "replace"), decode_clixml(err.decode("utf-8", "replace")))

    @staticmethod
    def _terminate(protocol: Protocol, shell_id: str, command_id: str) -> None:
        try:
            protocol.cleanup_command(shell_id, command_id)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass  # deleting the shell (in _session) ends the process tree regardless
