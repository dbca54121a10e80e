"""Warm start on real VMs: states made by `image warm`, restored into fresh overlays, refused when stale."""

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

from vmtools import cu_run, leftovers, wait_for

from runner.images.catalog import Catalog, sha256_file
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.vm.warm_state import STATE_FILE, list_slots, warm_identity


def test_image_list_shows_the_warm_states(warm_slots):
    listed = cu_run("image", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (image,) = [i for i in json.loads(listed.stdout) if i["name"] == "linux-test"]
    assert [w["slot"] for w in image["warm"]][:2] == [0, 1]
    assert all(w["bytes"] > 50 * 2**20 for w in image["warm"])  # a desktop's RAM is in there


def test_two_warm_episodes_at_once_each_have_their_own_disk(host, settings, linux_image, accel, warm_slots):
    bases = {s.state.slot: sha256_file(s.base) for s in warm_slots}
    with contextlib.ExitStack() as stack:
        vms = [stack.enter_context(EpisodeVM(host, linux_image, settings, run_id="warmtest", slot=s.state.slot,
                                             options=EpisodeOptions(accel=accel), warm=s))
               for s in warm_slots]
        assert [vm.name for vm in vms] == [warm_identity(linux_image, 0).name, warm_identity(linux_image, 1).name]
        assert vms[0].name.startswith("cu-warm-linux-test-") and vms[0].name.endswith("-0")
        assert all(host.is_running(vm.name) for vm in vms)
        for vm in vms:
            assert "restore" in vm.timings.phases and "desktop_ready" in vm.timings.phases
            guest_now = float(vm.shell.run("date +%s.%N", timeout=60).stdout)
            assert abs(guest_now - time.time()) < 10, "the restored guest's clock was not set"
        vms[0].shell.run("echo only-in-zero > /home/cu/warm-marker.txt && sync", timeout=60)
        assert vms[0].shell.run("cat /home/cu/warm-marker.txt", timeout=60).stdout == "only-in-zero\n"
        assert vms[1].shell.run("test -e /home/cu/warm-marker.txt", timeout=60).exit_code == 1
        # The desktop a restore brings back is live: the terminal takes typed input.
        assert vms[1].shell.run("DISPLAY=:0 xdotool search --onlyvisible --classname '^xterm$'",
                                timeout=10).exit_code == 0
    assert all(host.lookup(vm.name) is None for vm in vms)
    assert {s.state.slot: sha256_file(s.base) for s in warm_slots} == bases, "a frozen slot disk was written"
    assert leftovers(host, settings) == []


def test_validate_with_warm_start_passes_as_the_cold_run_does(warm_slots, tmp_path):
    result = cu_run("validate", "--suite", "linux-core", "--start", "warm", "--vm-pool", "2",
                    "--out", str(tmp_path / "validate"), timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    run = json.loads((tmp_path / "validate" / "oracle" / "run.json").read_text())
    assert run["start"]["used"] == "warm"
    lines = [json.loads(l) for l in (tmp_path / "validate" / "oracle" / "results.jsonl").read_text().splitlines()]
    assert {l["outcome"] for l in lines} == {"pass"} and len(lines) == 8
    # Restored in the episode, or (with spares and a free core) as its standby.
    assert all({"restore", "standby_restore"} & set(l["phases"]) and "domain_start" not in l["phases"] for l in lines)


def linked_catalog(tmp_path, linux_image):
    """A second catalog (CU_RUN_HOME) whose linux-test links the real image's files, without its warm states."""
    home = tmp_path / "home"
    folder = home / "images" / "linux-test"
    folder.mkdir(parents=True)
    for entry in linux_image.folder.iterdir():
        if entry.name != "warm":
            (folder / entry.name).symlink_to(entry)
    return home, folder


def stale_catalog(tmp_path, linux_image, warm_slots):
    """A linked catalog whose linux-test has one warm slot with a changed golden sha256 recorded."""
    home, folder = linked_catalog(tmp_path, linux_image)
    slot = folder / "warm" / "slot-0"
    slot.mkdir(parents=True)
    for name in ("base.qcow2", "ram.save"):
        (slot / name).symlink_to(warm_slots[0].folder / name)
    state = json.loads((warm_slots[0].folder / STATE_FILE).read_text())
    state["deps"]["golden_sha256"] = "0" * 64
    (slot / STATE_FILE).write_text(json.dumps(state))
    return home


@pytest.mark.full  # a rarer path; staleness and the refusal: tests/unit/test_warm_states.py
def test_a_stale_warm_state_is_refused_and_auto_boots_cold(tmp_path, linux_image, warm_slots, host, settings):
    home = stale_catalog(tmp_path, linux_image, warm_slots)
    env = {**os.environ, "CU_RUN_HOME": str(home), "COLUMNS": "400"}
    refused = subprocess.run([sys.executable, "-m", "runner", "vm", "up", "--start", "warm", "--accel", "tcg"],
                             capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1
    assert "slot 0's warm state is stale: the golden disk changed" in refused.stderr, refused.stderr
    assert "--force" in refused.stderr

    proc = subprocess.Popen([sys.executable, "-m", "runner", "vm", "up", "--start", "auto", "--accel", "tcg",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        assert ready, "vm up printed nothing"
        endpoints = json.loads(proc.stdout.readline())
        assert not endpoints["domain"].startswith("cu-warm-"), "a stale state was restored"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert "starting cold: slot 0's warm state is stale: the golden disk changed" in stderr, stderr
    assert host.lookup(endpoints["domain"]) is None
    shutil.rmtree(home)


@pytest.mark.full  # a rarer path; scratch-then-rename: tests/unit/test_scratch.py
def test_an_interrupted_warm_leaves_nothing_half_made_and_a_rerun_finishes(tmp_path, linux_image, host, settings):
    """SIGINT while a slot boots: no scratch folder, no domain, no lock held; then the same command completes."""
    home, folder = linked_catalog(tmp_path, linux_image)
    env = {**os.environ, "CU_RUN_HOME": str(home), "COLUMNS": "400"}
    command = [sys.executable, "-m", "runner", "image", "warm", "linux-test", "--slots", "1", "--accel", "tcg"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = ""
    while "booting" not in seen:
        ready, _, _ = select.select([proc.stderr], [], [], 120)
        assert ready, f"image warm printed nothing; so far: {seen!r}"
        seen += proc.stderr.readline()
    wait_for(lambda: host.lookup(warm_identity(Catalog(home / "images").get("linux-test"), 0).name), 120,
             "the slot's domain to exist")  # well into the boot
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    image = Catalog(home / "images").get("linux-test")
    warm = folder / "warm"
    assert list_slots(image) == [] and not list(warm.glob("slot-*.partial-*")) and not (warm / "slot-0").exists()
    assert host.lookup(warm_identity(image, 0).name) is None
    episodes = home / "episodes"
    assert not episodes.exists() or not any(episodes.iterdir())

    finished = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert finished.returncode == 0, finished.stderr
    (slot,) = list_slots(image)
    assert slot.state.slot == 0 and slot.ram.stat().st_size > 50 * 2**20
    shutil.rmtree(home)


def test_at_pool_1_the_next_episode_takes_a_standby_vm_made_during_the_agent(warm_slots, tmp_path, host, settings):
    """With a spare warm state (slot 1 beside pool 1) and a free core, each episode after the
    first starts on a VM restored and warmed up while the one before ran: its record has the
    standby's phases and no restore of its own; nothing is left behind."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("a standby needs a core the pool leaves free")
    out = tmp_path / "standby"
    result = cu_run("run", "--suite", "linux-core", "--agent", "oracle", "--vm-pool", "1", "--start", "warm",
                    "--tasks", "folder-tree,env-var,calc-to-file", "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert [l["outcome"] for l in lines] == ["pass"] * 3
    lines.sort(key=lambda l: l["started_at"])
    assert "restore" in lines[0]["phases"]  # the first has no episode before it to overlap
    taken = [l for l in lines[1:] if "standby_restore" in l["phases"]]
    assert taken, [l["phases"] for l in lines]
    assert all("restore" not in l["phases"] and "standby_warm_up" in l["phases"] for l in taken)
    domains = {json.loads((out / l["task_id"] / "1" / "episode.json").read_text())["domain"] for l in lines}
    assert len(domains) >= 2  # a standby runs on a spare warm state, beside the slot's own
    assert leftovers(host, settings) == []


def test_a_frozen_clock_is_what_a_warm_restored_guest_sees(warm_slots, tmp_path):
    """suite.yaml's clock: the restored guest's time is set to the instant before the setup, and
    runs on from there through the verifier; run.json records it."""
    suite = tmp_path / "clock-suite"
    task = suite / "dated"
    task.mkdir(parents=True)
    (suite / "suite.yaml").write_text("clock: 2026-01-15T10:00:00Z\n")
    (task / "task.yaml").write_text("id: dated\ninstruction: Nothing to do.\nprofile: linux\ntimeout_s: 60\n"
                                    "write_set: {enabled: false}\n")
    (task / "setup.sh").write_text('date -u +%Y-%m-%dT%H:%M > "$USER_HOME/at-setup"\n')
    (task / "oracle.sh").write_text("true\n")
    (task / "verify.sh").write_text(
        'seen=$(cat "$USER_HOME/at-setup")\n'
        '[ "$seen" = 2026-01-15T10:00 ] || verdict fail "the setup saw $seen"\n'
        'now=$(date -u +%s)\n'
        # 10:00:00 is 1768471200: the clock ran on from the instant, and not for an hour
        '[ "$now" -ge 1768471200 ] && [ "$now" -lt 1768474800 ] || verdict fail "the verifier saw $(date -u)"\n'
        "verdict pass\n")
    out = tmp_path / "run"
    result = cu_run("run", "--suite", str(suite), "--agent", "oracle", "--start", "warm", "--out", str(out),
                    timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["outcome"] == "pass", record
    run = json.loads((out / "run.json").read_text())
    assert run["start"]["used"] == "warm" and run["suite"]["clock"] == {"dated": "2026-01-15T10:00:00Z"}
