"""gc against libvirt's own test driver: dead owners' domains and folders go, live ones stay."""

import json

import pytest

from runner.config import Settings
from runner.vm.episode import EPISODE_OWNER_FILE
from runner.vm.gc import collect_garbage
from runner.hypervisor.domain_xml import DomainSpec, EpisodeTag, SlotIdentity
from runner.hypervisor.libvirt_host import LibvirtHost
from runner.owner import Owner, me

DEAD = Owner(pid=2**22 + 7, start=1)  # above pid_max's default: never a live process


@pytest.fixture
def host():
    h = LibvirtHost("test:///default")
    yield h
    for d in h.cu_domains():
        h.destroy(d.name)
    h.close()


def start(host, settings, pool, owner):
    identity = SlotIdentity(pool, 0)
    workdir = settings.episodes_dir / identity.name
    workdir.mkdir(parents=True)
    (workdir / "overlay.qcow2").write_bytes(b"overlay")
    (workdir / EPISODE_OWNER_FILE).write_text(json.dumps({"owner_pid": owner.pid, "owner_start": owner.start}))
    spec = DomainSpec(identity=identity, accel="tcg", disk=workdir / "overlay.qcow2",
                      serial_log=workdir / "serial.log", tag=EpisodeTag(pool, 0, owner.pid, owner.start, workdir))
    host.start(spec)
    return identity.name, workdir


def test_removes_dead_owners_leftovers_and_keeps_live_ones(host, tmp_path):
    settings = Settings.resolve(cache_dir=tmp_path)
    dead_name, dead_dir = start(host, settings, "deadrun", DEAD)
    live_name, live_dir = start(host, settings, "liverun", me())
    orphan = settings.episodes_dir / "cu-crashed-0"  # a start that died before defining a domain
    orphan.mkdir()
    (orphan / "overlay.qcow2").write_bytes(b"x")

    report = collect_garbage(host, settings)

    assert f"domain {dead_name}" in report.removed
    assert not dead_dir.exists() and not orphan.exists()
    assert host.is_running(live_name) and live_dir.exists()
    assert any(live_name in k for k in report.kept)
    assert report.failed == []


def test_a_dry_run_lists_what_would_go_and_removes_nothing(host, tmp_path):
    settings = Settings.resolve(cache_dir=tmp_path)
    dead_name, dead_dir = start(host, settings, "deadrun", DEAD)
    orphan = settings.episodes_dir / "cu-crashed-0"
    orphan.mkdir()
    listed = collect_garbage(host, settings, dry_run=True)
    assert f"domain {dead_name}" in listed.removed and any(str(orphan) in r for r in listed.removed)
    assert host.is_running(dead_name) and dead_dir.exists() and orphan.exists()
    assert sorted(collect_garbage(host, settings).removed) == sorted(listed.removed)  # what it said it would


def test_all_removes_live_runs_too(host, tmp_path):
    settings = Settings.resolve(cache_dir=tmp_path)
    live_name, live_dir = start(host, settings, "liverun2", me())
    report = collect_garbage(host, settings, everything=True)
    assert f"domain {live_name}" in report.removed
    assert not host.is_running(live_name) and not live_dir.exists()


def test_foreign_cu_domain_without_metadata_is_left_alone(host, tmp_path):
    settings = Settings.resolve(cache_dir=tmp_path)
    host.start_xml("<domain type='test'><name>cu-not-ours</name><memory>1024</memory>"
               "<os><type>hvm</type></os></domain>")
    report = collect_garbage(host, settings, everything=True)
    assert host.is_running("cu-not-ours")
    assert any("cu-not-ours" in k and "not ours" in k for k in report.kept)


def test_never_deletes_outside_the_episodes_folder(host, tmp_path):
    settings = Settings.resolve(cache_dir=tmp_path / "cache")
    precious = tmp_path / "precious"
    precious.mkdir()
    spec = DomainSpec(identity=SlotIdentity("evil", 0), accel="tcg", disk=precious / "d.qcow2",
                      serial_log=precious / "s.log", tag=EpisodeTag("evil", 0, DEAD.pid, DEAD.start, precious))
    host.start(spec)
    collect_garbage(host, settings)
    assert precious.exists()
    assert not host.is_running("cu-evil-0")


def test_half_made_warm_states_of_dead_warmers_go_and_complete_ones_stay(host, tmp_path):
    from test_warm_states import FakeHost, make_image, write_slot

    from runner.vm.warm_state import current_deps

    settings = Settings.resolve(cache_dir=tmp_path)
    image = make_image(settings.images_dir)
    complete = write_slot(image, 0, current_deps(FakeHost(), image, "tcg", "qemu:///system"))
    dead = complete.with_name("slot-1.partial-999")
    alive = complete.with_name("slot-2.partial-1")
    for folder, owner in ((dead, DEAD), (alive, me())):
        folder.mkdir()
        (folder / EPISODE_OWNER_FILE).write_text(json.dumps({"owner_pid": owner.pid, "owner_start": owner.start}))
    report = collect_garbage(host, settings)
    assert not dead.exists() and alive.exists() and complete.exists()
    assert any("unfinished warm state" in r and "slot-1.partial" in r for r in report.removed)
    assert any(str(complete) in k for k in report.kept)


def test_a_dropped_libvirt_connection_is_opened_again(host, tmp_path):
    """libvirtd restarting drops every client: the host reconnects on its next call. (The test
    driver keeps no state across connections; that running domains outlive a real libvirtd's
    restart is the e2e fault test's.)"""
    before = host._conn
    before.close()  # as a libvirtd restart would leave it
    assert host.cu_domains() == [] and host._conn is not before and host._conn.isAlive()
