"""An ext4 filesystem read from its bytes on the host, never mounted: what the write set needs
of each path (kind, mode, owner, size, times, inode, a link's target, content, extended
attributes), as the guest's kernel would report it through lstat, readlink and getxattr.

The guest's disk is the agent's work, so everything is read as hostile: every block number is
checked against the filesystem's size, extent trees against their depth, directory entries
against their block, and a structure that does not hold is a DiskFormatError for that path.
Only what the images' mkfs.ext4 makes is read (extents; no inline data, no encryption); a
filesystem whose journal still holds changes is refused, since its blocks are not yet where
the inodes say: the caller freezes the guest's filesystem first, which empties the journal.
"""

from __future__ import annotations

import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

Read = Callable[[int, int], bytes]  # (offset, length) -> bytes of the disk

_MAGIC = 0xEF53
_INCOMPAT_RECOVER = 0x4
_INCOMPAT_64BIT = 0x80
_INCOMPAT_REFUSED = {0x8000: "inline data", 0x10000: "encryption", 0x400: "extended attributes in inodes (ea_inode)"}
_EXTENTS_FL = 0x80000
_INLINE_DATA_FL = 0x10000000
_EXTENT_MAGIC = 0xF30A
_XATTR_MAGIC = 0xEA020000
MAX_EXTENT_DEPTH = 5
MAX_EXTENTS = 1_000_000  # a file's extents; a tree of index nodes that fans out past it is refused
MAX_LINKS = 40  # links followed resolving a path, as the kernel's ELOOP limit
# The attribute namespaces the kernel lists for ext4, by the index ext4 stores; the others
# (system.data of inline data, richacl, encryption's) are not listed by listxattr.
_PREFIXES = {1: "user.", 2: "system.posix_acl_access", 3: "system.posix_acl_default", 4: "trusted.", 6: "security."}
_ACL_SHORT_TAGS = {0x01, 0x04, 0x10, 0x20}  # USER_OBJ, GROUP_OBJ, MASK, OTHER: no id on disk
_ACL_UNDEFINED_ID = 0xFFFFFFFF


class DiskFormatError(Exception):
    """The filesystem (or one of its paths) does not hold together."""


@dataclass(frozen=True)
class Inode:
    number: int
    mode: int  # type and permission bits, as st_mode
    uid: int
    gid: int
    size: int
    mtime_ns: int
    ctime_ns: int
    flags: int
    block: bytes  # i_block: the extent tree's root, or a short link's target
    file_acl: int  # the block of its extended attributes, 0 for none
    inline_xattrs: bytes  # the inode's room after its extra fields, where attributes may start

    @property
    def kind(self) -> str:
        return "f" if stat.S_ISREG(self.mode) else "d" if stat.S_ISDIR(self.mode) else \
            "l" if stat.S_ISLNK(self.mode) else "o"


