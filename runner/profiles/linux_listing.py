"""The linux guest's write-set lister: guest_agent/linux/lister.py, and what it prints parsed strictly."""

from __future__ import annotations

from runner.errors import InfraError
from runner.guest.programs import python_command
from runner.profiles.listing import (HASH_BUDGET_S, HASH_MAX_BYTES, MAX_ENTRIES, Entry, Listing, Watch,
                                     WriteSetLister)
from typing_extensions import override


class LinuxLister(WriteSetLister):
    disk_filesystem = "ext4"  # the images' one filesystem, mkfs.ext4 on the whole disk
    default_watch = ("~",)
    default_ignore = ("~/.cache/**", "~/.local/**", "~/.config/**", "~/.bash_history", "~/.lesshst",
                      "~/.python_history", "~/.xsession-errors*", "~/.Xauthority", "~/.viminfo", "~/.dbus/**",
                      "~/.ssh/**")

    @override
    def list_script(self, watch: Watch) -> str:
        # site=False: no site module (the lister needs none), half of Python's start under TCG.
        return "exec " + python_command("linux/lister.py", HASH_MAX_BYTES, HASH_BUDGET_S, MAX_ENTRIES, watch.since_ns,
                                        len(watch.ignore), *watch.ignore, *watch.roots, site=False) + "\n"

    @override
    def parse_listing(self, output: str) -> Listing:
        """The lister's lines (guest_agent/linux/lister.py), then "complete" or "truncated" and its start time.
        Strict: the output is the guest's, so anything the lister does not print is refused."""
        lines = output.split("\n")
        last = lines[-2].split(" ") if len(lines) >= 2 else []
        if lines[-1] != "" or len(last) != 2 or last[0] not in ("complete", "truncated") or not last[1].isdigit():
            raise InfraError("the write-set listing from the guest is not what the lister prints "
                             f"(it ends {output[-200:]!r})")
        entries: dict[str, Entry] = {}
        unhashed = []
        try:
            for line in lines[:-2]:
                kind, mode, uid, gid, size, mtime_ns, ctime_ns, inode, sha, hex_path, hex_target, xattrs = \
                    line.split(" ")
                if kind not in "fdlo?" or len(kind) != 1:
                    raise ValueError(f"kind {kind!r}")
                path = _from_hex(hex_path)
                error = sha[1:].replace("_", " ") if sha.startswith("!") else ""
                if kind == "?":
                    entries[path] = Entry("?", 0, "", error=error or "could not be listed")
                    continue
                entries[path] = Entry(
                    kind, int(size), sha if len(sha) == 64 else "", int(mtime_ns) / 1e9, mode=int(mode),
                    owner=(int(uid), int(gid)), ctime_ns=int(ctime_ns), inode=int(inode),
                    target=None if hex_target == "-" else _from_hex(hex_target), error=error,
                    xattrs=_attributes(xattrs))
                if kind == "f" and sha == "-":
                    unhashed.append(path)
        except ValueError as exc:
            raise InfraError(f"the write-set listing from the guest has a line the lister does not print: {exc}; "
                             f"it begins {output[:200]!r}") from None
        return Listing(entries, tuple(unhashed), last[0] == "truncated", int(last[1]))


def _from_hex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8", "surrogateescape")


def _attributes(field: str) -> tuple[tuple[str, str], ...]:
    """The lister's XATTRS field: (name, digest of the value) pairs; one ("", "!why") pair when
    they could not be read, so that this too differs from what was read before."""
    if field == "-":
        return ()
    if field.startswith("!"):
        return (("", field),)
    pairs = []
    for item in field.split(","):
        name, colon, digest = item.partition(":")
        if not colon or len(digest) != 64:
            raise ValueError(f"extended attribute {item[:80]!r}")
        pairs.append((_from_hex(name), digest))
    return tuple(pairs)
