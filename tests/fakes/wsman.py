"""FakeWsmanServer: a loopback HTTP server speaking the WS-Management exchange pywinrm
performs (shell Create, Command, Receive, Signal, Delete), for testing WinRmShell.

It speaks what the image's WinRM service speaks: NTLM (a pyspnego acceptor, per HTTP
connection, as NTLM is) with message encryption (MS-WSMV's multipart/encrypted, sealed with
that connection's session keys); Basic only when a test asks for it (the image turns it off).
It admits a shell as Windows does, by the service's RootSDDL: an administrator, or a member
of a group the SDDL grants execute to. Windows' default SDDL admits Administrators only (its
Interactive entry never matches a network logon), so a standard user gets fault 5,
"Access is denied", unless the image adds Remote Management Users (provisioned_sddl()).

It stands in for a Windows guest's WinRM service at the narrowest seam: the SOAP over
HTTP. What a Windows guest would *do* is scripted: the transfer steps WinRmShell sends
(Set-Content / Add-Content of base64 chunks, the decode, Remove-Item, ReadAllBytes) act
on an in-memory file table, so an uploaded script arrives here byte for byte; running a
script (`powershell -File`) calls the test's handler with the script's text and sends
back whatever bytes, exit code or stall it chooses.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import spnego

NS = {"s": "http://www.w3.org/2003/05/soap-envelope", "a": "http://schemas.xmlsoap.org/ws/2004/08/addressing",
      "w": "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd", "rsp": "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"}
SHELL = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"
ENCRYPTED = "application/HTTP-SPNEGO-session-encrypted"
BOUNDARY = b"--Encrypted Boundary"
# Windows' default WinRM RootSDDL: full access for Administrators, read for Interactive users.
DEFAULT_ROOT_SDDL = "O:NSG:BAD:P(A;;GA;;;BA)(A;;GR;;;IU)S:P(AU;FA;GA;;;WD)(AU;SA;GXGW;;;WD)"
GROUP_ALIASES = {"BA": "Administrators", "RM": "Remote Management Users", "IU": "Interactive"}
ENABLE_WINRM = Path(__file__).resolve().parents[2] / "packer" / "windows-11" / "setup" / "enable-winrm.ps1"


def provisioned_sddl(script: Path = ENABLE_WINRM) -> str:
    """The RootSDDL a guest has once SCRIPT ran: the default, plus execute and read for Remote
    Management Users where the script adds exactly that ACE (S-1-5-32-580, GENERIC_EXECUTE |
    GENERIC_READ) through the security descriptor. Read from the real script, so a test of the
    user channel fails when the script stops admitting the desktop user."""
    text = script.read_text()
    adds = ("'S-1-5-32-580'" in text and "0x20000000" in text and "0x80000000" in text
            and "DiscretionaryAcl.AddAccess('Allow', $remoteManagementUsers, $executeAndRead" in text
            and "RootSDDL' -Value $descriptor.GetSddlForm('All')" in text)
    return DEFAULT_ROOT_SDDL.replace("S:P", "(A;;GXGR;;;RM)S:P") if adds else DEFAULT_ROOT_SDDL


def sddl_admits(sddl: str, groups: set[str]) -> bool:
    """Whether the DACL of SDDL grants execute (GA or GX) to one of GROUPS (a network logon:
    never Interactive)."""
    dacl = sddl.split("D:", 1)[1].split("S:", 1)[0]
    for kind, rights, sid in re.findall(r"\((A|D);[^;]*;([^;]*);[^;]*;[^;]*;([^)]*)\)", dacl):
        if kind == "A" and ("GA" in rights or "GX" in rights) and GROUP_ALIASES.get(sid) in groups:
            return True
    return False


@dataclass
class Reply:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    stall: bool = False  # never finish: every Receive times out


@dataclass
class _Command:
    reply: Reply
    sent: bool = False


@dataclass
class FakeWsmanServer:
    handler: object = None  # callable(script_text) -> Reply, for `powershell -File`
    user: str = "cu"  # the account Basic admits; with NTLM, every one of ACCOUNTS
    password: str = "secret"
    auth: str = "ntlm"  # or "basic"
    accounts: dict[str, str] = field(default_factory=lambda: {"cu": "secret"})
    groups: dict[str, set[str]] = field(default_factory=lambda: {"cu": {"Administrators"}})
    root_sddl: str = DEFAULT_ROOT_SDDL
    fail_first: list[int] = field(default_factory=list)  # HTTP statuses for the first requests
    encrypted_requests: int = 0  # SOAP messages that arrived sealed
    plain_requests: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)  # every script run with -File, as decoded text
    command_lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._commands: dict[str, _Command] = {}
        self._lock = threading.Lock()
        # pyspnego's NTLM acceptor reads its accounts from the file NTLM_USER_FILE names, when a
        # client authenticates: set for the fake's life, restored by close().
        self._user_file = tempfile.NamedTemporaryFile("w", prefix="fake-wsman-", suffix=".ntlm", delete=False)
        # No domain: a local account, as the runner names it (user, not DOMAIN\\user).
        self._user_file.write("".join(f":{u}:{p}\n" for u, p in self.accounts.items()))
        self._user_file.close()
        self._previous_user_file = os.environ.get("NTLM_USER_FILE")
        os.environ["NTLM_USER_FILE"] = self._user_file.name
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # NTLM authenticates a connection: it must stay open

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                self.ntlm = None  # this connection's acceptor
                self.principal = None  # who this connection authenticated as

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with fake._lock:
                    if fake.fail_first:
                        return self._send(fake.fail_first.pop(0), b"service starting", "text/plain")
                if fake.auth == "basic":
                    return self._soap(fake._basic_user(self.headers.get("Authorization", "")), body)
                if self.principal is None and not self._authenticate(body):
                    return None
                self._soap(self.principal, body)

            def _authenticate(self, body: bytes) -> bool:
                """One NTLM leg; True once this request is authenticated (and should be answered)."""
                scheme, _, token = self.headers.get("Authorization", "").partition(" ")
                if scheme not in ("Negotiate", "NTLM") or not token:
                    self._send(401, b"", "text/plain", {"WWW-Authenticate": "Negotiate"})
                    return False
                if self.ntlm is None:
                    self.ntlm = spnego.server(protocol="ntlm")
                try:
                    out = self.ntlm.step(base64.b64decode(token))
                except spnego.exceptions.SpnegoError:
                    self.ntlm = None
                    self._send(401, b"", "text/plain")
                    return False
                if not self.ntlm.complete:
                    self._send(401, b"", "text/plain", {"WWW-Authenticate": f"{scheme} {base64.b64encode(out).decode()}"})
                    return False
                self.principal = self.ntlm.client_principal.split("\\")[-1]
                return True

            def _soap(self, user: str | None, body: bytes) -> None:
                if user is None:
                    return self._send(401, b"", "text/plain")
                sealed = self.headers.get("Content-Type", "").startswith("multipart/encrypted")
                if sealed:
                    body = fake._unseal(self.ntlm, body)
                    fake.encrypted_requests += 1
                elif body:
                    fake.plain_requests += 1
                if not body:  # pywinrm's blank POST that sets up the security context
                    return self._send(200, b"", "application/soap+xml;charset=UTF-8")
                status, text = fake._answer(user, body)
                data = text.encode()
                if sealed:
                    return self._send(status, fake._seal(self.ntlm, data),
                                      f'multipart/encrypted;protocol="{ENCRYPTED}";boundary="Encrypted Boundary"')
                self._send(status, data, "application/soap+xml;charset=UTF-8")

            def _send(self, status: int, data: bytes, content_type: str, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._previous_user_file is None:
            os.environ.pop("NTLM_USER_FILE", None)
        else:
            os.environ["NTLM_USER_FILE"] = self._previous_user_file
        os.unlink(self._user_file.name)

    # -- authentication and sealing

    def _basic_user(self, auth: str) -> str | None:
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return self.user if auth == expected else None

    @staticmethod
    def _unseal(ntlm, body: bytes) -> bytes:
        """MS-WSMV 2.2.9.1.1: the part after the octet-stream header is a 4-byte signature
        length, the signature, then the sealed message; its declared length is checked."""
        parts = [p for p in body.split(BOUNDARY + b"\r\n") if p]
        header, payload = parts[0], parts[1]
        length = int(re.search(rb"Length=(\d+)", header).group(1))
        payload = payload.removesuffix(BOUNDARY + b"--\r\n").replace(b"\tContent-Type: application/octet-stream\r\n", b"")
        (signature_length,) = struct.unpack("<i", payload[:4])
        message = ntlm.unwrap_winrm(payload[4:4 + signature_length], payload[4 + signature_length:])
        assert len(message) == length, "the sealed message's length does not match its header"
        return message

    @staticmethod
    def _seal(ntlm, data: bytes) -> bytes:
        wrapped = ntlm.wrap_winrm(data)
        return (BOUNDARY + b"\r\n\tContent-Type: " + ENCRYPTED.encode() + b"\r\n"
                b"\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length=" + str(len(data)).encode() + b"\r\n"
                + BOUNDARY + b"\r\n\tContent-Type: application/octet-stream\r\n"
                + struct.pack("<i", len(wrapped.header)) + wrapped.header + wrapped.data + BOUNDARY + b"--\r\n")

    # -- the exchange

    def _answer(self, user: str, body: bytes) -> tuple[int, str]:
        root = ET.fromstring(body)
        action = root.findtext(".//a:Action", namespaces=NS) or ""
        message_id = root.findtext(".//a:MessageID", namespaces=NS) or ""
        name = action.rsplit("/", 1)[-1]
        self.actions.append(name)
        if name == "Create":
            groups = self.groups.get(user, set())
            if "Administrators" not in groups and not sddl_admits(self.root_sddl, groups):
                return 500, _fault(5, "Access is denied.")
            return 200, _envelope(f"<w:SelectorSet><w:Selector Name='ShellId'>{uuid.uuid4()}</w:Selector></w:SelectorSet>",
                                  message_id)
        if name == "Command":
            command = root.findtext(".//rsp:Command", namespaces=NS) or ""
            arguments = root.findtext(".//rsp:Arguments", namespaces=NS) or ""
            command_id = str(uuid.uuid4()).upper()
            self._commands[command_id] = _Command(self._execute(command, arguments))
            return 200, _envelope(f"<rsp:CommandResponse><rsp:CommandId>{command_id}</rsp:CommandId></rsp:CommandResponse>",
                                  message_id)
        if name == "Receive":
            command_id = root.find(".//rsp:DesiredStream", NS).get("CommandId")
            return self._receive(command_id, message_id)
        if name in ("Signal", "Delete"):
            return 200, _envelope("", message_id)
        return 500, _fault(0, f"unknown action {action}")

    def _receive(self, command_id: str, message_id: str) -> tuple[int, str]:
        command = self._commands[command_id]
        if command.reply.stall:
            time.sleep(0.2)
            return 500, _fault(2150858793, "The WS-Management service cannot complete the operation within the time")
        streams = ""
        if not command.sent:
            for name, data in (("stdout", command.reply.stdout), ("stderr", command.reply.stderr)):
                # Real WinRM splits output into several Stream elements; so does this.
                for start in range(0, len(data), 7) if data else ():
                    streams += (f"<rsp:Stream Name='{name}' CommandId='{command_id}'>"
                                f"{base64.b64encode(data[start:start + 7]).decode()}</rsp:Stream>")
            command.sent = True
        state = (f"<rsp:CommandState CommandId='{command_id}' State='{SHELL}/CommandState/Done'>"
                 f"<rsp:ExitCode>{command.reply.exit_code}</rsp:ExitCode></rsp:CommandState>")
        return 200, _envelope(f"<rsp:ReceiveResponse>{streams}{state}</rsp:ReceiveResponse>", message_id)

    # -- what a Windows guest would do with the commands WinRmShell sends

    def _execute(self, command: str, arguments: str) -> Reply:
        self.command_lines.append(f"{command} {arguments}")
        if command == "cmd.exe" and arguments == "/c echo ready":
            return Reply(b"ready\r\n")
        if command != "powershell.exe":
            return Reply(b"", b"not recognized\r\n", 1)
        encoded = re.search(r"-EncodedCommand (\S+)", arguments)
        if encoded:
            return self._transfer_step(base64.b64decode(encoded.group(1)).decode("utf-16-le"))
        run = re.search(r"-File (.+)$", arguments)
        if run:
            data = self.files[run.group(1)]
            assert data.startswith(b"\xef\xbb\xbf"), "scripts must carry a UTF-8 BOM for PowerShell 5.1"
            text = data[3:].decode("utf-8")
            self.scripts.append(text)
            return self.handler(text) if self.handler else Reply()
        return Reply(b"", b"unexpected arguments\r\n", 1)

    def _transfer_step(self, script: str) -> Reply:
        q = r"'((?:[^']|'')*)'"
        if m := re.fullmatch(rf"Set-Content -LiteralPath {q} -Value '' -NoNewline -Encoding ASCII", script):
            self.files[_unq(m.group(1))] = b""
        elif m := re.fullmatch(rf"Add-Content -LiteralPath {q} -Value '([A-Za-z0-9+/=]*)' -NoNewline -Encoding ASCII",
                               script):
            assert len(script) < 8000
            self.files[_unq(m.group(1))] += m.group(2).encode()
        elif m := re.fullmatch(rf"\[IO\.File\]::WriteAllBytes\({q}, \[Convert\]::FromBase64String\("
                               rf"\[IO\.File\]::ReadAllText\({q}\)\)\); Remove-Item -LiteralPath {q}", script):
            self.files[_unq(m.group(1))] = base64.b64decode(self.files.pop(_unq(m.group(2))))
        elif m := re.fullmatch(rf"Remove-Item -LiteralPath {q} -Force", script):
            self.files.pop(_unq(m.group(1)), None)
        elif m := re.fullmatch(rf"\[Convert\]::ToBase64String\(\[IO\.File\]::ReadAllBytes\({q}\)\)", script):
            return Reply(base64.b64encode(self.files[_unq(m.group(1))]) + b"\r\n")
        else:
            return Reply(b"", f"fake guest cannot run: {script[:80]}".encode(), 1)
        return Reply()


def _unq(text: str) -> str:
    return text.replace("''", "'")


def _envelope(body: str, relates_to: str) -> str:
    return (f"<s:Envelope xmlns:s='{NS['s']}' xmlns:a='{NS['a']}' xmlns:w='{NS['w']}' xmlns:rsp='{NS['rsp']}'>"
            f"<s:Header><a:RelatesTo>{relates_to}</a:RelatesTo></s:Header><s:Body>{body}</s:Body></s:Envelope>")


def _fault(code: int, reason: str) -> str:
    return (f"<s:Envelope xmlns:s='{NS['s']}' xmlns:f='http://schemas.microsoft.com/wbem/wsman/1/wsmanfault'>"
            f"<s:Body><s:Fault><s:Code><s:Value>s:Receiver</s:Value></s:Code>"
            f"<s:Reason><s:Text xml:lang='en-US'>{reason}</s:Text></s:Reason>"
            f"<s:Detail><f:WSManFault Code='{code}'><f:Message>{reason}</f:Message></f:WSManFault></s:Detail>"
            f"</s:Fault></s:Body></s:Envelope>")
