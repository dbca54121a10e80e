"""Build in scratch, then rename: a failed or interrupted build never leaves a part in place."""

import os
import subprocess

import pytest

from runner.images.scratch import mounts_under, remove_tree, scratch_then_rename


def test_a_finished_build_replaces_the_old_one(tmp_path):
    final = tmp_path / "image"
    final.mkdir()
    (final / "old.txt").write_text("old")
    (final / "disk.qcow2").write_text("golden")
    (final / "disk.qcow2").chmod(0o444)
    with scratch_then_rename(final, tmp_path / ".build-1") as work:
        (work / "new.txt").write_text("new")
    assert sorted(p.name for p in final.iterdir()) == ["new.txt"] and not (tmp_path / ".build-1").exists()


@pytest.mark.parametrize("error", [RuntimeError("recipe failed"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_build_leaves_the_old_one_and_no_scratch(tmp_path, error):
    final = tmp_path / "image"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with pytest.raises(type(error)):
        with scratch_then_rename(final, tmp_path / ".build-1") as work:
            (work / "disk.qcow2").write_text("half")
            (work / "disk.qcow2").chmod(0o444)
            raise error
    assert [p.name for p in final.iterdir()] == ["old.txt"] and not (tmp_path / ".build-1").exists()


def test_a_stale_scratch_folder_is_cleared_first(tmp_path):
    stale = tmp_path / ".build-1"
    stale.mkdir()
    (stale / "leftover").write_text("x")
    with scratch_then_rename(tmp_path / "image", stale) as work:
        assert not (work / "leftover").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="bind-mounts a folder")
def test_a_folder_mounted_inside_is_unmounted_not_emptied(tmp_path):
    """An interrupted build leaves the host's /dev/shm bind-mounted in its chroot: removing the
    build folder must not delete the host's files through it."""
    host_folder = tmp_path / "host shm"  # a space: /proc/self/mounts escapes it as \\040
    host_folder.mkdir()
    (host_folder / "kept").write_text("the host's")
    scratch = tmp_path / ".build-x-1"
    inside = scratch / "rootfs" / "dev" / "shm"
    inside.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(host_folder), str(inside)], check=True)
    try:
        assert mounts_under(scratch) == [str(inside)]
        remove_tree(scratch)
    finally:
        subprocess.run(["umount", str(inside)], capture_output=True)
    assert not scratch.exists()
    assert (host_folder / "kept").read_text() == "the host's"
