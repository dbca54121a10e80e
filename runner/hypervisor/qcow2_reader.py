"""Reading a disk image's bytes on the host, without QEMU and without the host kernel: a qcow2
file (its backing chain followed) or a raw one, read-only.

The write set reads an episode's disk where the agent cannot reach it (runner/scoring/disk_listing.py).
An episode's image is an overlay of the runner's own making over the image the project built,
so the format's fields are the runner's, but every offset is checked against the file all the
same: a read past a file's end, a table outside it, or a feature this reader does not know
(an external data file, extended L2 entries, encryption, zstd) is an ImageReadError, never a
guess.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

QCOW2_MAGIC = b"QFI\xfb"
_OFFSET_MASK = 0x00FF_FFFF_FFFF_FE00  # bits 9-55: a table's or a cluster's host offset
_COMPRESSED = 1 << 62
_ZERO = 1
_KNOWN_INCOMPATIBLE = 0b01011  # dirty, corrupt, compression type (zlib only, checked below)
MAX_CHAIN = 16


class ImageReadError(Exception):
    """The image cannot be read as its format says."""


class DiskImage:
    """PATH's guest-visible bytes: read(offset, length). A context manager; close() the files."""

    def __init__(self, path: Path, depth: int = 0) -> None:
        if depth > MAX_CHAIN:
            raise ImageReadError(f"{path}: a backing chain longer than {MAX_CHAIN}")
        self.path = path
        self._file = open(path, "rb")  # closed by close()
        self._file_size = path.stat().st_size
        self._l2_cache: dict[int, bytes] = {}
        self.backing: DiskImage | None = None
        try:
            head = self._pread(0, 112)
            self.qcow2 = head[:4] == QCOW2_MAGIC
            if self.qcow2:
                self._parse_header(head, depth)
            else:
                self.size = self._file_size
        except BaseException:
            self.close()
            raise

    def _parse_header(self, head: bytes, depth: int) -> None:
        version, backing_offset, backing_size, cluster_bits, size, crypt, l1_size, l1_offset = \
            struct.unpack(">IQIIQIIQ", head[4:48])
        if version not in (2, 3) or not 9 <= cluster_bits <= 21 or crypt:
            raise ImageReadError(f"{self.path}: qcow2 version {version}, cluster bits {cluster_bits}, "
                                 f"encryption {crypt}: not what this reader reads")
        if version == 3:
            incompatible, = struct.unpack(">Q", head[72:80])
            header_length, = struct.unpack(">I", head[100:104])
            if incompatible & ~_KNOWN_INCOMPATIBLE:
                raise ImageReadError(f"{self.path}: qcow2 features {incompatible:#x} (an external data file or "
                                     "extended L2 entries) that this reader does not read")
            if incompatible & 0b01000 and header_length > 104 and head[104] != 0:
                raise ImageReadError(f"{self.path}: compressed with zstd, which this reader does not read")
        self.size = size
        self.cluster_size = 1 << cluster_bits
        self._cluster_bits = cluster_bits
        if l1_size > (size >> cluster_bits) // (self.cluster_size // 8) + 2:
            raise ImageReadError(f"{self.path}: an L1 table of {l1_size} entries for {size} bytes")
        self._l1 = struct.unpack(f">{l1_size}Q", self._pread(l1_offset, 8 * l1_size))
        if backing_offset:
            name = self._pread(backing_offset, backing_size).decode("utf-8", "surrogateescape")
            backing = Path(name) if name.startswith("/") else self.path.parent / name
            self.backing = DiskImage(backing, depth + 1)

    def close(self) -> None:
        if self.backing is not None:
            self.backing.close()
        self._file.close()

    def __enter__(self) -> DiskImage:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _pread(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self._file_size:
            raise ImageReadError(f"{self.path}: a read at {offset} of {length} bytes past the file's end")
        self._file.seek(offset)
        return self._file.read(length)

    def read(self, offset: int, length: int) -> bytes:
        """LENGTH bytes of the guest's disk from OFFSET; zeros past the image's end."""
        if offset < 0 or length < 0:
            raise ImageReadError(f"a read at {offset} of {length} bytes")
        out = []
        end = offset + length
        while offset < end:
            if offset >= self.size:
                out.append(bytes(end - offset))
                break
            if not self.qcow2:
                part = min(end, self.size) - offset
                out.append(self._pread(offset, part))
                offset += part
                continue
            within = offset & (self.cluster_size - 1)
            part = min(end - offset, self.cluster_size - within)
            out.append(self._cluster(offset - within)[within:within + part])
            offset += part
        return b"".join(out)

    def _cluster(self, guest_offset: int) -> bytes:
        entries_per_l2 = self.cluster_size // 8
        cluster = guest_offset >> self._cluster_bits
        l1_index, l2_index = divmod(cluster, entries_per_l2)
        l2_offset = self._l1[l1_index] & _OFFSET_MASK if l1_index < len(self._l1) else 0
        entry = struct.unpack(">Q", self._l2(l2_offset)[8 * l2_index:8 * l2_index + 8])[0] if l2_offset else 0
        if entry & _COMPRESSED:
            return self._compressed(entry)
        host = entry & _OFFSET_MASK
        if entry & _ZERO:
            return bytes(self.cluster_size)
        if host:
            return self._pread(host, self.cluster_size) if host + self.cluster_size <= self._file_size else \
                self._pread(host, self._file_size - host).ljust(self.cluster_size, b"\0")
        if self.backing is not None:
            return self.backing.read(guest_offset, self.cluster_size)
        return bytes(self.cluster_size)

    def _l2(self, offset: int) -> bytes:
        table = self._l2_cache.get(offset)
        if table is None:
            if len(self._l2_cache) > 4096:
                self._l2_cache.clear()
            table = self._l2_cache[offset] = self._pread(offset, self.cluster_size)
        return table

    def _compressed(self, entry: int) -> bytes:
        # The spec: x = 62 - (cluster_bits - 8); the offset is bits 0..x-1, then the number of
        # 512-byte sectors past the first.
        x = 62 - (self._cluster_bits - 8)
        host = entry & ((1 << x) - 1)
        sectors = ((entry >> x) & ((1 << (self._cluster_bits - 8)) - 1)) + 1
        length = min(sectors * 512 - (host & 511), self._file_size - host)
        try:
            data = zlib.decompressobj(-12).decompress(self._pread(host, length), self.cluster_size)
        except zlib.error as exc:
            raise ImageReadError(f"{self.path}: a compressed cluster at {host} does not inflate: {exc}") from None
        return data.ljust(self.cluster_size, b"\0")
