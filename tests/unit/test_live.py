"""The live view: its token, its status API, its screens, and the VNC relay that keeps a
viewer's hands off the VM unless --live-control lets them on (and then records them).

The relay is checked against FakeVncServer (the narrowest seam: a VM's VNC); the real path
through QEMU's VNC and noVNC in Chromium is in tests/e2e/test_live_view.py."""

from __future__ import annotations

import importlib.util
import json
import queue
import struct
import urllib.error
import urllib.request

import pytest

from fakes.display import FakeDisplay
from fakes.vnc_server import BELL, NAME, FakeVncServer
from runner.display.vnc_auth import vnc_auth_response
from runner.errors import InfraError
from runner.live import LiveOptions, is_loopback, serving
from runner.live.board import Finished, LiveSource, SlotView, VncTarget
from runner.live.rfb_relay import KEY_EVENT_GAP_S, InputPacer, RfbRelay
from runner.display.vnc import CLICK_SETTLE_S, POINTER_GAP_S
from runner.live.server import LiveServer, find_novnc
from runner.scoring.safety import check_trajectory
from runner.tasks.model import SafetyRule
from typing_extensions import override

PASSWORD = "Ab3dE6gH"
HELLO = b"RFB 003.008\n" + b"\x01" + b"\x01"  # version, security type None, ClientInit (shared)
PIXEL_FORMAT = b"\x00" + bytes(19)
ENCODINGS = struct.pack(">BxH", 2, 2) + struct.pack(">ii", 0, -258)
UPDATE = b"\x03\x01" + struct.pack(">HHHH", 0, 0, 1280, 800)
KEY_A = struct.pack(">BBHI", 4, 1, 0, 0x61)
POINTER = struct.pack(">BBHH", 5, 1, 10, 20)
QEMU_KEY_B = struct.pack(">BBHII", 255, 0, 1, 0x62, 0x30)
EXTENDED_CLIPBOARD = struct.pack(">Bxxxi", 6, -4) + b"\x01\x00\x00\x00"  # capabilities, not a person
CUT_TEXT = struct.pack(">BxxxI", 6, 5) + b"hello"
NOT_INPUT = PIXEL_FORMAT + ENCODINGS + UPDATE
INPUT = KEY_A + POINTER + QEMU_KEY_B + EXTENDED_CLIPBOARD + CUT_TEXT


class FakeBrowser:
    """The browser's WebSocket, pre-loaded with what it sends; it records what it gets."""

    def __init__(self, *chunks: bytes) -> None:
        self._inbox: queue.Queue[bytes | None] = queue.Queue()
        for chunk in chunks:
            self._inbox.put(chunk)
        self._inbox.put(None)  # then it closes
        self.got = bytearray()

    def recv(self) -> bytes | None:
        return self._inbox.get(timeout=10)

    def send(self, data: bytes) -> None:
        self.got += data

    def close(self) -> None:
        self._inbox.put(None)


@pytest.fixture
def vnc():
    server = FakeVncServer(PASSWORD)
    yield server
    server.close()


def relay_through(vnc: FakeVncServer, *chunks: bytes, control: bool, password: str = PASSWORD):
    inputs: list[dict] = []
    browser = FakeBrowser(*chunks)
    relay = RfbRelay(browser, ("127.0.0.1", vnc.port), password, control=control, on_input=inputs.append)
    relay.run()
    assert vnc.closed.wait(10)
    return relay, browser, inputs


def test_the_answer_to_a_challenge_is_vnc_des_as_vncdotool_computes_it():
    from vncdotool import rfb  # an independent implementation, as the oracle

    challenge = bytes(range(16))
    for password in ("password", "Ab3dE6gH", "short", "longer-than-eight"):
        assert vnc_auth_response(password, challenge) == rfb.des_encrypt(rfb._vnc_des(password[:8]), challenge)