class Ext4:
    """The filesystem on READ (a disk's bytes from offset 0)."""

    ROOT = 2

    def __init__(self, read: Read) -> None:
        self._read = read
        sb = read(1024, 1024)
        magic, = struct.unpack_from("<H", sb, 56)
        if magic != _MAGIC:
            raise DiskFormatError("no ext4 superblock at 1024")
        (self.inodes_count, blocks_lo, _, _, _, self.first_data_block, log_block) = struct.unpack_from("<7I", sb, 0)
        self.blocks_per_group, = struct.unpack_from("<I", sb, 32)
        self.inodes_per_group, = struct.unpack_from("<I", sb, 40)
        self.inode_size, = struct.unpack_from("<H", sb, 88)
        incompat, = struct.unpack_from("<I", sb, 96)
        for bit, what in _INCOMPAT_REFUSED.items():
            if incompat & bit:
                raise DiskFormatError(f"the filesystem uses {what}, which this reader does not read")
        if incompat & _INCOMPAT_RECOVER:
            raise DiskFormatError("the filesystem's journal holds changes not yet written in place "
                                  "(the guest's filesystem was not frozen before the read)")
        if log_block > 6 or not 128 <= self.inode_size <= 4096 or self.inodes_per_group == 0:
            raise DiskFormatError("the superblock's sizes are not an ext4 filesystem's")
        self.block_size = 1024 << log_block
        blocks_hi = struct.unpack_from("<I", sb, 0x150)[0] if incompat & _INCOMPAT_64BIT else 0
        self.blocks_count = blocks_lo | blocks_hi << 32
        desc_size = struct.unpack_from("<H", sb, 254)[0] if incompat & _INCOMPAT_64BIT else 32
        self._desc_size = max(32, desc_size)
        groups = -(-self.inodes_count // self.inodes_per_group)
        table = self.block(self.first_data_block + 1, -(-groups * self._desc_size // self.block_size))
        self._inode_tables = []
        for g in range(groups):
            d = table[g * self._desc_size:(g + 1) * self._desc_size]
            lo, = struct.unpack_from("<I", d, 8)
            hi = struct.unpack_from("<I", d, 0x28)[0] if self._desc_size >= 64 else 0
            self._inode_tables.append(lo | hi << 32)

    # -- blocks and inodes

    def block(self, number: int, count: int = 1) -> bytes:
        if number < 0 or count < 0 or number + count > self.blocks_count:
            raise DiskFormatError(f"block {number} (+{count}) lies outside the filesystem")
        return self._read(number * self.block_size, count * self.block_size)

    def inode(self, number: int) -> Inode:
        if not 1 <= number <= self.inodes_count:
            raise DiskFormatError(f"inode {number} does not exist")
        group, index = divmod(number - 1, self.inodes_per_group)
        offset = self._inode_tables[group] * self.block_size + index * self.inode_size
        if self._inode_tables[group] >= self.blocks_count:
            raise DiskFormatError(f"inode {number}'s table lies outside the filesystem")
        raw = self._read(offset, self.inode_size)
        mode, uid_lo, size_lo, _atime, ctime, mtime, _dtime, gid_lo = struct.unpack_from("<HHIIIIIH", raw, 0)
        flags, = struct.unpack_from("<I", raw, 32)
        acl_lo, size_hi = struct.unpack_from("<II", raw, 104)
        acl_hi, uid_hi, gid_hi = struct.unpack_from("<HHH", raw, 118)
        extra = raw[128:]
        extra_isize = struct.unpack_from("<H", extra, 0)[0] if len(extra) >= 2 else 0
        if extra_isize > len(extra) or extra_isize % 4:
            raise DiskFormatError(f"inode {number}'s extra size {extra_isize} does not fit")
        return Inode(number, mode, uid_lo | uid_hi << 16, gid_lo | gid_hi << 16, size_lo | size_hi << 32,
                     _time_ns(mtime, extra, 8, extra_isize), _time_ns(ctime, extra, 4, extra_isize), flags,
                     raw[40:100], acl_lo | acl_hi << 32, extra[extra_isize:])

    # -- contents

    def extents(self, inode: Inode) -> Iterator[tuple[int, int, int, bool]]:
        """(first logical block, count, first physical block, initialized) of a file's data."""
        if inode.flags & _INLINE_DATA_FL:
            raise DiskFormatError(f"inode {inode.number} holds its data inline, which this reader does not read")
        if not inode.flags & _EXTENTS_FL:
            if stat.S_ISLNK(inode.mode) and inode.size < 60:
                return  # a short link: its target is in i_block
            raise DiskFormatError(f"inode {inode.number} maps its blocks without extents")
        for n, extent in enumerate(self._extent_node(inode.block, MAX_EXTENT_DEPTH, inode.number)):
            if n >= MAX_EXTENTS:
                raise DiskFormatError(f"inode {inode.number} has more than {MAX_EXTENTS} extents")
            yield extent

    def _extent_node(self, node: bytes, depth_left: int, number: int) -> Iterator[tuple[int, int, int, bool]]:
        magic, entries, _max, depth = struct.unpack_from("<HHHH", node, 0)
        if magic != _EXTENT_MAGIC or depth > depth_left or 12 + 12 * entries > len(node):
            raise DiskFormatError(f"inode {number}'s extent tree does not hold together")
        for i in range(entries):
            at = 12 + 12 * i
            if depth == 0:
                first, length, start_hi, start_lo = struct.unpack_from("<IHHI", node, at)
                initialized = length <= 32768
                yield first, length if initialized else length - 32768, start_lo | start_hi << 32, initialized
            else:
                _first, leaf_lo, leaf_hi = struct.unpack_from("<IIH", node, at)
                yield from self._extent_node(self.block(leaf_lo | leaf_hi << 32), depth - 1, number)

    def chunks(self, inode: Inode, limit: int | None = None) -> Iterator[bytes]:
        """A file's bytes in order (holes and unwritten extents as zeros), at most LIMIT of them."""
        size = inode.size if limit is None else min(inode.size, limit)
        done = 0
        for first, count, start, initialized in sorted(self.extents(inode)):
            offset = first * self.block_size
            if offset >= size:
                break
            if offset > done:  # a hole
                yield bytes(offset - done)
                done = offset
            for n in range(0, count, 256):  # 1 MiB at a time with 4 KiB blocks
                if done >= size:
                    break
                run = min(256, count - n)
                data = self.block(start + n, run) if initialized else bytes(run * self.block_size)
                data = data[:size - done]
                yield data
                done += len(data)
        if done < size:
            yield bytes(size - done)

    def read_all(self, inode: Inode, limit: int) -> bytes:
        return b"".join(self.chunks(inode, limit))

    def link_target(self, inode: Inode) -> bytes:
        if inode.size < 60 and not inode.flags & _EXTENTS_FL:
            return inode.block[:inode.size]
        if inode.size > 4096:
            raise DiskFormatError(f"inode {inode.number}: a link target of {inode.size} bytes")
        return self.read_all(inode, inode.size)

    def lookup(self, path: str, *, follow_last: bool = False) -> int | None:
        """The inode PATH names, links on the way followed as the kernel does (at most MAX_LINKS),
        the last one too when FOLLOW_LAST (stat), else not (lstat); None where it is not there.
        Each folder is read once a lookup, and ".." goes back up the folders walked: a link whose
        target is "x/.." many times over costs its length, not a walk from the root each time."""
        parts = [p for p in path.split("/") if p]
        number, followed = Ext4.ROOT, 0
        walked: list[int] = []  # the folders above NUMBER, the root first
        folders: dict[int, dict[bytes, int]] = {}
        while parts:
            name = parts.pop(0)
            if name == ".":
                continue
            if name == "..":
                number = walked.pop() if walked else Ext4.ROOT
                continue
            if number not in folders:
                folder = self.inode(number)
                if folder.kind != "d":
                    return None  # a name under a file: not there
                folders[number] = dict(self.entries(folder))
            found = folders[number].get(name.encode("utf-8", "surrogateescape"))
            if found is None:
                return None
            child = self.inode(found)
            if child.kind == "l" and (parts or follow_last):
                followed += 1
                if followed > MAX_LINKS:
                    raise DiskFormatError(f"{path}: too many levels of links")
                target = self.link_target(child).decode("utf-8", "surrogateescape")
                parts = [p for p in target.split("/") if p] + parts
                if target.startswith("/"):
                    number, walked = Ext4.ROOT, []
                continue
            walked.append(number)
            number = found
        return number

    def entries(self, inode: Inode) -> Iterator[tuple[bytes, int]]:
        """A folder's (name, inode) pairs, "." and ".." left out. The blocks are read in order,
        so a hashed folder's index blocks are skipped as the empty entries they look like."""
        if inode.size > 1 << 30:
            raise DiskFormatError(f"inode {inode.number}: a folder of {inode.size} bytes")
        for data in self.chunks(inode):
            for start in range(0, len(data), self.block_size):
                yield from self._block_entries(data[start:start + self.block_size], inode.number)

    @staticmethod
    def _block_entries(block: bytes, number: int) -> Iterator[tuple[bytes, int]]:
        at = 0
        while at + 8 <= len(block):
            child, rec_len, name_len = struct.unpack_from("<IHB", block, at)
            if rec_len < 8 or rec_len % 4 or at + rec_len > len(block) or 8 + name_len > rec_len:
                raise DiskFormatError(f"folder inode {number} has an entry that does not fit its block")
            name = block[at + 8:at + 8 + name_len]
            if child and name not in (b".", b".."):
                if b"/" in name or b"\0" in name or not name:
                    raise DiskFormatError(f"folder inode {number} has an entry named {name!r}")
                yield name, child
            at += rec_len

    # -- extended attributes

    def xattrs(self, inode: Inode) -> dict[str, bytes]:
        """NAME -> VALUE as getxattr returns them (ACLs in the kernel's xattr format)."""
        found: dict[str, bytes] = {}
        room = inode.inline_xattrs
        if len(room) >= 4 and struct.unpack_from("<I", room, 0)[0] == _XATTR_MAGIC:
            self._xattr_entries(room[4:], room[4:], found, inode.number)
        if inode.file_acl:
            block = self.block(inode.file_acl)
            if struct.unpack_from("<I", block, 0)[0] != _XATTR_MAGIC:
                raise DiskFormatError(f"inode {inode.number}'s attribute block has no attribute header")
            self._xattr_entries(block[32:], block, found, inode.number)
        return found

    @staticmethod
    def _xattr_entries(entries: bytes, values: bytes, found: dict[str, bytes], number: int) -> None:
        at = 0
        while at + 16 <= len(entries) and struct.unpack_from("<I", entries, at)[0] != 0:
            name_len, index, value_offs, value_inum, value_size = struct.unpack_from("<BBHII", entries, at)
            name = entries[at + 16:at + 16 + name_len]
            if value_inum or value_offs + value_size > len(values) or at + 16 + name_len > len(entries):
                raise DiskFormatError(f"inode {number} has an extended attribute that does not fit")
            value = values[value_offs:value_offs + value_size]
            prefix = _PREFIXES.get(index)
            if prefix is not None:
                full = prefix + name.decode("utf-8", "surrogateescape")
                found[full] = _acl_as_xattr(value, number) if index in (2, 3) else value
            at += (16 + name_len + 3) & ~3


def _time_ns(seconds: int, extra: bytes, at: int, extra_isize: int) -> int:
    """A time as the kernel gives it: signed 32-bit seconds, widened by the extra field's
    epoch bits, plus its nanoseconds, where the inode is large enough to hold them."""
    value = seconds - (1 << 32) if seconds >= 1 << 31 else seconds
    if extra_isize >= at + 4:
        more, = struct.unpack_from("<I", extra, at)
        return (value + ((more & 3) << 32)) * 1_000_000_000 + (more >> 2)
    return value * 1_000_000_000


def _acl_as_xattr(value: bytes, number: int) -> bytes:
    """ext4 keeps an ACL short (no id for the owner, group, mask and other entries); getxattr
    gives the kernel's format: version 2, then every entry with its id."""
    if len(value) < 4 or struct.unpack_from("<I", value, 0)[0] != 1:
        raise DiskFormatError(f"inode {number} has an ACL that is not ext4's")
    out = [struct.pack("<I", 2)]
    at = 4
    while at < len(value):
        if at + 4 > len(value):
            raise DiskFormatError(f"inode {number} has an ACL cut short")
        tag, perm = struct.unpack_from("<HH", value, at)
        if tag in _ACL_SHORT_TAGS:
            ident, at = _ACL_UNDEFINED_ID, at + 4
        else:
            if at + 8 > len(value):
                raise DiskFormatError(f"inode {number} has an ACL cut short")
            ident, = struct.unpack_from("<I", value, at + 4)
            at += 8
        out.append(struct.pack("<HHI", tag, perm, ident))
    return b"".join(out)
