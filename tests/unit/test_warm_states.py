"""Warm states: what makes one stale, how --start chooses, and the slot lock.

The host is a stand-in that reports versions (FakeHost); the image is a real catalog
folder with a real manifest, kernel and initrd files.
"""

import base64
import json
from datetime import UTC, datetime

import pytest

from runner.images.catalog import Catalog, ImageManifest, sha256_file
from runner.profiles.manifest import Credentials, DirectBoot, ScreenSize, SshAccess
from runner.errors import InfraError, UsageError
from runner.choices import StartChoice
from runner.vm.start_plan import plan_start
from runner.vm.warm_state import (
    STATE_FILE,
    SlotLock,
    WarmState,
    current_deps,
    device_xml,
    network_warm_script,
    list_slots,
    remove_warm,
    slot_folder,
    slot_lock,
    stale_reasons,
    warm_identity,
)

URI = "qemu:///system"


class FakeHost:
    """Stands in for LibvirtHost: only the versions warm states depend on."""

    def __init__(self, qemu="7.2.0", libvirt="9.0.0"):
        self._versions = {"hypervisor": qemu, "libvirt": libvirt}

    def versions(self):
        return dict(self._versions)


def make_image(root):
    folder = root / "linux-test"
    folder.mkdir(parents=True)
    for name, data in (("disk.qcow2", b"golden"), ("vmlinuz", b"kernel"), ("initrd.img", b"initrd")):
        (folder / name).write_bytes(data)
    manifest = ImageManifest(
        name="linux-test", profile="linux", disk="disk.qcow2", disk_sha256=sha256_file(folder / "disk.qcow2"),
        disk_bytes=6, boot=DirectBoot(kernel="vmlinuz", initrd="initrd.img", cmdline="root=/dev/vda"),
        screen=ScreenSize(width=1280, height=800), credentials=Credentials(user="cu", password="cu"),
        ssh=SshAccess(user="cu", private_key="keys/client_key", host_key="ssh-ed25519 AAAA"),
        built_at=datetime.now(UTC), build_seconds=1.0, builder="test",
    )
    (folder / "manifest.json").write_text(json.dumps(manifest.model_dump(mode="json")))
    return Catalog(root).get("linux-test")


def write_slot(image, slot, deps):
    folder = slot_folder(image, slot)
    folder.mkdir(parents=True)
    (folder / "base.qcow2").write_bytes(b"base")
    (folder / "ram.save").write_bytes(b"ram")
    state = WarmState(image=image.name, slot=slot, deps=deps, created_at=datetime.now(UTC), warm_seconds=40.0,
                      ram_bytes=3, base_bytes=4)
    (folder / STATE_FILE).write_text(state.model_dump_json())
    return folder


@pytest.fixture
def image(tmp_path):
    return make_image(tmp_path / "images")


def deps_now(image, host=None, accel="tcg"):
    return current_deps(host or FakeHost(), image, accel, URI)


def test_identical_deps_are_current_and_each_change_is_named(image):
    now = deps_now(image)
    assert stale_reasons(now, now) == []
    cases = {
        "golden_sha256": ("0" * 64, "golden disk changed"),
        "qemu": ("8.0.0", "QEMU's version changed"),
        "libvirt": ("10.0.0", "libvirt's version changed"),
        "device_xml_sha256": ("f" * 64, "device XML changed"),
        "accel": ("kvm", "accelerator changed"),
        "kernel_sha256": ("1" * 64, "kernel changed"),
        "firmware_sha256": ("2" * 64, "UEFI firmware changed"),
        "network_end_sha256": ("3" * 64, "network end it keeps changed"),
    }
    for field, (value, phrase) in cases.items():
        (reason,) = stale_reasons(now.model_copy(update={field: value}), now)
        assert phrase in reason, (field, reason)


def test_a_state_keeps_the_guests_network_end_and_one_saved_without_it_is_stale(image):
    """The linux guest keeps its forwarder dormant in the warm state (NetworkEnd.warm_script): a
    state saved before that, or with other forwarder code, is stale and re-warmed."""
    from runner.network.carriers import FORWARDER

    now = deps_now(image)
    assert image.manifest.guest.name == "linux" and now.network_end_sha256 is not None
    assert base64.b64encode(FORWARDER.read_bytes()).decode() in network_warm_script(image)
    (reason,) = stale_reasons(now.model_copy(update={"network_end_sha256": None}), now)
    assert "network end it keeps changed" in reason


