"""FakeWsmanServer: a loopback HTTP server speaking the WS-Management exchange pywinrm
performs (shell Create, Command, Receive, Signal, Delete), for testing WinRmShell.

It stands in for a Windows guest's WinRM service at the narrowest seam: the SOAP over
HTTP. What a Windows guest would *do* is scripted: the transfer steps WinRmShell sends
(Set-Content / Add-Content of base64 chunks, the decode, Remove-Item, ReadAllBytes) act
on an in-memory file table, so an uploaded script arrives here byte for byte; running a
script (`powershell -File`) calls the test's handler with the script's text and sends
back whatever bytes, exit code or stall it chooses.
"""

from __future__ import annotations

import base64
import re
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NS = {"s": "http://www.w3.org/2003/05/soap-envelope", "a": "http://schemas.xmlsoap.org/ws/2004/08/addressing",
      "w": "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd", "rsp": "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"}
SHELL = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"


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
    user: str = "cu"
    password: str = "secret"
    fail_first: list[int] = field(default_factory=list)  # HTTP statuses for the first requests
    files: dict[str, bytes] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)  # every script run with -File, as decoded text
    command_lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._commands: dict[str, _Command] = {}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, text = fake._answer(self.headers.get("Authorization", ""), body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/soap+xml;charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the exchange

    def _answer(self, auth: str, body: bytes) -> tuple[int, str]:
        with self._lock:
            if self.fail_first:
                return self.fail_first.pop(0), "service starting"
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        if auth != expected:
            return 401, ""
        root = ET.fromstring(body)
        action = root.findtext(".//a:Action", namespaces=NS) or ""
        message_id = root.findtext(".//a:MessageID", namespaces=NS) or ""
        name = action.rsplit("/", 1)[-1]
        self.actions.append(name)
        if name == "Create":
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
