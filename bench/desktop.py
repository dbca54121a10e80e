"""The linux-desktop guest, measured side by side in one run (docs/performance.md):

    python bench/desktop.py [--uncached] [--apps calc,writer,gimp,chrome,thunderbird,vlc] [--overhead]

- the image build, cached (the catalog's), and with --uncached from nothing into a scratch catalog;
  the qcow2's size, and the RAM state's with the apps warmed (slot 0) and without (a plain one);
- cold boot to the desktop against a warm restore to it: warm/cold, target at most 0.15;
- each app's start to its window with a file open, in one VM each: after a cold boot, after a
  restore of a plain warm state, after a restore of the apps-warmed one: target warm at most a
  third of cold;
- with --overhead, desktop-core's oracle at pool 1: the median and p90 outside the agent;
- an idle VM's QEMU PSS, and how many of them admission lets this host hold.

Needs the image and one warm slot (cu-run image build linux-desktop; cu-run image warm
linux-desktop --slots 1); makes a plain warm state of its own in slot PLAIN_SLOT, and removes it.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, pss_mib, warm_oracle_run

from runner.config import Settings
from runner.vm.episode import EpisodeVM
from runner.images.catalog import Catalog
from runner.images.linux_images import LINUX_DESKTOP, build_image
from runner.vm.warm_state import load_slot, slot_folder
from runner.vm.warming import warm_image
from runner.vm.admission import admit, available_mib
from runner.runs.scope import ScopeRequest, open_scope

PLAIN_SLOT = 9  # a warm state without the apps warmed, made here and removed after
# Each app on a file of its kind, and the window title that says it is open on it.
APPS = {
    "calc": ("libreoffice --calc ~/Documents/bench.xlsx", "bench.xlsx - LibreOffice Calc"),
    "writer": ("libreoffice --writer ~/Documents/bench.docx", "bench.docx - LibreOffice Writer"),
    "gimp": ("gimp ~/Pictures/bench.png", "bench.*GIMP"),
    "chrome": ("google-chrome file:///home/user/Documents/bench.html", "Bench page - Chromium"),
    "thunderbird": ("thunderbird", "Mozilla Thunderbird"),
    "vlc": ("vlc", "VLC media player"),
}
TASKS = Path(__file__).resolve().parents[1] / "tasks" / "desktop-core"
# In the guest: each app started, timed to its window, and closed.
TIMER = """
export DISPLAY=:0
t0=$(date +%s%N)
setsid sh -c "$1" >/dev/null 2>&1 < /dev/null &
deadline=$(($(date +%s) + 300))
# wmctrl reads the EWMH title (_NET_WM_NAME), which names the open file; xdotool's --name reads
# WM_NAME, which GIMP keeps as "GNU Image Manipulation Program" whatever it has open.
until wmctrl -l 2>/dev/null | sed -E 's/^[^ ]+ +[^ ]+ +[^ ]+ //' | grep -qE -- "$2"; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo timeout; exit 0; }
    sleep 0.2
done
echo $(( ($(date +%s%N) - t0) / 1000000 ))
for n in soffice.bin gimp chromium thunderbird vlc; do pkill -x "$n"; done
while pgrep -x 'soffice.bin|gimp|chromium|thunderbird|vlc' >/dev/null; do sleep 0.2; done
"""


def app_starts(vm: EpisodeVM, apps: list[str]) -> dict[str, float | None]:
    """Each app's seconds to its window with its file open, in VM, one after the other."""
    import io

    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        png = io.BytesIO()
        Image.new("RGB", (64, 64), "#ff0000").save(png, format="PNG")
        (Path(tmp) / "bench.png").write_bytes(png.getvalue())
        (Path(tmp) / "bench.html").write_text("<title>Bench page</title><p>bench</p>")
        home = vm.desktop_user.home
        for name, where in (("bench.png", "Pictures"), ("bench.html", "Documents")):
            vm.shell.put(Path(tmp) / name, f"{home}/{where}/{name}")
    vm.shell.put(TASKS / "calc-sum-xlsx" / "xlsx.py", "/tmp/xlsx.py")
    vm.shell.put(TASKS / "writer-heading-docx" / "docx.py", "/tmp/docx.py")
    made = vm.shell.run("python3 -I /tmp/xlsx.py write ~/Documents/bench.xlsx && "
                        "python3 -I /tmp/docx.py write ~/Documents/bench.docx", timeout=120)
    if not made.ok:
        raise RuntimeError(f"could not make the apps' files: {made.stderr}")
    found: dict[str, float | None] = {}
    for app in apps:
        command, title = APPS[app]
        out = vm.shell.run(f"set -- '{command}' '{title}'\n{TIMER}", timeout=420).stdout.strip().splitlines()
        found[app] = round(int(out[0]) / 1000, 2) if out and out[0].isdigit() else None
    return found


