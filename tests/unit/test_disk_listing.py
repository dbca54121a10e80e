"""The write-set listing read from a disk image on the host (runner/scoring/disk_listing.py over
ext4_reader and qcow2_reader) against the guest's own lister run over the same filesystem
mounted: every entry must be the same, field for field (kind, mode, owner, size, times, inode,
link target, content digest, extended attributes and ACLs), or a listing taken in the guest
before the agent could not be compared with one read from the disk after it.

The tree is made through this host's kernel on a fresh ext4, as the guest's kernel makes what
the agent does, and the image put under a qcow2 overlay; the mount is the test's way to make
the tree and to run the real lister over it (on this host's loop device), never the reader's."""

import os
import subprocess
from pathlib import Path

import pytest

from fakes.display import LocalShell
from runner.hypervisor.qcow2_reader import DiskImage
from runner.profiles import get_profile
from runner.scoring.disk_listing import list_disk
from runner.scoring.ext4_reader import DiskFormatError, Ext4
from runner.profiles.listing import WriteSetLister, Watch, take_listing
from runner.scoring.writeset import diff

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loop-mounts the image to run the guest's lister over it")


def make_tree(root: Path) -> None:
    home = root / "home" / "cu"
    (home / "docs" / "deep").mkdir(parents=True)
    (home / "docs" / "a.txt").write_text("hello\n")
    (home / "docs" / "deep" / "b.bin").write_bytes(os.urandom(300_000))  # extents over many blocks
    with open(home / "sparse.img", "wb") as f:
        f.truncate(40 * 2**20)  # a hole, no blocks
        f.seek(20 * 2**20)
        f.write(b"middle")
    (home / "odd\nname\u2028x").write_text("n")
    (home / "short-link").symlink_to("docs/a.txt")
    (home / "long-link").symlink_to("x" * 200)  # a target too long for the inode: in a block
    os.mkfifo(home / "pipe")
    secret = home / "secret.txt"
    secret.write_text("s3cret")
    secret.chmod(0o640)
    subprocess.run(["setfacl", "-m", "u:nobody:r", str(secret)], check=True)
    subprocess.run(["setfacl", "-d", "-m", "u:nobody:rx", str(home / "docs")], check=True)
    os.setxattr(home / "docs" / "a.txt", "user.origin", b"setup")
    os.setxattr(home / "docs" / "a.txt", "user.big", os.urandom(1500))  # past the inode's room: in a block
    many = home / "many"  # a folder hashed into an index (dir_index) by its size
    many.mkdir()
    for i in range(400):
        (many / f"file-{i:04d}-{'x' * 40}").write_text(str(i))
    os.chown(home, 1000, 1000)
    os.chown(home / "docs" / "a.txt", 1000, 1000)
    os.utime(home / "docs" / "a.txt", ns=(1_600_000_000_123_456_789, 1_600_000_000_987_654_321))


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The tree made by this host's kernel on a fresh ext4 (as the guest's kernel makes what the
    agent does: nanosecond times, hashed folders, attributes in the inode and in a block), then
    the image under a compressed base and an overlay, and mounted read-only for the lister."""
    work = tmp_path_factory.mktemp("disk")
    raw = work / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-b", "4096", "-L", "cu-root", str(raw), "128M"], check=True)
    mount = work / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(raw), str(mount)], check=True)
    try:
        make_tree(mount)
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    base = work / "base.qcow2"
    subprocess.run(["qemu-img", "convert", "-c", "-f", "raw", "-O", "qcow2", str(raw), str(base)], check=True)
    overlay = work / "overlay.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(overlay)],
                   check=True)
    subprocess.run(["mount", "-o", "ro,loop", str(raw), str(mount)], check=True)
    try:
        yield overlay, mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_the_disk_reads_as_the_guests_lister_sees_the_mounted_filesystem(image):
    overlay, mount = image
    ignore = ("/home/cu/many/file-01*",)
    in_guest = take_listing(LocalShell(), get_profile("linux").part(WriteSetLister),
                            Watch((f"{mount}/home/cu",), tuple(f"{mount}{p}" for p in ignore)))
    with DiskImage(overlay) as disk:
        from_disk = list_disk(Ext4(disk.read), Watch(("/home/cu",), ignore))
    guest = {p[len(str(mount)):]: e for p, e in in_guest.entries.items()}
    assert len(from_disk.entries) == len(guest) > 400
    different = {p: (guest.get(p), from_disk.entries.get(p)) for p in guest.keys() | from_disk.entries.keys()
                 if guest.get(p) != from_disk.entries.get(p)}
    assert different == {}
    assert diff(guest, from_disk.entries) == []
    assert sorted(from_disk.unhashed) == sorted(p[len(str(mount)):] for p in in_guest.unhashed)
    secret = from_disk.entries["/home/cu/secret.txt"]
    assert [name for name, _ in secret.xattrs] == ["system.posix_acl_access"]
    assert from_disk.entries["/home/cu/long-link"].target == "x" * 200


def test_a_journal_with_changes_not_yet_in_place_is_refused(tmp_path):
    raw = tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", str(raw), "16M"], check=True)
    data = bytearray(raw.read_bytes())
    data[1024 + 96] |= 0x4  # the superblock's needs_recovery: a filesystem in use, not frozen
    raw.write_bytes(bytes(data))
    with DiskImage(raw) as disk, pytest.raises(DiskFormatError, match="not frozen"):
        Ext4(disk.read)


def image_with_folder_d(tmp_path, child: str):
    """An ext4 image holding /d/CHILD (a folder where CHILD ends in /, else a file), and the
    byte offset of /d's first block, for a test to break."""
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    if child.endswith("/"):
        (tree / "d" / child).mkdir()
    else:
        (tree / "d" / child).write_text("x")
    raw = tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-d", str(tree), str(raw), "16M"], check=True)
    with DiskImage(raw) as disk:
        fs = Ext4(disk.read)
        folder = fs.inode(dict(fs.entries(fs.inode(Ext4.ROOT)))[b"d"])
        return raw, next(fs.extents(folder))[2] * fs.block_size