def test_view_only_relay_passes_the_screen_and_drops_every_input(vnc):
    relay, browser, inputs = relay_through(vnc, HELLO, NOT_INPUT[:7], NOT_INPUT[7:] + INPUT + UPDATE, control=False)
    assert bytes(vnc.received) == NOT_INPUT + UPDATE  # byte for byte, in order, inputs gone
    assert relay.dropped == 5 and inputs == []
    assert vnc.shared is True  # the run's own connection to the screen is never pushed off
    # The browser was greeted without a password and got the VM's ServerInit, then its messages.
    assert browser.got.startswith(b"RFB 003.008\n" + bytes([1, 1]) + struct.pack(">I", 0))
    assert browser.got.endswith(NAME + BELL)
    assert PASSWORD.encode() not in browser.got


def test_with_control_every_input_reaches_the_vm_and_is_reported(vnc):
    relay, _browser, inputs = relay_through(vnc, HELLO, NOT_INPUT, INPUT, control=True)
    assert bytes(vnc.received) == NOT_INPUT + INPUT
    assert relay.dropped == 0
    assert inputs == [{"input": "key", "keysym": 0x61, "down": True},
                      {"input": "pointer", "x": 10, "y": 20, "buttons": 1},
                      {"input": "key", "keysym": 0x62, "down": True},
                      {"input": "clipboard", "chars": 5}]


def pointer(buttons: int, x: int, y: int) -> bytes:
    return struct.pack(">BBHH", 5, buttons, x, y)


def key(keysym: int, down: bool) -> bytes:
    return struct.pack(">BBHI", 4, int(down), 0, keysym)


def pointer_messages(received: bytes) -> list[tuple[int, int, int]]:
    """(buttons, x, y) of each pointer message in RECEIVED, which holds nothing else."""
    assert len(received) % 6 == 0
    return [struct.unpack(">xBHH", received[i:i + 6]) for i in range(0, len(received), 6)]


def test_a_pointer_that_only_moves_is_reported_at_most_twice_a_second_and_reaches_the_vm_where_it_ends(vnc):
    moves = b"".join(pointer(0, x, 5) for x in range(50))
    _relay, _browser, inputs = relay_through(vnc, HELLO, moves + pointer(1, 49, 5), control=True)
    assert inputs[0] == {"input": "pointer", "x": 0, "y": 5, "buttons": 0}
    assert inputs[-1] == {"input": "pointer", "x": 49, "y": 5, "buttons": 1}  # a button change always is
    assert len(inputs) < 10
    # Moves still waiting for the pacer are replaced by later ones: the VM gets where the hand went,
    # in order, and the press where it was made.
    sent = pointer_messages(bytes(vnc.received))
    assert sent[-1] == (1, 49, 5) and len(sent) < 10
    xs = [x for _b, x, _y in sent]
    assert xs == sorted(xs)


def test_a_press_and_a_release_reach_the_vm_where_they_were_made_however_the_moves_between_merge(vnc):
    drag = pointer(0, 10, 10) + pointer(1, 10, 10) + b"".join(pointer(1, 10 + d, 10) for d in range(1, 40))
    _relay, _browser, _inputs = relay_through(vnc, HELLO, drag + pointer(0, 49, 10) + pointer(0, 60, 10), control=True)
    sent = pointer_messages(bytes(vnc.received))
    assert [m for m in sent if m[0] == 1][0] == (1, 10, 10)  # the press, not replaced by the drag's moves
    changes = [(a, b) for a, b in zip(sent, sent[1:], strict=False) if a[0] != b[0]]
    assert [b for _a, b in changes] == [(1, 10, 10), (0, 49, 10)]  # pressed at 10, released at 49
    assert sent[-1] == (0, 60, 10)