def one_vm(scope, warm, apps: list[str]) -> dict:
    vm = scope.vm_factory("benchdesk")(0 if warm is None else warm.state.slot, warm=warm)
    with vm:
        phases = dict(vm.timings.phases)
        to_desktop = sum(v for k, v in phases.items() if k in ("overlay", "domain_start", "restore", "shell_ready",
                                                                 "desktop_ready"))
        pid = int(Path(f"/run/libvirt/qemu/{vm.name}.pid").read_text())
        result = {"to_desktop_s": round(to_desktop, 2), "idle_pss_mib": round(pss_mib(pid), 1),
                  "app_start_s": app_starts(vm, apps)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uncached", action="store_true", help="also time a build from nothing, in a scratch catalog")
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--overhead", action="store_true", help="also run desktop-core's oracle at pool 1")
    args = parser.parse_args()
    apps = [a for a in args.apps.split(",") if a]
    settings = Settings.resolve()
    results: dict = {}
    catalog = Catalog(settings.images_dir)
    if args.uncached:
        with tempfile.TemporaryDirectory(dir=settings.cache_dir) as tmp:
            started = time.perf_counter()
            build_image(Catalog(Path(tmp)), LINUX_DESKTOP, progress=lambda _l: None)
            results["image_build_uncached_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    image, _ = build_image(catalog, LINUX_DESKTOP, progress=lambda _l: None)
    results["image_build_cached_s"] = round(time.perf_counter() - started, 2)
    results["qcow2_mib"] = round(image.manifest.disk_bytes / 2**20)
    with open_scope(settings, ScopeRequest(LINUX_DESKTOP, start="warm", vm_pool=1)) as scope:
        apps_warm = scope.start.slots[0]
        (plain,) = warm_image(scope.host, settings, image, 1, scope.accel, first=PLAIN_SLOT, warm_apps=False,
                              progress=lambda _l: None)
        try:
            results["ram_state_mib"] = {"apps_warmed": round(apps_warm.state.ram_bytes / 2**20),
                                        "plain": round(plain.state.ram_bytes / 2**20)}
            runs = {"cold": one_vm(scope, None, apps), "warm_plain": one_vm(scope, plain, apps),
                    "warm_apps": one_vm(scope, load_slot(image, 0), apps)}
        finally:
            shutil.rmtree(slot_folder(image, PLAIN_SLOT), ignore_errors=True)
        cold, warm = runs["cold"]["to_desktop_s"], runs["warm_apps"]["to_desktop_s"]
        results["to_desktop_s"] = {k: v["to_desktop_s"] for k, v in runs.items()}
        results["warm_over_cold_to_desktop"] = round(warm / cold, 3)
        results["app_start_s"] = {k: v["app_start_s"] for k, v in runs.items()}
        results["warm_over_cold_app_start"] = {
            app: {kind: round(runs[kind]["app_start_s"][app] / runs["cold"]["app_start_s"][app], 2)
                  for kind in ("warm_plain", "warm_apps")
                  if runs[kind]["app_start_s"][app] and runs["cold"]["app_start_s"][app]} for app in apps}
        results["idle_pss_mib"] = {k: v["idle_pss_mib"] for k, v in runs.items()}
        admitted = admit(64, image.manifest.memory_mib, scope.accel, available_mib())
        results["admission"] = {"vms_this_host_holds": admitted.admitted, "per_vm_mib": admitted.per_vm_mib,
                                "available_mib": admitted.available_mib}
    if args.overhead:
        import statistics

        with tempfile.TemporaryDirectory() as tmp:
            run, counts = warm_oracle_run(settings, 1, Path(tmp) / "desktop-core", suite="desktop-core")
        overheads = sorted(r.duration_s - r.phases.get("agent", 0.0) for r in run.records)
        results["desktop_core_pool_1"] = {**counts, "overhead_median_s": round(statistics.median(overheads), 2),
                                          "overhead_p90_s": round(overheads[int(0.9 * (len(overheads) - 1))], 2)}
    emit("desktop", {"accel": "see to_desktop", "targets": {"warm_over_cold_to_desktop": 0.15,
                                                           "warm_over_cold_app_start": 0.33}, **results})


if __name__ == "__main__":
    main()
