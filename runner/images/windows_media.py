"""What a Windows ISO offers, read without copying it: the editions in its install image.

A retail ISO holds several editions (Home, Pro, Education...) in sources/install.wim (or
install.esd). An answer file that names none installs index 1, Home, or stops at the
product-key page. The editions are listed in the WIM's XML resource, whose place the WIM
header gives. The install image is found in the ISO's UDF tree, where Microsoft's media keep
it, or in its ISO 9660 tree, where a hand-made ISO does (runner/images/iso_files.py), and read
as a stream up to the end of its XML, so the 5 GiB file is never extracted. The WIM header
layout is Microsoft's published one (the Windows Imaging File Format): a 208-byte header,
"MSWIM\\0\\0\\0", the XML data's resource header at byte 72 (7 bytes of size, a flags byte, 8 bytes
of offset). The XML is UTF-16LE, uncompressed in .wim and .esd alike.
"""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from runner.errors import UsageError
from runner.images.iso_files import TREE_NAMES, TREES, list_tree, open_file

INSTALL_IMAGES = ("sources/install.wim", "sources/install.esd")
WIM_MAGIC = b"MSWIM\0\0\0"
HEADER_BYTES = 208
XML_RESHDR_AT = 72
MAX_XML_BYTES = 16 * 2**20  # a real one is tens of KiB; the ISO is the user's, but bounded all the same

# Microsoft's published KMS client setup keys (GVLKs): they select the edition on multi-edition
# media and activate nothing by themselves. Home has none: give --product-key for it.
SETUP_KEYS = {
    "Professional": "W269N-WFGWX-YVC9B-4J6C9-T83GX",
    "Enterprise": "NPPR9-FWDCX-D2C8J-H872K-2YT43",
    "Education": "NW6C2-QMPVW-D7KKK-3GKT6-VCFB2",
}
PREFERRED_EDITION = "Professional"


@dataclass(frozen=True)
class Edition:
    index: int
    name: str  # "Windows 11 Pro"
    edition_id: str  # "Professional"


@dataclass(frozen=True)
class EditionChoice:
    edition: Edition
    product_key: str | None  # None: single-edition media (an evaluation ISO) needs none
    why: str


def iso_editions(seven_zip: str, iso: Path) -> list[Edition]:
    """The editions of ISO's install image, from its UDF tree, else its ISO 9660 tree. Raises
    UsageError naming what each tree held when neither has an install image."""
    seen = []
    for tree in TREES:
        listing = list_tree(seven_zip, iso, tree)
        for image in INSTALL_IMAGES:
            stored = listing.find(image)
            if stored is not None:
                with open_file(seven_zip, iso, tree, stored) as reader:
                    return parse_wim_editions(reader, f"{iso.name}:{stored} ({TREE_NAMES[tree]})")
        seen.append(listing.problem or _held(listing.files))
    trees = "; ".join(f"its {TREE_NAMES[tree]} tree {said}" for tree, said in zip(TREES, seen, strict=True))
    raise UsageError(f"{iso} has no sources/install.wim or sources/install.esd ({trees}): "
                     "not a Windows installation ISO, or not one 7-Zip can read")


def _held(files: dict[str, int]) -> str:
    if not files:
        return "holds no files"
    shown = ", ".join(sorted(files)[:3])
    return f"holds {len(files)} file{'s' if len(files) != 1 else ''} ({shown}{', ...' if len(files) > 3 else ''})"


def parse_wim_editions(reader, where: str) -> list[Edition]:
    """READER: read(offset, size) -> bytes of the WIM file."""
    header = reader.read(0, HEADER_BYTES)
    if len(header) < HEADER_BYTES or not header.startswith(WIM_MAGIC):
        raise UsageError(f"{where} is not a WIM file (no MSWIM header)")
    size_and_flags, offset, _original = struct.unpack_from("<QQQ", header, XML_RESHDR_AT)
    size = size_and_flags & 0x00FF_FFFF_FFFF_FFFF
    if not 0 < size <= MAX_XML_BYTES:
        raise UsageError(f"{where}: its XML resource is {size} bytes, outside 1..{MAX_XML_BYTES}")
    raw = reader.read(offset, size)
    if len(raw) != size:
        raise UsageError(f"{where}: its XML resource is cut short ({len(raw)} of {size} bytes)")
    try:
        text = raw.decode("utf-16-le").lstrip("\ufeff")
        root = ET.fromstring(text)
    except (UnicodeDecodeError, ET.ParseError) as exc:
        raise UsageError(f"{where}: its XML resource does not parse: {exc}") from None
    editions = []
    for image in root.findall("IMAGE"):
        index = image.get("INDEX", "")
        if not index.isdigit():
            continue
        name = (image.findtext("DISPLAYNAME") or image.findtext("NAME") or "").strip()
        edition_id = (image.findtext("WINDOWS/EDITIONID") or "").strip()
        editions.append(Edition(int(index), name, edition_id))
    if not editions:
        raise UsageError(f"{where} lists no images")
    return sorted(editions, key=lambda e: e.index)


def choose_edition(editions: list[Edition], wanted: str | None, product_key: str | None) -> EditionChoice:
    """The edition to install: WANTED (a name or an edition id, any case) when given; the only
    one on single-edition media; Pro on multi-edition media. Raises UsageError, naming every
    edition, when that cannot be decided or has no key."""
    listed = "; ".join(f"{e.index}: {e.name} ({e.edition_id})" for e in editions)
    if wanted:
        found = [e for e in editions if wanted.lower() in (e.name.lower(), e.edition_id.lower())]
        if not found:
            raise UsageError(f"the ISO has no edition {wanted!r}; it has: {listed}",
                             fix="pass --edition with one of these names")
        chosen, why = found[0], f"--edition {wanted}"
    elif len(editions) == 1:
        return EditionChoice(editions[0], product_key, "the ISO's only edition")
    else:
        preferred = [e for e in editions if e.edition_id == PREFERRED_EDITION]
        if not preferred:
            raise UsageError(f"the ISO holds {len(editions)} editions and no Pro: {listed}",
                             fix="pass --edition NAME (and --product-key for an edition without a setup key)")
        chosen, why = preferred[0], f"Pro, of {len(editions)} editions (choose with --edition)"
    if len(editions) == 1:
        return EditionChoice(chosen, product_key, why)
    key = product_key or SETUP_KEYS.get(chosen.edition_id)
    if key is None:
        raise UsageError(f"{chosen.name} ({chosen.edition_id}) has no generic setup key: on multi-edition media "
                         "Windows Setup would stop at the product-key page",
                         fix="pass --product-key with a key for that edition, or choose Pro, Enterprise or Education")
    if not re.fullmatch(r"[A-Z0-9]{5}(-[A-Z0-9]{5}){4}", key):
        raise UsageError(f"--product-key {key!r} is not of the form XXXXX-XXXXX-XXXXX-XXXXX-XXXXX")
    return EditionChoice(chosen, key, why)