class RecordingPacer(InputPacer):
    """The relay's own pacer, noting when each input left for the VM."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[float, int]] = []

    def sent(self, kind: int, message: bytes) -> None:
        super().sent(kind, message)
        self.log.append((self.clock(), kind))


def test_a_burst_of_keys_reaches_the_vm_whole_in_order_and_paced(vnc):
    burst = b"".join(key(0x61 + n % 26, down) for n in range(20) for down in (True, False))
    browser = FakeBrowser(HELLO, burst)
    relay = RfbRelay(browser, ("127.0.0.1", vnc.port), PASSWORD, control=True)
    relay.pacer = pacer = RecordingPacer()
    relay.run()
    assert vnc.closed.wait(10)
    assert bytes(vnc.received) == burst  # the browser left at once; what it had sent still went
    times = [t for t, _kind in pacer.log]
    assert len(times) == 40
    assert all(b - a >= KEY_EVENT_GAP_S for a, b in zip(times, times[1:], strict=False))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_pacer_spaces_keys_and_pointers_and_holds_keys_after_a_click():
    clock = FakeClock()
    pacer = InputPacer(clock)
    a_down, a_up = key(0x61, True), key(0x61, False)
    assert pacer.wait_s(4, a_down) == 0
    pacer.sent(4, a_down)
    assert pacer.wait_s(4, a_up) == pytest.approx(KEY_EVENT_GAP_S)
    assert pacer.wait_s(255, QEMU_KEY_B) == pytest.approx(KEY_EVENT_GAP_S)  # QEMU's key events too
    assert pacer.wait_s(3, UPDATE[:10]) == 0  # a screen request never waits
    clock.now += KEY_EVENT_GAP_S
    assert pacer.wait_s(4, a_up) == 0

    pacer.sent(5, pointer(0, 5, 5))  # a move is no click
    assert pacer.wait_s(4, a_up) == 0
    assert pacer.wait_s(5, pointer(0, 6, 5)) == pytest.approx(POINTER_GAP_S)
    clock.now += POINTER_GAP_S
    pacer.sent(5, pointer(1, 6, 5))  # the press
    clock.now += POINTER_GAP_S
    pacer.sent(5, pointer(0, 6, 5))  # the release
    assert pacer.wait_s(4, a_down) == pytest.approx(CLICK_SETTLE_S)  # the focus follows the click first
    clock.now += CLICK_SETTLE_S
    assert pacer.wait_s(4, a_down) == 0


def test_a_message_of_unknown_length_ends_the_relay_without_passing_it(vnc):
    _relay, _browser, inputs = relay_through(vnc, HELLO, UPDATE + b"\x4d" + bytes(40), control=True)
    assert bytes(vnc.received) == UPDATE


def test_a_wrong_password_is_refused_before_the_browser_is_greeted(vnc):
    browser = FakeBrowser(HELLO)
    with pytest.raises(InfraError, match="refused the episode's password"):
        RfbRelay(browser, ("127.0.0.1", vnc.port), "wrong", control=True).run()
    assert browser.got == b""


# -- the server


class FakeSource(LiveSource):
    """A LiveSource of two slots, slot 0 with a screen and a VNC (FakeVncServer), slot 1 booting."""

    title = "linux-core / fake"

    def __init__(self, vnc_port: int = 1) -> None:
        self.vnc_port = vnc_port
        self.screen = FakeDisplay(1280, 800)
        self.inputs: list[dict] = []

    @override
    def slots(self):
        return [SlotView(0, "calc-to-file", 1, "agent", 12.0), SlotView(1, "env-var", 1, "boot", 3.0)]

    @override
    def progress(self):
        return 3, 8

    @override
    def finished(self):
        return [Finished("zip-roundtrip", 1, "pass")]

    @override
    def display(self, slot):
        return self.screen if slot == 0 else None

    @override
    def vnc(self, slot):
        return VncTarget("127.0.0.1", self.vnc_port, PASSWORD, self.inputs.append) if slot == 0 else None


def get(url: str, headers: dict | None = None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers


@pytest.fixture
def live():
    with LiveServer(FakeSource()) as server:
        yield server


def base(live: LiveServer) -> str:
    return f"http://127.0.0.1:{live.port}"


@pytest.mark.parametrize("path", ["/", "/api/status", "/api/screen/0.png", "/view/0", "/novnc/core/rfb.js", "/ws/0"])
def test_every_path_without_the_token_is_401(live, path):
    assert get(base(live) + path)[0] == 401
    assert get(base(live) + path + "?token=not-it")[0] == 401
    assert get(base(live) + path, {"Cookie": "cu_run_live=not-it"})[0] == 401


def test_the_url_printed_opens_the_page_and_sets_the_cookie_the_rest_uses(live):
    assert live.url.startswith("http://127.0.0.1:") and "?token=" in live.url
    status, body, headers = get(live.url)
    assert status == 200 and b"tileFor" in body
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in headers["Set-Cookie"]
    assert get(base(live) + "/api/status", {"Cookie": cookie})[0] == 200
    if find_novnc() is not None:
        status, body, headers = get(base(live) + "/novnc/core/rfb.js", {"Cookie": cookie})
        assert status == 200 and headers["Content-Type"] == "text/javascript" and b"export default class RFB" in body


def test_each_run_has_its_own_token():
    with LiveServer(FakeSource()) as one, LiveServer(FakeSource()) as two:
        assert one.token != two.token
        assert get(f"{base(two)}/api/status?token={one.token}")[0] == 401


def test_status_lists_the_busy_slots_and_the_progress(live):
    status, body, _ = get(f"{base(live)}/api/status?token={live.token}")
    data = json.loads(body)
    assert data["slots"] == [
        {"slot": 0, "task_id": "calc-to-file", "trial": 1, "phase": "agent", "elapsed_s": 12.0},
        {"slot": 1, "task_id": "env-var", "trial": 1, "phase": "boot", "elapsed_s": 3.0}]
    assert (data["done"], data["total"]) == (3, 8)
    assert data["finished"][0]["report"] == "run/report.html#zip-roundtrip-1"  # report.html's own anchor


def test_a_slot_screen_is_its_display_png_and_a_slot_without_a_vm_has_none(live):
    status, body, headers = get(f"{base(live)}/api/screen/0.png?token={live.token}")
    assert status == 200 and body.startswith(b"\x89PNG") and headers["Cache-Control"] == "no-store"
    assert get(f"{base(live)}/api/screen/1.png?token={live.token}")[0] == 404


def test_a_screen_is_taken_at_most_once_a_second_however_often_it_is_asked(live):
    taken = []
    real = live.source.screen.screenshot
    live.source.screen.screenshot = lambda: taken.append(1) or real()
    for _ in range(5):
        assert get(f"{base(live)}/api/screen/0.png?token={live.token}")[0] == 200
    assert len(taken) == 1


@pytest.mark.parametrize("path", ["/novnc/../../../etc/passwd", "/novnc/%2e%2e/%2e%2e/etc/passwd", "/run/../run.json"])
def test_no_file_outside_its_folder_is_served(tmp_path, path):
    (tmp_path / "run").mkdir()
    with LiveServer(FakeSource(), run_dir=tmp_path / "run") as server:
        assert get(f"{base(server)}{path}?token={server.token}")[0] == 404


def test_the_run_folder_serves_the_report_rendered_now_and_recordings_only(tmp_path):
    (tmp_path / "t" / "1").mkdir(parents=True)
    (tmp_path / "t" / "1" / "recording.mp4").write_bytes(b"mp4")
    (tmp_path / "t" / "1" / "agent.log").write_text("secret-ish")
    (tmp_path / "run.json").write_text("{}")
    with LiveServer(FakeSource(), run_dir=tmp_path) as server:
        status, body, _ = get(f"{base(server)}/run/report.html?token={server.token}")
        assert status == 200 and b"<h2>Summary</h2>" in body
        assert get(f"{base(server)}/run/t/1/recording.mp4?token={server.token}")[1] == b"mp4"
        assert get(f"{base(server)}/run/t/1/agent.log?token={server.token}")[0] == 404


def test_a_taken_port_is_one_clear_error(live):
    from runner.errors import UsageError

    with pytest.raises(UsageError, match=f"cannot listen on 127.0.0.1:{live.port}"):
        LiveServer(FakeSource(), port=live.port)


# The full-size screen's WebSocket is the live extra's (websockify): without it, these say why they skip.
needs_websockify = pytest.mark.skipif(importlib.util.find_spec("websockify") is None,
                                      reason="the live extra (websockify) is not installed: pip install 'cu-run[live]'")


@needs_websockify
def test_a_plain_get_of_the_websocket_path_is_a_clear_400(live):
    status, body, _ = get(f"{base(live)}/ws/0?token={live.token}")
    assert status == 400 and b"not a WebSocket upgrade" in body


@pytest.mark.parametrize("flags, message", [
    ({"live_control": True}, "go with --live"),
    ({"live_port": 8000}, "go with --live"),
    ({"live": True, "live_port": 70000}, "must be a port number"),
    ({"live": True, "cluster": "127.0.0.1:6379"}, "a --cluster run's VMs are on its hosts"),
])
def test_live_flags_that_cannot_work_are_refused_before_anything_starts(flags, message):
    from runner.errors import UsageError
    from runner.runs.request import RunRequest
    from runner.runs.run_plan import check_live_options

    with pytest.raises(UsageError, match=message):
        check_live_options(RunRequest.of("linux-core", "nop", **flags).where)


def test_beyond_loopback_the_run_warns_first():
    said = []
    with serving(FakeSource(), LiveOptions(host="0.0.0.0", control=True), said.append):
        pass
    assert said[0].startswith("warning: the live view listens on 0.0.0.0") and "mouse and keyboard" in said[0]
    assert said[1].startswith("live: http://0.0.0.0:")
    said.clear()
    with serving(FakeSource(), LiveOptions(), said.append):
        pass
    assert len(said) == 1 and said[0].startswith("live: http://127.0.0.1:")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")


def test_a_persons_input_is_no_safety_violation_of_the_agent():
    rule = SafetyRule(id="no-tools", allowed_tools=["screenshot"])
    human = {"step": None, "tool": "human", "action": "intervention", "intervention": True, "arguments": {}}
    assert check_trajectory([human], (rule,)) == []
    assert check_trajectory([{**human, "intervention": False, "step": 1}], (rule,)) != []


# -- in a real browser: the tiles, noVNC and the relay, against fakes of the VM


@pytest.fixture
def chromium(tmp_path):
    from browser import Chromium

    with Chromium(tmp_path / "chromium") as browser:
        yield browser


def test_chromium_shows_a_tile_per_slot_drawn_from_its_screen(live, chromium):
    page = chromium.open(live.url)
    page.wait_for("document.querySelectorAll('.tile').length == 2")
    page.wait_for("document.querySelector('.tile[data-slot=\"0\"] canvas').dataset.frames >= 1")
    # The fake screen is the desktop colour with a white box at the top left.
    pixel = page.eval("Array.from(document.querySelector('.tile[data-slot=\"0\"] canvas')"
                      ".getContext('2d').getImageData(200, 150, 1, 1).data)")
    assert pixel[:3] == [0x1f, 0x6f, 0x8b]
    assert "calc-to-file" in page.eval("document.querySelector('.tile[data-slot=\"0\"] .meta').textContent")
    assert page.eval("document.querySelector('#finished a').getAttribute('href')").endswith(
        "run/report.html?token=" + live.token + "#zip-roundtrip-1")


@pytest.mark.skipif(find_novnc() is None, reason="noVNC is not installed: scripts/setup-host.sh installs it")
@needs_websockify
@pytest.mark.parametrize("control", [False, True])
def test_novnc_in_chromium_reaches_the_vm_only_with_control(vnc, chromium, control):
    source = FakeSource(vnc.port)
    with LiveServer(source, control=control) as live:
        page = chromium.open(f"{base(live)}/view/0?token={live.token}")
        page.wait_for("document.body.dataset.state == 'connected'")
        rect = page.eval("(() => { const r = document.querySelector('#screen canvas').getBoundingClientRect();"
                         " return [r.x, r.y]; })()")
        before = len(vnc.received)
        page.click(rect[0] + 100, rect[1] + 50)
        page.type("a")
        if control:
            pressed = wait_until(lambda: [e for e in source.inputs if e.get("buttons") == 1])
            assert abs(pressed[0]["x"] - 100) <= 1 and abs(pressed[0]["y"] - 50) <= 1  # the page's half pixels
            assert wait_until(lambda: [e for e in source.inputs if e.get("keysym") == 0x61 and e["down"]])
            assert wait_until(lambda: b"\x05\x01" in bytes(vnc.received[before:]))  # the press reached the VM
        else:
            # What the page sends after the inputs proves they had their chance to arrive.
            page.eval("rfb._sock.send([3, 1, 0, 0, 0, 0, 0, 1, 0, 1]), true")
            assert wait_until(lambda: bytes(vnc.received).endswith(b"\x03\x01" + bytes(4) + b"\x00\x01\x00\x01"))
            assert source.inputs == []
            assert b"\x05\x01" not in bytes(vnc.received[before:])  # no pressed-button pointer event


def wait_until(condition, timeout: float = 10.0):
    import time

    deadline = time.monotonic() + timeout
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


# -- a person's input during a run


def test_an_intervention_is_a_trajectory_line_and_marks_only_its_episode(tmp_path):
    from types import SimpleNamespace

    from runner.agents.builtin import NopAgent
    from runner.runs.live_sources import SchedulerSource
    from runner.runs.pool_config import PoolConfig
    from runner.runs.scheduler import SlotScheduler, SlotStatus
    from runner.records.results import EpisodeRecord, ResultLog, summarize
    from runner.scoring.safety import read_trajectory
    from runner.tasks.model import load_suite

    tasks = load_suite("linux-core").select(["calc-to-file", "env-var"])
    config = PoolConfig(image=SimpleNamespace(), accel="tcg", vm_pool=1, run_id="t")
    seen_while_running = []

    def fake_attempt(slot, task, trial, attempt, started, _agent, ep_dir):  # the one seam faked: the VM's episode
        h.status[slot] = SlotStatus(task.id, trial, "agent nop")
        ep_dir.mkdir(parents=True)
        seen_while_running.append(source.slots())
        if task.id == "calc-to-file":
            h.intervene(slot, {"input": "key", "keysym": 0x61, "down": True})
        return EpisodeRecord(task.id, trial, "fail", "nop", 1.0, slot, attempt, started.isoformat(), started.isoformat())

    h = SlotScheduler(host=None, settings=None, pool=config, agent=NopAgent(), out_dir=tmp_path, attempt=fake_attempt)
    source = SchedulerSource(h, "linux-core / nop", total=2)
    h.on_record = source.record
    h.run([(t, 1) for t in tasks])
    records = {r.task_id: r for r in ResultLog(tmp_path).latest()}
    assert records["calc-to-file"].intervened and not records["env-var"].intervened
    [line] = read_trajectory(tmp_path / "calc-to-file" / "1" / "trajectory.jsonl")
    assert line["intervention"] is True and line["tool"] == "human" and line["step"] is None
    assert line["arguments"] == {"input": "key", "keysym": 0x61, "down": True} and line["phase"] == "agent nop"
    assert not (tmp_path / "env-var" / "1" / "trajectory.jsonl").exists()
    assert [s.task_id for [s] in seen_while_running] == ["calc-to-file", "env-var"]
    assert source.progress() == (2, 2)
    assert [(f.task_id, f.intervened) for f in source.finished()] == [("calc-to-file", True), ("env-var", False)]
    assert summarize(list(records.values()), ["calc-to-file", "env-var"])["overall"]["intervened"] == 1
    h.intervene(0, {"input": "key"})  # between episodes: nobody's, nothing written, nothing raised
