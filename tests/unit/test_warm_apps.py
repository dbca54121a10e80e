"""linux-desktop's cu-warm-apps, run on the host against fake X tools: it starts each app, waits for
its window, and fails when an app opens a second window (a first-run dialog) beside its own, so no
warm state is ever saved with a dialog in it. The real one runs in every warming of the image
(tests/e2e/test_desktop.py's fixture)."""

import os
import subprocess
from pathlib import Path

from runner.config import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "images" / "linux-desktop" / "rootfs" / "usr" / "local" / "bin" / "cu-warm-apps"
APPS = {"libreoffice": None, "gimp": "GNU Image Manipulation Program", "google-chrome": "about:blank - Chromium",
        "thunderbird": "Local Folders - Mozilla Thunderbird", "vlc": "VLC media player"}


def fake_desktop(tmp_path: Path, dialog_of: str | None) -> dict[str, str]:
    """A PATH whose apps "open" windows by adding lines to a file that the fake wmctrl and xdotool read;
    DIALOG_OF also opens a second window. pkill closes them all."""
    bin_dir, screen = tmp_path / "bin", tmp_path / "windows"
    bin_dir.mkdir()
    screen.write_text("xfce4-panel\nDesktop\n")
    tools = {
        "wmctrl": f'sed "s/^/0x01200003  0 cu-guest /" {screen}',  # as wmctrl -l prints: id, desktop, host, title
        "xdotool": f'grep -q -- "$4" {screen}',  # xdotool search --onlyvisible --name PATTERN
        "pkill": f"printf 'xfce4-panel\\nDesktop\\n' > {screen}",
        "pgrep": "exit 1",
        "sleep": "exit 0",
    }
    for app, title in APPS.items():
        opens = [title] if title else []
        if app == "libreoffice":  # libreoffice --calc|--writer|--impress
            tools[app] = f'echo "Untitled 1 - LibreOffice $(echo "$1" | sed "s/--//;s/./\\U&/")" >> {screen}'
        else:
            tools[app] = "; ".join(f"echo '{t}' >> {screen}" for t in opens) or "true"
        if app == dialog_of:
            tools[app] += f"; echo 'Welcome to {app}' >> {screen}"
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def test_every_app_up_with_its_own_window_only_warms(tmp_path):
    done = subprocess.run(["sh", str(SCRIPT)], env=fake_desktop(tmp_path, None), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "warmed: calc writer impress gimp chrome thunderbird vlc" in done.stdout


def test_a_first_run_dialog_fails_the_warm_up_naming_it(tmp_path):
    done = subprocess.run(["sh", str(SCRIPT)], env=fake_desktop(tmp_path, "thunderbird"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert "'Mozilla Thunderbird' opened more than its main window" in done.stderr
    assert "Welcome to thunderbird" in done.stderr and "warmed" not in done.stdout
    assert os.path.exists(tmp_path / "windows")
