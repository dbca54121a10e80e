"""A task's services: a folder served by the runner, or a container image run by the host's engine,
driven here through a FAKE engine CLI (tests/fake_container_runtime.py; no engine runs on this
host), each reached at its address and gone when the episode ends."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from runner.errors import InfraError, UsageError
from runner.network import services
from runner.network.services import ContainerService, FolderService, container_runtime
from runner.runs.episode_network import service_for
from runner.tasks.model import ServiceSpec

FAKE_ENGINE = Path(__file__).resolve().parents[1] / "fake_container_runtime.py"


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """The fake engine as the host's, with one image, localhost/shop:1, serving index.html."""
    monkeypatch.setenv("FAKE_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_IMAGES", str(tmp_path / "images"))
    monkeypatch.setenv(services.RUNTIME_ENV, str(FAKE_ENGINE))
    (tmp_path / "images" / "localhost_shop_1").mkdir(parents=True)
    (tmp_path / "images" / "localhost_shop_1" / "index.html").write_text("the shop")
    return tmp_path


def get(address: tuple[str, int], path: str = "/index.html") -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return opener.open(f"http://{address[0]}:{address[1]}{path}", timeout=10).read()


def test_an_image_service_runs_published_on_loopback_never_pulled_and_is_removed_after(engine):
    spec = ServiceSpec(name="shop.test", image="localhost/shop:1", port=8080)
    service = service_for(spec, engine)
    assert isinstance(service, ContainerService)
    with service:
        assert get(service.address) == b"the shop"
        assert service.source == "localhost/shop:1"
    run, removed = (engine / "state" / "commands").read_text().splitlines()[:2]
    assert "--pull never" in run and f"-p 127.0.0.1:{service.address[1]}:8080" in run
    assert removed == f"rm -f {service.container}"
    assert not (engine / "state" / f"{service.container}.pid").exists()
    with pytest.raises(OSError):
        get(service.address)


def test_an_image_not_loaded_or_never_ready_fails_the_start_saying_why_and_leaves_nothing(engine, monkeypatch):
    with pytest.raises(InfraError, match="could not run localhost/absent:1") as raised:
        with ContainerService("a.test", "localhost/absent:1", 80, "/", container_runtime()):
            pass
    assert "docker load" in raised.value.fix
    (engine / "images" / "localhost_stuck_1").mkdir()
    (engine / "images" / "localhost_stuck_1" / "never-ready").write_text("")
    monkeypatch.setattr(services, "READY_TIMEOUT", 2.0)
    stuck = ContainerService("b.test", "localhost/stuck:1", 80, "/health", container_runtime())
    with pytest.raises(InfraError, match=r"did not answer GET /health .*fake logs of cu-run-b-test"):
        stuck.__enter__()
    assert f"rm -f {stuck.container}" in (engine / "state" / "commands").read_text()
    assert not list((engine / "state").glob("*.pid")), "the container that never got ready is removed"


def test_without_an_engine_an_image_service_is_refused_before_any_vm(monkeypatch):
    monkeypatch.setenv(services.RUNTIME_ENV, "no-such-engine")
    with pytest.raises(UsageError, match="has no no-such-engine"):
        container_runtime()
    monkeypatch.delenv(services.RUNTIME_ENV)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match="no docker or podman"):
        container_runtime()


def test_a_folder_service_is_still_the_tasks_folder(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("a folder")
    service = service_for(ServiceSpec(name="site.test", serve="site"), tmp_path)
    assert isinstance(service, FolderService)
    with service:
        assert get(service.address) == b"a folder" and service.source == "site"


@pytest.mark.parametrize("fields, message", [
    ({"serve": "site", "image": "localhost/x:1"}, "one of them"),
    ({}, "one of them"),
    ({"image": "localhost/x:1", "ready": "health"}, "a path"),
    ({"image": "localhost/x:1", "port": 0}, "greater than 0"),
    ({"image": "--privileged"}, "not an image reference"),
    ({"image": "localhost/x:1 -v /:/host"}, "not an image reference"),
])
def test_a_service_gives_one_kind_of_server(fields, message):
    with pytest.raises(ValueError, match=message):
        ServiceSpec(name="x.test", **fields)