def test_a_folder_block_that_does_not_hold_together_is_an_unreadable_entry(tmp_path):
    raw, start = image_with_folder_d(tmp_path, "f")
    data = bytearray(raw.read_bytes())
    data[start + 4:start + 6] = (3).to_bytes(2, "little")  # the first entry's length: 3, which no entry has
    raw.write_bytes(bytes(data))
    with DiskImage(raw) as disk:
        listing = list_disk(Ext4(disk.read), Watch(("/d",)))
    assert listing.entries["/d"].kind == "?" and "does not fit its block" in listing.entries["/d"].error


def test_a_folder_that_holds_its_own_parent_is_listed_once_and_named(tmp_path):
    """A directory entry pointed at the root folder (raw bytes: no kernel makes it) would loop
    a walker for ever; it is listed as unreadable, once."""
    raw, block = image_with_folder_d(tmp_path, "sub/")
    data = bytearray(raw.read_bytes())
    at = _entry_offset(data, block, b"sub")
    data[at:at + 4] = (Ext4.ROOT).to_bytes(4, "little")  # d/sub is now the root folder
    raw.write_bytes(bytes(data))
    with DiskImage(raw) as disk:
        listing = list_disk(Ext4(disk.read), Watch(("/",)))
    assert listing.entries["/d/sub"].kind == "?" and "the folders loop" in listing.entries["/d/sub"].error
    assert not listing.truncated and len(listing.entries) < 20


def _entry_offset(data: bytearray, block: int, name: bytes) -> int:
    """Where the folder block at BLOCK holds the entry NAME (its inode field)."""
    at = block
    while True:
        rec_len = int.from_bytes(data[at + 4:at + 6], "little")
        name_len = data[at + 6]
        if bytes(data[at + 8:at + 8 + name_len]) == name:
            return at
        at += rec_len
