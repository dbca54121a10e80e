"""What a guest's collector gathered is unpacked on the host whatever the agent made of it: only
plain files and folders come out, never outside the target, within bounds (runner.benchmarks.pull)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from runner.benchmarks.pull import CollectedRejected, safe_name, unpack


def tar_of(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, **extra) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in extra.items():
        setattr(info, key, value)
    return info


def everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_plain_files_and_folders_come_out(tmp_path):
    archive = tar_of(tmp_path / "a.tar", [(member("./result-0", tarfile.DIRTYPE), None),
                                         (member("./result-0/0"), b"cells"), (member("result-1/stdout"), b"out\n")])
    found = unpack(archive, tmp_path / "out")
    assert sorted(found.files) == ["result-0/0", "result-1/stdout"]
    assert (tmp_path / "out" / "result-0" / "0").read_bytes() == b"cells"
    assert found.skipped == []


@pytest.mark.parametrize("name", ["/etc/cron.d/x", "../escaped", "result-0/../../escaped", "a\\..\\b"])
def test_a_name_that_climbs_out_is_skipped_and_nothing_lands_outside(tmp_path, name):
    archive = tar_of(tmp_path / "a.tar", [(member(name), b"payload")])
    found = unpack(archive, tmp_path / "box" / "out")
    assert found.files == [] and len(found.skipped) == 1
    assert everything_under(tmp_path / "box") == {"out"}
    assert not (tmp_path / "escaped").exists()


def test_links_fifos_and_devices_are_skipped_and_named(tmp_path):
    archive = tar_of(tmp_path / "a.tar", [
        (member("result-0/0", tarfile.SYMTYPE, linkname="/etc/shadow"), None),
        (member("result-0/1", tarfile.LNKTYPE, linkname="/etc/passwd"), None),
        (member("result-0/2", tarfile.FIFOTYPE), None),
        (member("result-0/3", tarfile.CHRTYPE, devmajor=1, devminor=3), None)])
    found = unpack(archive, tmp_path / "out")
    assert found.files == []
    assert [s.split(":")[0] for s in found.skipped] == ["result-0/0", "result-0/1", "result-0/2", "result-0/3"]
    assert not any(p.is_symlink() or not (p.is_dir() or p.is_file()) for p in (tmp_path / "out").rglob("*"))


def test_a_link_then_a_file_through_it_cannot_write_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = tar_of(tmp_path / "a.tar", [(member("slot", tarfile.SYMTYPE, linkname=str(outside)), None),
                                         (member("slot/planted"), b"x")])
    found = unpack(archive, tmp_path / "out")
    assert list(outside.iterdir()) == []
    assert found.files == ["slot/planted"]  # a real folder named slot, made by the unpacking
    assert (tmp_path / "out" / "slot").is_dir() and not (tmp_path / "out" / "slot").is_symlink()


def test_too_much_is_refused(tmp_path):
    big = tar_of(tmp_path / "big.tar", [(member("a"), b"x" * 600), (member("b"), b"y" * 600)])
    with pytest.raises(CollectedRejected, match="over"):
        unpack(big, tmp_path / "out1", max_total=1000)
    many = tar_of(tmp_path / "many.tar", [(member(f"f{i}"), b"") for i in range(12)])
    with pytest.raises(CollectedRejected, match="over 10 entries"):
        unpack(many, tmp_path / "out2", max_members=10)


def test_a_name_twice_and_a_broken_archive_are_refused(tmp_path):
    twice = tar_of(tmp_path / "twice.tar", [(member("a"), b"1"), (member("a"), b"2")])
    with pytest.raises(CollectedRejected, match="twice"):
        unpack(twice, tmp_path / "out1")
    broken = tmp_path / "broken.tar"
    broken.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(CollectedRejected, match="cannot be read"):
        unpack(broken, tmp_path / "out2")


def test_safe_names():
    assert safe_name("./a/b") == ("a", "b")
    assert safe_name("a/../b") is None
    assert safe_name("/abs") is None
    assert safe_name("a\0b") is None
    assert safe_name("/".join(["d"] * 9)) is None
    assert safe_name("x" * 256) is None
