"""Stand-in Windows installation media, mastered the way Microsoft masters its own.

Microsoft's ISOs come from `oscdimg -u2`: the ISO 9660 tree holds only README.TXT, and every
real file (setup.exe, boot/, efi/, sources/install.wim) is in the UDF tree alone; the disc boots
on UEFI from an El Torito entry for efi/microsoft/boot/efisys.bin, a FAT image. install.wim is a
real WIM whose XML lists the editions (DISPLAYNAME, WINDOWS/EDITIONID). Here:
- genisoimage masters the ISO: `-udf` writes a UDF 1.02 tree beside ISO 9660 (oscdimg's UDF
  revision too), and `-hide` keeps every file but README.TXT out of the ISO 9660 tree only;
- wimlib captures the WIM and sets each image's properties as DISM would have written them;
- mtools formats the FAT image the firmware boots.
The code under test reads the ISO with 7-Zip, so none of these tools is the reader.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

README = ('This disc contains a "UDF" file system and requires an operating system\r\n'
          'that supports the ISO-13346 "UDF" file system specification.\r\n')
VOLUME_LABEL = "CCCOMA_X64FRE_EN-US_DV9"  # what the Media Creation Tool's ISO is called


def make_wim(folder: Path, editions: list[tuple[str, str]], *, solid: bool = False) -> Path:
    """A WIM (an ESD-like solid one with SOLID) with an image per (display name, edition id)."""
    content = folder / "wim-content" / "Windows" / "System32"
    content.mkdir(parents=True)
    (content / "ntoskrnl.exe").write_bytes(b"MZ stand-in")
    wim = folder / ("install.esd" if solid else "install.wim")
    for index, (name, edition_id) in enumerate(editions):
        verb = "wimcapture" if index == 0 else "wimappend"
        argv = [verb, str(folder / "wim-content"), str(wim), name, "--image-property", f"DISPLAYNAME={name}",
                "--image-property", f"WINDOWS/EDITIONID={edition_id}"]
        if solid:
            argv.append("--solid")
        subprocess.run(argv, check=True, capture_output=True)
    return wim


def make_efi_boot_image(path: Path) -> None:
    """efisys.bin: a 1.44 MB FAT image, as on Microsoft's media."""
    subprocess.run(["mformat", "-C", "-f", "1440", "-i", str(path), "::"], check=True, capture_output=True)


def microsoft_layout_iso(folder: Path, editions: list[tuple[str, str]], *, name: str = "Win11_English_x64.iso",
                         esd: bool = False, with_install_image: bool = True) -> Path:
    """An ISO laid out as Microsoft's: README.TXT alone in ISO 9660, the rest in UDF only."""
    root = folder / f"{name}-root"
    for sub in ("boot", "efi/microsoft/boot", "sources"):
        (root / sub).mkdir(parents=True)
    (root / "README.TXT").write_text(README)
    (root / "setup.exe").write_bytes(b"MZ stand-in")
    (root / "boot" / "bcd").write_bytes(b"regf stand-in")
    (root / "sources" / "boot.wim").write_bytes(b"MSWIM stand-in")
    make_efi_boot_image(root / "efi" / "microsoft" / "boot" / "efisys.bin")
    if with_install_image:
        wim = make_wim(folder / f"{name}-wim", editions, solid=esd)
        wim.rename(root / "sources" / wim.name)
    iso = folder / name
    hidden = [arg for entry in ("setup.exe", "boot", "efi", "sources") for arg in ("-hide", entry)]
    subprocess.run(["genisoimage", "-quiet", "-udf", "-iso-level", "3", "-V", VOLUME_LABEL, *hidden,
                    "-eltorito-alt-boot", "-e", "efi/microsoft/boot/efisys.bin", "-no-emul-boot",
                    "-o", str(iso), str(root)], check=True, capture_output=True)
    return iso


def iso9660_names(iso: Path) -> list[str]:
    """The ISO 9660 tree's files as xorriso, an ISO 9660 reader, sees them."""
    done = subprocess.run(["xorriso", "-indev", str(iso), "-find", "/", "-type", "f"],
                          capture_output=True, text=True, check=True)
    return sorted(line.strip().strip("'") for line in done.stdout.splitlines() if line.startswith("'/"))
