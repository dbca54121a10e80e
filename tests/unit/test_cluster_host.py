"""A host's side of a cluster, without Ray: receiving an image (verified before it is
installed), leases that end a dead driver's run, the checks that stop a machine from joining,
and the refusals a client gets before it reaches the cluster."""

import os
import socket

import pytest

from runner.cluster import image_transfer, ray_link
from runner.cluster.host_service import Leases
from runner.cluster.image_transfer import ImageReceiver, chunks, image_files
from runner.cluster.join import host_blockers
from runner.cluster.ray_link import check_address, find_hosts, require_token
from runner.config import Settings
from runner.vm.doctor import Check
from runner.errors import InfraError, UsageError
from runner.images.catalog import Catalog, sha256_file
from test_catalog import make_image


def _send(receiver: ImageReceiver, image, corrupt: bool = False) -> None:
    files = image_files(image)
    receiver.begin(image.name, files)
    for rel, offset, data in chunks(image, files):
        if corrupt and rel == "disk.qcow2" and offset == 0:
            data = bytes([data[0] ^ 0xFF]) + data[1:]  # always a different byte
        receiver.write(image.name, rel, offset, data)


def _driver_image(tmp_path):
    folder = make_image(tmp_path / "driver", disk_bytes=os.urandom(10_000))
    (folder / "keys").mkdir()
    (folder / "keys" / "client_key").write_text("secret")
    (folder / "keys" / "client_key").chmod(0o600)
    (folder / "warm").mkdir()
    (folder / "warm" / "ram.bin").write_text("this machine's RAM state")
    return Catalog(tmp_path / "driver").get("linux-test")


def test_an_image_arrives_in_chunks_and_is_installed_once_its_sha256_matches(tmp_path, monkeypatch):
    monkeypatch.setattr(image_transfer, "CHUNK_BYTES", 4096)  # the disk arrives in three chunks
    image = _driver_image(tmp_path)
    receiver = ImageReceiver(Settings.resolve(tmp_path / "host"))
    _send(receiver, image)
    modes = {rel: (image.folder / rel).stat().st_mode & 0o777 for rel in image_files(image)}
    installed = receiver.commit(image.name, image.manifest.disk_sha256, modes)
    assert sha256_file(installed.disk) == image.manifest.disk_sha256
    assert (installed.folder / "keys" / "client_key").stat().st_mode & 0o777 == 0o600
    assert not (installed.folder / "warm").exists()  # warm states belong to the machine that made them
    assert list((tmp_path / "host" / "incoming").iterdir()) == []


def test_a_corrupted_copy_is_refused_and_nothing_is_installed(tmp_path):
    image = _driver_image(tmp_path)
    receiver = ImageReceiver(Settings.resolve(tmp_path / "host"))
    _send(receiver, image, corrupt=True)
    with pytest.raises(InfraError, match="corrupted on the way"):
        receiver.commit(image.name, image.manifest.disk_sha256, {})
    assert Catalog(tmp_path / "host" / "images").find("linux-test") is None
    assert list((tmp_path / "host" / "incoming").iterdir()) == []


def test_the_driver_s_image_replaces_an_older_one_of_the_same_name(tmp_path):
    make_image(tmp_path / "host" / "images", disk_bytes=b"an older build")
    image = _driver_image(tmp_path)
    receiver = ImageReceiver(Settings.resolve(tmp_path / "host"))
    _send(receiver, image)
    receiver.commit(image.name, image.manifest.disk_sha256, {})
    assert Catalog(tmp_path / "host" / "images").get("linux-test").manifest.disk_sha256 == image.manifest.disk_sha256


def test_an_image_file_cannot_be_written_outside_its_folder(tmp_path):
    receiver = ImageReceiver(Settings.resolve(tmp_path / "host"))
    receiver.begin("linux-test", {})
    with pytest.raises(InfraError, match="outside"):
        receiver.write("linux-test", "../../escaped", 0, b"x")


def test_a_run_whose_driver_stops_renewing_its_lease_expires():
    now = [0.0]
    leases = Leases(lease_s=30, clock=lambda: now[0])
    leases.renew("alive")
    leases.renew("dead")
    now[0] = 25.0
    leases.renew("alive")
    now[0] = 31.0
    assert leases.expired() == ["dead"]
    leases.drop("dead")
    now[0] = 56.0
    assert leases.expired() == ["alive"]


def test_a_machine_that_cannot_run_episodes_cannot_join_but_a_missing_image_is_fine():
    checks = [Check("libvirt", "fail", "no socket", "start libvirtd"), Check("images", "fail", "no linux-test"),
              Check("image tools", "fail", "no mmdebstrap"), Check("disk", "ok", "plenty")]
    assert [c.name for c in host_blockers(checks)] == ["libvirt"]


def test_a_client_without_the_token_is_refused_before_it_connects(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setattr(ray_link, "DEFAULT_TOKEN_FILE", tmp_path / "none")
    with pytest.raises(UsageError) as info:
        require_token()
    assert "no token" in info.value.message and "RAY_AUTH_TOKEN_PATH" in info.value.fix
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "empty"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(UsageError, match="missing or empty"):
        require_token()


def test_a_wrong_address_is_refused_with_what_to_check():
    with pytest.raises(UsageError, match="not a Ray address"):
        check_address("head-without-port")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: nothing answers
        with pytest.raises(UsageError, match="nothing answers") as info:
            check_address(f"127.0.0.1:{port}")
    assert "firewall" in info.value.fix


class FakeRay:
    """Ray's client as find_hosts uses it: named actors, each answering info()."""

    class _Ref:
        def __init__(self, value):
            self.value = value

    class _Actor:
        def __init__(self, info):
            self.info = type("M", (), {"remote": lambda _self: FakeRay._Ref(info)})()

    def __init__(self, infos):
        self.infos = infos
        self.util = type("U", (), {"list_named_actors": lambda _self, all_namespaces: [
            {"name": f"host:{i['name']}", "namespace": "cu-run"} for i in infos] + [
            {"name": "host:other", "namespace": "not-cu-run"}]})()

    def get_actor(self, name, namespace):
        return self._Actor(next(i for i in self.infos if f"host:{i['name']}" == name))

    def get(self, ref, timeout):
        return ref.value


def test_a_cluster_without_hosts_or_with_another_version_is_refused():
    with pytest.raises(UsageError, match="has no cu-run hosts") as info:
        find_hosts(FakeRay([]), "10.0.0.5:6379")
    assert "cu-run host join 10.0.0.5:6379" in info.value.fix
    with pytest.raises(UsageError, match="another version") as info:
        find_hosts(FakeRay([{"name": "lab-1", "version": "0.0.1"}]), "10.0.0.5:6379")
    assert "lab-1 runs 0.0.1" in info.value.message
    hosts = find_hosts(FakeRay([{"name": "lab-1", "version": "0.0.1"}]), "a:1", check_version=False)
    assert [h.name for h in hosts] == ["lab-1"]


def test_two_runs_on_one_host_never_hold_the_same_slot_and_an_ended_run_stops_waiting():
    import threading

    from runner.cluster.host_service import SlotPool

    pool = SlotPool(1)
    first = pool.take(lambda: None)
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.take(lambda: None, poll_s=0.05)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and got == []  # the only slot is held: the other run waits
    pool.give(first)
    waiter.join(5)
    assert got == [first]

    def ended():
        raise InfraError("the run ended")

    with pytest.raises(InfraError, match="ended"):
        pool.take(ended, poll_s=0.05)
