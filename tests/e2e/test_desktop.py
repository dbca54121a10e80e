"""linux-desktop on real VMs: the desktop at OSWorld's size, its user as unprivileged as linux-test's,
and desktop-core sound (the oracle passes every task, nop none). The desktop_image fixture warms a
slot, which starts every app once and fails on any window beside the app's own (cu-warm-apps): that
is the default tier's check that no app opens a first-run dialog. The full tier adds each app
started after a restore and checked the same way, `vm up --live` in a browser, the scripted GUI
solutions, validate at a pool of two, and the tamper suite's sample on this image."""

import json
import signal
import threading

import pytest
from browser import Chromium
from test_cli_vm import read_endpoints, vm_up
from test_live_view import canvas_share_js, fetch, share_of
from vmtools import cu_run, leftovers, wait_for

from runner.screen import color_fraction, png_size
from runner.runs.session import open_vm

# Each app, started as a person would from a terminal, and the window it must open on: no other
# window of its may come up (a tip of the day, a template chooser, an account wizard, a welcome
# page, a privacy question).
APPS = [("libreoffice --calc", "Untitled 1 - LibreOffice Calc"), ("libreoffice --impress", "Untitled 1 - LibreOffice Impress"),
        ("gimp", "GNU Image Manipulation Program"), ("google-chrome about:blank", "about:blank - Chromium"),
        ("thunderbird", "Local Folders - Mozilla Thunderbird"), ("vlc", "VLC media player")]
WAIT = """
export DISPLAY=:0
setsid sh -c "$1" >/dev/null 2>&1 < /dev/null &
deadline=$(($(date +%s) + 300))
until xdotool search --onlyvisible --name "$2" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "no window like $2"; break; }
    sleep 0.5
done
sleep 3  # a first-run dialog comes up after the main window, if at all: this shows it is not coming
wmctrl -l | cut -d' ' -f5-
for n in soffice.bin gimp chromium thunderbird vlc; do pkill -x "$n"; done
while pgrep -x 'soffice.bin|gimp|chromium|thunderbird|vlc' >/dev/null; do sleep 0.5; done
"""


def test_the_desktop_is_up_at_osworlds_size_and_its_user_is_unprivileged(desktop_image, settings, accel):
    with open_vm(settings, desktop_image.name, accel) as vm:
        png = vm.display.screenshot()
        assert png_size(png) == (1920, 1080)
        assert color_fraction(png, desktop_image.manifest.desktop_color) > 0.5
        who = vm.shell.run("id -un; id -Gn; echo $HOME; sudo -n true 2>/dev/null || echo no-sudo; "
                           "command -v google-chrome; gsettings get org.gnome.desktop.interface font-name",
                           timeout=60).stdout.split("\n")
        assert who[:4] == ["user", "user", "/home/user", "no-sudo"], who
        assert who[4] == "/usr/local/bin/google-chrome" and who[5].startswith("'"), who
        assert vm.admin_shell.run("sysctl -n kernel.sysrq", timeout=60).stdout.strip() == "0"


@pytest.mark.full
def test_every_app_starts_without_a_first_run_dialog(desktop_image, settings, accel):
    with open_vm(settings, desktop_image.name, accel) as vm:
        for command, title in APPS:
            windows = vm.shell.run(f"set -- '{command}' '{title}'\n{WAIT}", timeout=420).stdout.split("\n")
            apps = [w for w in windows if w and w not in ("xfce4-panel", "Desktop")]
            assert apps == [title], (command, windows)


@pytest.mark.full
def test_vm_up_live_shows_the_desktop_in_the_browser(desktop_image, host, settings, tmp_path):
    """`vm up --image linux-desktop --live`: its tile in headless Chromium and its full-size screen
    show XFCE's desktop; the user is OSWorld's; Ctrl-C (SIGTERM) leaves nothing behind."""
    colour = tuple(int(desktop_image.manifest.desktop_color[i:i + 2], 16) for i in (1, 3, 5))
    proc = vm_up("--image", "linux-desktop", "--live")
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr), daemon=True)
    reader.start()
    endpoints = read_endpoints(proc)
    try:
        assert endpoints["ssh"]["user"] == "user"
        url = wait_for(lambda: next((l for l in said if l.startswith("live: ")), None), 120, "the live: line")
        url = url.removeprefix("live: ").strip()
        base, token = url.split("/?token=")
        with Chromium(tmp_path / "chromium") as browser:
            page = browser.open(url)
            page.wait_for("document.querySelectorAll('.tile canvas[data-frames]').length == 1", timeout=120)
            share = page.eval(canvas_share_js(".tile canvas", colour))
            assert share > 0.5, f"the tile: {share:.2f} of it shows the desktop colour"
        screen = wait_for(lambda: (r := fetch(f"{base}/api/screen/0.png?token={token}"))[0] == 200 and r[1], 60,
                          "the live view's screen")
        assert share_of(screen, colour) > 0.5
    finally:
        proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    reader.join(timeout=10)
    assert code != 0 and "Traceback" not in "".join(said)
    assert host.lookup(endpoints["domain"]) is None


# The default tier's sample of desktop-core: a spreadsheet and a mail filter. GIMP's config is
# validated by test_benchmarks.py's OSWorld sample, and every app is started once by the warming
# of the desktop fixture; the full tier validates all seven tasks at a pool of two (below).
SAMPLE = ("calc-sum-xlsx", "thunderbird-filter")


def test_validate_desktop_core(desktop_image, host, settings, tmp_path):
    out = tmp_path / "validate"
    result = cu_run("validate", "--suite", "desktop-core", "--tasks", ",".join(SAMPLE), "--vm-pool", "1",
                    "--out", str(out), timeout=3000)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for agent, expected in (("oracle", "pass"), ("nop", "fail")):
        records = [json.loads(line) for line in (out / agent / "results.jsonl").read_text().splitlines()]
        assert len(records) == len(SAMPLE) and {r["outcome"] for r in records} == {expected}, records
    run = json.loads((out / "oracle" / "run.json").read_text())
    assert run["image"]["name"] == "linux-desktop"
    assert leftovers(host, settings) == []


@pytest.mark.full
def test_the_scripted_gui_solution_passes(desktop_image, settings, tmp_path):
    """Writer driven through the GUI tools alone. chromium-bookmark's GUI script is left out: under
    TCG Chromium's first page in a window does not load within 300 s (docs/images.md)."""
    out = tmp_path / "gui"
    result = cu_run("run", "--suite", "desktop-core", "--agent", "scripted", "--tasks", "writer-heading-docx",
                    "--out", str(out), timeout=3000)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["task_id"]: r["outcome"] for r in records} == {"writer-heading-docx": "pass"}


@pytest.mark.full
def test_validate_desktop_core_on_a_pool_of_two(desktop_pool_of_two, host, settings, tmp_path):
    out = tmp_path / "validate"
    result = cu_run("validate", "--suite", "desktop-core", "--vm-pool", "2", "--out", str(out), timeout=3000)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert leftovers(host, settings) == []
