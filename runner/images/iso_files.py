"""Files read out of an ISO, from its UDF tree or its ISO 9660 tree, with 7-Zip.

Microsoft masters its Windows ISOs (retail, Media Creation Tool, the Evaluation Center's
Enterprise) with `oscdimg -u2`: the ISO 9660 tree holds a lone README.TXT ("This disc contains a
UDF file system..."), and every real file is in the UDF tree only. ISO 9660 readers (xorriso,
bsdtar) see nothing else. A hand-made ISO (mkisofs, xorriso) is the other way round: ISO 9660 with
Joliet and Rock Ridge, and often no UDF at all. So both trees are read, UDF first.

7-Zip reads both, and reads odd and damaged media without tripping over strict checks (the pure
Python readers refuse many real UDF images on a descriptor they do not expect); dockur/windows
reads Windows ISOs with it too. It gives no file offsets, so a file is read as a stream: the
caller reads forward and stops, and the 7-Zip process is killed then, so a 5 GiB install.wim is
never written anywhere.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from runner.errors import UsageError

Tree = Literal["udf", "iso"]
TREES: tuple[Tree, ...] = ("udf", "iso")  # UDF first: on Microsoft's media the ISO 9660 tree is a decoy
TREE_NAMES = {"udf": "UDF", "iso": "ISO 9660"}
SEVEN_ZIPS = ("7z", "7zz")  # p7zip-full's and 7zip's; 7za (p7zip's standalone) reads neither UDF nor ISO
LIST_TIMEOUT_S = 120
STREAM_TIMEOUT_S = 900  # a 6 GiB install.wim read to its end from a slow disk (~100 MB/s: a minute)
MAX_LISTING_CHARS = 64 * 2**20  # a Windows ISO lists ~1,000 files in ~300 KB
SKIP_CHUNK = 2**20
INSTALL_HINT = "apt install p7zip-full (Debian and Ubuntu; or 7zip)"


def find_seven_zip() -> str | None:
    return next((found for name in SEVEN_ZIPS if (found := shutil.which(name))), None)


@dataclass(frozen=True)
class TreeListing:
    """The regular files of one tree of an ISO: path (as stored, '/'-separated, no leading '/') to
    size. PROBLEM is 7-Zip's own word when it could not open the tree at all."""
    tree: Tree
    files: dict[str, int]
    problem: str | None = None

    def find(self, path: str) -> str | None:
        """PATH as stored in this tree, matched without regard to case (Windows media is read by
        Windows, which ignores case; a hand-made ISO may store SOURCES/INSTALL.WIM)."""
        wanted = path.strip("/").lower()
        return next((stored for stored in self.files if stored.lower() == wanted), None)


def list_tree(seven_zip: str, iso: Path, tree: Tree) -> TreeListing:
    """The files of ISO's TREE. A tree 7-Zip cannot open is an empty listing with its reason."""
    try:
        done = subprocess.run([seven_zip, "l", "-slt", "-ba", f"-t{tree}", "--", str(iso)],
                              capture_output=True, timeout=LIST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return TreeListing(tree, {}, f"7-Zip did not list its {TREE_NAMES[tree]} tree in {LIST_TIMEOUT_S} s")
    if done.returncode != 0:
        said = _last_words(done.stdout + done.stderr)
        return TreeListing(tree, {}, f"7-Zip cannot open it as {TREE_NAMES[tree]}" + (f" ({said})" if said else ""))
    text = done.stdout[:MAX_LISTING_CHARS].decode("utf-8", errors="replace")
    return TreeListing(tree, parse_listing(text))


def parse_listing(text: str) -> dict[str, int]:
    """7-Zip's `l -slt -ba` output: blocks of `Key = value` lines, one block per entry, split on
    blank lines. Folders, and entries without a size, are left out."""
    files: dict[str, int] = {}
    for block in text.split("\n\n"):
        fields = {}
        for line in block.split("\n"):
            key, sep, value = line.partition(" = ")
            if sep:
                fields[key.strip()] = value.rstrip("\r")
        path, size = fields.get("Path"), fields.get("Size", "")
        if path and fields.get("Folder") != "+" and size.isdigit():
            files[path.replace("\\", "/").lstrip("/")] = int(size)
    return files


class ForwardReader:
    """A file of the ISO as 7-Zip streams it: read(offset, size) for offsets that only go forward."""

    def __init__(self, stream: IO[bytes], where: str, timed_out: threading.Event | None = None) -> None:
        """TIMED_OUT: set when the stream was cut off for taking too long, so a short read says
        that rather than that the file is short."""
        self._stream = stream
        self._where = where
        self._position = 0
        self._timed_out = timed_out or threading.Event()

    def read(self, offset: int, size: int) -> bytes:
        if offset < self._position:
            raise UsageError(f"{self._where}: asked to read back to byte {offset} of a stream at {self._position}")
        while self._position < offset:
            skipped = len(self._stream.read(min(SKIP_CHUNK, offset - self._position)))
            if skipped == 0:
                self._check_time()
                return b""  # the file ends before OFFSET: the caller sees a short read
            self._position += skipped
        out = bytearray()
        while len(out) < size:
            chunk = self._stream.read(min(SKIP_CHUNK, size - len(out)))
            if not chunk:
                self._check_time()
                break
            out += chunk
        self._position += len(out)
        return bytes(out)

    def _check_time(self) -> None:
        if self._timed_out.is_set():
            raise UsageError(f"{self._where}: 7-Zip had not streamed it {self._position} bytes in after "
                             f"{STREAM_TIMEOUT_S} s; is the disk it is on this slow?")


@contextmanager
def open_file(seven_zip: str, iso: Path, tree: Tree, stored_path: str,
              timeout: float = STREAM_TIMEOUT_S) -> Iterator[ForwardReader]:
    """STORED_PATH (as list_tree gave it) of ISO's TREE, streamed; 7-Zip is stopped on leaving.
    -spd: the path is a name, never a wildcard that could match some other file."""
    proc = subprocess.Popen([seven_zip, "x", "-so", "-spd", f"-t{tree}", "--", str(iso), stored_path],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    timed_out = threading.Event()

    def cut_off() -> None:
        timed_out.set()
        proc.kill()

    watchdog = threading.Timer(timeout, cut_off)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield ForwardReader(proc.stdout, f"{iso.name}:{stored_path}", timed_out)
    finally:
        watchdog.cancel()
        proc.kill()
        proc.stdout.close()
        proc.wait()


def _last_words(output: bytes) -> str:
    """7-Zip's reason, from its error lines (it prints the file name and 'Open ERROR: ...')."""
    lines = [line.strip() for line in output.decode("utf-8", errors="replace").split("\n") if line.strip()]
    reasons = [line for line in lines if "ERROR" in line.upper() and ":" in line and not line.startswith("ERROR:")]
    reasons += [line for line in lines if line in ("Is not archive", "Unexpected end of archive")]
    return "; ".join(dict.fromkeys(reasons))[:300]
