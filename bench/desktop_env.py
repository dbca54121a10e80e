"""Which desktop for linux-desktop under TCG: XFCE (the image's) against GNOME (OSWorld's Ubuntu
runs GNOME on Xorg), side by side in one run (docs/images.md):

    python bench/desktop_env.py [--keep]

GNOME is a variant of the linux-desktop recipe, built into a scratch catalog: the same packages
and apps, with gnome-session, gnome-shell, gnome-terminal and nautilus in place of XFCE's session,
window manager, panel, terminal and file manager, and .xinitrc starting gnome-session on Xorg.
For each, cold: boot to its desktop's ready check, the time to a terminal window, the QEMU
process's CPU use over 30 s of an idle desktop, and its PSS. Needs the linux-desktop image
(cu-run image build linux-desktop). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, pss_mib

from runner.config import Settings, recipe_dir
from runner.vm.episode import EpisodeOptions
from runner.vm.factory import EpisodeVmFactory
from runner.images.catalog import Catalog, Image
from runner.images.linux_images import LINUX_DESKTOP, RECIPES, build_image, build_variant
from runner.runs.scope import resolve_accel
from runner.hypervisor.libvirt_host import LibvirtHost

XFCE_ONLY = {"xfce4-session", "xfwm4", "xfce4-panel", "xfdesktop4", "xfce4-settings", "xfconf", "thunar",
             "xfce4-terminal"}
GNOME = ["gnome-session", "gnome-shell", "gnome-terminal", "nautilus"]
GNOME_XINIT = """#!/bin/sh
xrandr -s 1920x1080 2>/dev/null
xset s off s noblank -dpms
xset r off
export XDG_SESSION_TYPE=x11 XDG_CURRENT_DESKTOP=GNOME
exec gnome-session
"""
# Each desktop's terminal, and the window class it opens.
TERMINALS = {"xfce": ("xfce4-terminal", "Xfce4-terminal"), "gnome": ("gnome-terminal", "Gnome-terminal")}
WINDOW_MANAGERS = {"xfce": "Xfwm4", "gnome": "GNOME Shell"}  # what wmctrl -m names
DESKTOP_WAIT_S = 600
TERMINAL_TIMER = """
export DISPLAY=:0
t0=$(date +%s%N)
setsid sh -c "$1" >/dev/null 2>&1 < /dev/null &
deadline=$(($(date +%s) + 300))
until xdotool search --onlyvisible --class "$2" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo timeout; exit 0; }
    sleep 0.2
done
echo $(( ($(date +%s%N) - t0) / 1000000 ))
"""


def gnome_recipe(root: Path) -> Path:
    """The linux-desktop recipe with GNOME in place of XFCE, under ROOT/images/."""
    shutil.copytree(recipe_dir(LINUX_DESKTOP).parent / "common", root / "images" / "common")
    recipe = root / "images" / "linux-desktop-gnome"
    shutil.copytree(recipe_dir(LINUX_DESKTOP), recipe)
    lines = [p for p in (recipe / "packages.txt").read_text().split("\n") if p.strip() not in XFCE_ONLY]
    (recipe / "packages.txt").write_text("\n".join(lines + GNOME) + "\n")
    shutil.rmtree(recipe / "rootfs" / "home" / "user" / ".config" / "xfce4")
    (recipe / "rootfs" / "home" / "user" / ".xinitrc").write_text(GNOME_XINIT)
    return recipe


def cold_desktop(host, settings, image: Image, accel, wm: str, terminal: tuple[str, str]) -> dict:
    """One cold boot of IMAGE: seconds from the domain's start to its window manager WM up (the same
    probe for both desktops: their own desktop checks differ), to a terminal's window, and the idle
    desktop's CPU and memory. A desktop that never comes up is a result too: it says so."""
    vm = EpisodeVmFactory(host, image, settings, run_id="benchde",
                          options=EpisodeOptions(accel=accel, wait_desktop=False))(0)
    started = time.perf_counter()
    with vm:
        deadline = started + DESKTOP_WAIT_S
        while vm.shell.run(f"DISPLAY=:0 wmctrl -m 2>/dev/null | grep -q 'Name: {wm}'", timeout=60).exit_code != 0:
            if time.perf_counter() > deadline:
                return {"cold_boot_to_desktop_s": None, "error": f"no {wm} in {DESKTOP_WAIT_S} s",
                        "qcow2_mib": round(image.manifest.disk_bytes / 2**20)}
            time.sleep(1)
        to_desktop = time.perf_counter() - started
        out = vm.shell.run(f"set -- '{terminal[0]}' '{terminal[1]}'\n{TERMINAL_TIMER}", timeout=360).stdout.split()
        pid = int(Path(f"/run/libvirt/qemu/{vm.name}.pid").read_text())
        time.sleep(5)  # the terminal's own start-up settles before the idle desktop is measured
        cpu_before, wall_before = _cpu_seconds(pid), time.perf_counter()
        time.sleep(30)
        idle_cpu = (_cpu_seconds(pid) - cpu_before) / (time.perf_counter() - wall_before)
        return {"cold_boot_to_desktop_s": round(to_desktop, 1),
                "terminal_window_s": round(int(out[0]) / 1000, 2) if out and out[0].isdigit() else None,
                "idle_cpu_cores": round(idle_cpu, 2), "idle_pss_mib": round(pss_mib(pid)),
                "qcow2_mib": round(image.manifest.disk_bytes / 2**20)}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="keep the GNOME variant's scratch catalog")
    args = parser.parse_args()
    settings = Settings.resolve()
    xfce, _ = build_image(Catalog(settings.images_dir), LINUX_DESKTOP, progress=lambda _l: None)
    scratch = Path(tempfile.mkdtemp(prefix="bench-gnome-", dir=settings.cache_dir))
    try:
        started = time.perf_counter()
        spec = replace(RECIPES[LINUX_DESKTOP], name="linux-desktop-gnome", warm_apps=None,
                       desktop_ready_check="DISPLAY=:0 wmctrl -m 2>/dev/null | grep -q 'GNOME Shell'")
        gnome = build_variant(Catalog(scratch / "catalog"), spec, gnome_recipe(scratch), progress=lambda _l: None)
        build_s = round(time.perf_counter() - started, 1)
        host = LibvirtHost(settings.libvirt_uri)
        accel, _probe = resolve_accel(settings, "auto")
        try:
            results = {"accel": accel, "gnome_build_s": build_s,
                       "xfce": cold_desktop(host, settings, xfce, accel, WINDOW_MANAGERS["xfce"], TERMINALS["xfce"]),
                       "gnome": cold_desktop(host, settings, gnome, accel, WINDOW_MANAGERS["gnome"],
                                             TERMINALS["gnome"])}
        finally:
            host.close()
        results["gnome_over_xfce"] = {k: round(results["gnome"][k] / results["xfce"][k], 2) for k in results["xfce"]
                                      if results["gnome"].get(k) and results["xfce"].get(k)}
    finally:
        if not args.keep:
            for disk in scratch.rglob("*.qcow2"):
                disk.chmod(0o644)
            shutil.rmtree(scratch, ignore_errors=True)
    emit("desktop_env", results)


if __name__ == "__main__":
    main()