def test_device_xml_has_no_per_episode_values_but_follows_the_machine(image):
    xml = device_xml(image, "tcg", URI)
    assert xml == device_xml(image, "tcg", URI)
    assert f"<name>{warm_identity(image, 0).name}</name>" in xml and "/warm-episode/overlay.qcow2" in xml
    assert xml != device_xml(image, "kvm", URI)
    assert deps_now(image).device_xml_sha256 != deps_now(image, accel="kvm").device_xml_sha256


def test_valid_states_for_every_slot_start_warm(image):
    write_slot(image, 0, deps_now(image))
    write_slot(image, 1, deps_now(image))
    plan = plan_start("auto", FakeHost(), image, "tcg", URI, vm_pool=2)
    assert plan.mode == "warm" and sorted(plan.slots) == [0, 1] and plan.notice is None
    assert [s.state.slot for s in list_slots(image)] == [0, 1]


def test_a_missing_slot_refuses_warm_and_auto_says_why_it_boots_cold(image):
    write_slot(image, 0, deps_now(image))
    with pytest.raises(UsageError, match="slot 1 has no warm state") as refused:
        plan_start("warm", FakeHost(), image, "tcg", URI, vm_pool=2)
    assert "cu-run image warm linux-test --slots 2" in str(refused.value)
    plan = plan_start("auto", FakeHost(), image, "tcg", URI, vm_pool=2)
    assert plan.mode == "cold" and plan.slots == {}
    assert "slot 1 has no warm state" in plan.notice and "\n" not in plan.notice


