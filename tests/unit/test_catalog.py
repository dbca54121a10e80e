import json
from datetime import UTC, datetime

import pytest

from runner.images.catalog import Catalog, ImageManifest, sha256_file
from runner.profiles.manifest import Credentials, ScreenSize, SshAccess
from runner.errors import UsageError


def make_image(root, name="linux-test", disk_bytes=b"golden"):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "disk.qcow2").write_bytes(disk_bytes)
    manifest = ImageManifest(
        name=name, profile="linux", disk="disk.qcow2", disk_sha256=sha256_file(folder / "disk.qcow2"),
        disk_bytes=len(disk_bytes), screen=ScreenSize(width=1280, height=800),
        credentials=Credentials(user="cu", password="cu"), built_at=datetime.now(UTC), build_seconds=1.0,
        builder="test", ssh=SshAccess(user="cu", private_key="keys/client_key", host_key="ssh-ed25519 AAAA"),
    )
    (folder / "manifest.json").write_text(json.dumps(manifest.model_dump(mode="json")))
    return folder


def test_lists_and_gets_images(tmp_path):
    make_image(tmp_path, "linux-test")
    make_image(tmp_path, "other")
    catalog = Catalog(tmp_path)
    assert [i.name for i in catalog.images()] == ["linux-test", "other"]
    assert catalog.get("other").disk == tmp_path / "other" / "disk.qcow2"


def test_missing_image_names_what_is_built_and_how_to_build(tmp_path):
    make_image(tmp_path, "linux-test")
    from runner.images.builders import image_named

    with pytest.raises(UsageError) as info:
        image_named(Catalog(tmp_path), "windows-11")
    assert "windows-11" in info.value.message and "linux-test" in info.value.message
    assert "cu-run image build windows-11" in info.value.fix


def test_changed_golden_disk_is_refused(tmp_path):
    folder = make_image(tmp_path)
    image = Catalog(tmp_path).get("linux-test")
    image.verify_disk()
    (folder / "disk.qcow2").write_bytes(b"tampered")
    with pytest.raises(UsageError, match="changed after the build"):
        image.verify_disk()


def test_missing_golden_disk_is_refused(tmp_path):
    folder = make_image(tmp_path)
    (folder / "disk.qcow2").unlink()
    with pytest.raises(UsageError, match="missing"):
        Catalog(tmp_path).get("linux-test").verify_disk()


def test_malformed_manifest_names_the_file(tmp_path):
    folder = make_image(tmp_path)
    data = json.loads((folder / "manifest.json").read_text())
    data["screen"] = {"width": "wide"}
    (folder / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(UsageError) as info:
        Catalog(tmp_path).get("linux-test")
    assert str(folder / "manifest.json") in info.value.message
    assert "screen" in info.value.message


def test_a_manifest_another_version_wrote_is_named_and_does_not_hide_the_others(tmp_path):
    """A cache shared by two cu-run versions (a developer's tree and CI's clone) holds a manifest
    with a field this one does not know: the listing still lists the rest and names it."""
    make_image(tmp_path, "linux-test")
    newer = make_image(tmp_path, "linux-desktop")
    data = json.loads((newer / "manifest.json").read_text())
    (newer / "manifest.json").write_text(json.dumps({**data, "a_field_from_the_future": None}))
    catalog = Catalog(tmp_path)
    assert [i.name for i in catalog.images()] == ["linux-test"]
    [problem] = catalog.unreadable()
    assert "linux-desktop" in problem.message and "cu-run image build linux-desktop --force" in problem.fix
    with pytest.raises(UsageError) as info:
        catalog.get("no-such-image")
    assert "no image named 'no-such-image'" in info.value.message and "linux-test" in info.value.message


def test_a_build_replaces_a_manifest_it_cannot_read(tmp_path, monkeypatch):
    from runner.images import linux_images

    folder = make_image(tmp_path, "linux-test")
    data = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**data, "a_field_from_the_future": None}))
    built = []
    monkeypatch.setattr(linux_images, "check_build_host", lambda: None)
    # The recipe itself is the one seam faked here: a real build is the e2e tests' image fixture.
    monkeypatch.setattr(linux_images, "_build_linux", lambda catalog, spec, progress: built.append(spec.name) or "new")
    said = []
    assert linux_images.build_image(Catalog(tmp_path), "linux-test", progress=said.append) == ("new", True)
    assert built == ["linux-test"] and "cannot read" in said[0]