def test_a_stale_state_is_refused_never_restored(image):
    folder = write_slot(image, 0, deps_now(image))
    state = json.loads((folder / STATE_FILE).read_text())
    state["deps"]["golden_sha256"] = "0" * 64
    (folder / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(UsageError, match="stale: the golden disk changed") as refused:
        plan_start("warm", FakeHost(), image, "tcg", URI, vm_pool=1)
    assert "--force" in str(refused.value)
    plan = plan_start("auto", FakeHost(), image, "tcg", URI, vm_pool=1)
    assert plan.mode == "cold" and "golden disk changed" in plan.notice
    newer_qemu = plan_start("auto", FakeHost(qemu="8.2.0"), image, "tcg", URI, vm_pool=1)
    assert "QEMU's version changed" in newer_qemu.notice


def test_cold_needs_nothing(image):
    """(A mode that is none is refused at the edge, where text becomes a StartChoice:
    test_python_api, test_study.)"""
    assert plan_start(StartChoice.cold, FakeHost(), image, "tcg", URI, vm_pool=4).mode == "cold"


def test_remove_warm_deletes_every_slot_and_scratch_folder(image):
    first = write_slot(image, 0, deps_now(image))
    second = write_slot(image, 1, deps_now(image))
    scratch = first.with_name(f"{first.name}.partial-4242")
    scratch.mkdir()
    lock = slot_lock(image, 0)  # an episode leaves slot-0.lock beside the folders
    lock.acquire(timeout=1)
    lock.release()
    assert sorted(remove_warm(image)) == sorted(str(f) for f in (first, scratch, second))
    assert list_slots(image) == [] and not scratch.exists()
    assert remove_warm(image) == []


def test_an_incomplete_slot_is_not_a_warm_state(image):
    folder = write_slot(image, 0, deps_now(image))
    (folder / "ram.save").unlink()
    assert list_slots(image) == []
    assert plan_start("auto", FakeHost(), image, "tcg", URI, vm_pool=1).mode == "cold"


def test_a_slot_is_held_by_one_episode_at_a_time(tmp_path):
    first = SlotLock(tmp_path / "slot-0.lock", "linux-test-0")
    second = SlotLock(tmp_path / "slot-0.lock", "linux-test-0")
    first.acquire(timeout=1)
    with pytest.raises(InfraError, match="in use by another run"):
        second.acquire(timeout=0.6)
    first.release()
    second.acquire(timeout=1)
    second.release()


def test_warm_names_differ_between_catalogs_but_not_between_calls(tmp_path):
    one, two = make_image(tmp_path / "a"), make_image(tmp_path / "b")
    assert warm_identity(one, 0) == warm_identity(one, 0)
    assert warm_identity(one, 0).name != warm_identity(two, 0).name
    assert warm_identity(one, 0).name.startswith("cu-warm-linux-test-") and warm_identity(one, 1).name.endswith("-1")


def test_slots_to_make_boot_side_by_side_keep_the_current_ones_and_a_failure_loses_none(image, monkeypatch):
    """warm_image's scheduling, with a fake in place of one slot's boot (_warm_slot): the current
    slot is kept, the others boot at once up to the host's cores, and a failed slot neither stops
    nor loses the ones beside it."""
    import threading

    from runner.vm import warming

    write_slot(image, 0, deps_now(image))
    running, most, lock = [0], [0], threading.Lock()
    both_started = threading.Barrier(2, timeout=30)

    def fake_warm_slot(host, settings, image_, slot, accel, current, progress, warm_apps, boots):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        if slot in (1, 2):
            both_started.wait()  # slots 1 and 2 are in flight together, or this times out
        with lock:
            running[0] -= 1
        if slot == 2:
            raise InfraError("slot 2's guest never came up")
        return write_slot(image_, slot, current)

    monkeypatch.setattr(warming, "_warm_slot", fake_warm_slot)
    monkeypatch.setattr(warming.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(warming, "available_mib", lambda: 64 * 1024)

    class Settings:
        libvirt_uri = URI

    with pytest.raises(InfraError, match="slot 2"):
        warming.warm_image(FakeHost(), Settings(), image, 4, "tcg", progress=lambda _line: None)
    assert most[0] == 2  # never more at once than the cores
    assert [s.state.slot for s in list_slots(image)] == [0, 1, 3]  # slot 2 failed; 1 and 3 were still made


def test_ctrl_c_while_slots_boot_destroys_their_vms_waits_for_their_teardown_and_begins_no_more(image, monkeypatch):
    """Ctrl-C reaches only the main thread, and a boot on a worker thread cannot be interrupted.
    warm_image destroys the VMs of the slots being made, so their boots fail at once and tear
    down; it raises the interruption only once they have ended, and a slot still queued is never
    begun. The fake boot (in place of _warm_slot) holds its slot as the real one does and returns
    only when its domain is destroyed, as a real boot's liveness check does."""
    import _thread
    import threading

    from runner.errors import HostFault
    from runner.vm import warming

    destroyed: dict[str, threading.Event] = {name: threading.Event()
                                             for name in (warm_identity(image, s).name for s in range(3))}
    begun, torn_down = [], []
    both_held = threading.Barrier(3, timeout=30)

    class DestroyRecordingHost(FakeHost):
        def destroy(self, name):
            destroyed[name].set()
            return True

    def fake_warm_slot(host, settings, image_, slot, accel, current, progress, warm_apps, boots):
        begun.append(slot)
        boots.hold(slot)
        try:
            both_held.wait()
            assert destroyed[warm_identity(image_, slot).name].wait(30), "the booting VM was never destroyed"
            torn_down.append(slot)
            raise HostFault(f"VM of slot {slot} is not running any more")
        finally:
            boots.let_go(slot)

    def interrupt_once_both_boot():
        both_held.wait()
        _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread

    monkeypatch.setattr(warming, "_warm_slot", fake_warm_slot)
    monkeypatch.setattr(warming.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(warming, "available_mib", lambda: 64 * 1024)

    class Settings:
        libvirt_uri = URI

    threading.Thread(target=interrupt_once_both_boot, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        warming.warm_image(DestroyRecordingHost(), Settings(), image, 3, "tcg", progress=lambda _line: None)
    assert sorted(torn_down) == [0, 1]  # both had ended before the interruption was raised
    assert sorted(begun) == [0, 1]  # slot 2 was still queued: never begun
    assert not destroyed[warm_identity(image, 2).name].is_set()  # a slot not held is never touched
    assert list_slots(image) == []
