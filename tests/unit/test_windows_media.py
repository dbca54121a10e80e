"""The Windows ISO read as a lab has it: Microsoft's media keep every file in UDF only, so the
build's preflight and `cu-run doctor --windows-iso` must find install.wim there and name its
editions. The stand-ins are mastered by genisoimage and wimlib (tests/windows_media_standins.py);
the code reads them with 7-Zip. A hand-made ISO 9660 one (xorriso) must still work."""

import re
import subprocess
from pathlib import Path

import pytest

from runner.errors import UsageError
from runner.images import iso_files
from runner.images.iso_files import ForwardReader, find_seven_zip, list_tree, parse_listing
from runner.images.windows_11 import WindowsInputs, preflight
from runner.images.windows_media import iso_editions
from runner.vm.doctor import windows_checks
from windows_media_standins import iso9660_names, make_wim, microsoft_layout_iso

RETAIL = [("Windows 11 Home", "Core"), ("Windows 11 Education", "Education"), ("Windows 11 Pro", "Professional")]
EVALUATION = [("Windows 11 Enterprise Evaluation", "EnterpriseEval")]


@pytest.fixture(scope="module")
def seven_zip():
    found = find_seven_zip()
    assert found, "7-Zip is missing: scripts/setup-host.sh installs p7zip-full"
    return found


@pytest.fixture(scope="module")
def retail_iso(tmp_path_factory):
    return microsoft_layout_iso(tmp_path_factory.mktemp("retail"), RETAIL)


def summary(editions):
    return [(e.index, e.name, e.edition_id) for e in editions]


def test_the_stand_in_is_shaped_like_microsofts_media(retail_iso, seven_zip):
    # What an ISO 9660 reader sees of Microsoft's media: the README and nothing else. This is why
    # the xorriso reader refused every ISO a lab downloads.
    assert iso9660_names(retail_iso) == ["/README.TXT"]
    udf = list_tree(seven_zip, retail_iso, "udf").files
    assert {"README.TXT", "setup.exe", "boot/bcd", "efi/microsoft/boot/efisys.bin", "sources/install.wim"} <= set(udf)
    boot = subprocess.run(["xorriso", "-indev", str(retail_iso), "-report_el_torito", "plain"],
                          capture_output=True, text=True, check=True).stdout
    assert any("UEFI" in line for line in boot.splitlines() if line.startswith("El Torito boot img"))


def test_the_editions_are_read_from_the_udf_tree_of_microsofts_layout(retail_iso, seven_zip):
    assert summary(iso_editions(seven_zip, retail_iso)) == [
        (1, "Windows 11 Home", "Core"), (2, "Windows 11 Education", "Education"), (3, "Windows 11 Pro", "Professional")]


def test_an_install_esd_is_read_as_well(tmp_path, seven_zip):
    iso = microsoft_layout_iso(tmp_path, EVALUATION, esd=True)
    assert summary(iso_editions(seven_zip, iso)) == [(1, "Windows 11 Enterprise Evaluation", "EnterpriseEval")]


def test_a_hand_made_iso9660_iso_is_still_read(tmp_path, seven_zip):
    root = tmp_path / "root" / "SOURCES"
    root.mkdir(parents=True)
    make_wim(tmp_path / "wim", RETAIL[2:]).rename(root / "INSTALL.WIM")
    iso = tmp_path / "hand-made.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(tmp_path / "root")],
                   check=True, capture_output=True)
    assert summary(iso_editions(seven_zip, iso)) == [(1, "Windows 11 Pro", "Professional")]


def test_an_iso_without_an_install_image_names_what_each_tree_held(tmp_path, seven_zip):
    iso = microsoft_layout_iso(tmp_path, RETAIL, with_install_image=False)
    with pytest.raises(UsageError) as caught:
        iso_editions(seven_zip, iso)
    message = caught.value.message
    assert "no sources/install.wim or sources/install.esd" in message
    assert re.search(r"its UDF tree holds \d+ files \(README.TXT, ", message)
    assert "its ISO 9660 tree holds" in message and "README.TXT" in message


def test_a_file_that_is_no_iso_gets_one_clear_message(tmp_path, seven_zip):
    junk = tmp_path / "junk.iso"
    junk.write_bytes(b"\x00" * 70000 + b"not an image" * 1000)
    with pytest.raises(UsageError) as caught:
        iso_editions(seven_zip, junk)
    assert "cannot open it as UDF" in caught.value.message and "\n" not in caught.value.message


def test_the_listing_parser_takes_files_and_leaves_folders():
    text = ("Path = sources\nFolder = +\nSize = \n\nPath = sources/install.wim\nFolder = -\nSize = 5368709120\n\n"
            "Path = README.TXT\r\nFolder = -\r\nSize = 135\r\n\r\nPath = odd\nSize = x\n")
    assert parse_listing(text.replace("\r\n", "\n")) == {"sources/install.wim": 5368709120, "README.TXT": 135}


def test_a_forward_reader_skips_ahead_and_refuses_to_go_back(tmp_path):
    data = tmp_path / "data"
    data.write_bytes(bytes(range(256)) * 8192)  # 2 MiB: the skip crosses a chunk
    with data.open("rb") as handle:
        reader = ForwardReader(handle, "stand-in")
        assert reader.read(0, 4) == bytes([0, 1, 2, 3])
        assert reader.read(1_500_000, 2) == bytes([1_500_000 % 256, 1_500_001 % 256])
        assert reader.read(2**21 - 1, 10) == bytes([255])  # cut short at the end, never more
        with pytest.raises(UsageError, match="read back"):
            reader.read(10, 1)


def test_the_stream_is_stopped_once_the_editions_are_read(retail_iso, seven_zip, monkeypatch):
    started = []
    real_popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(iso_files.subprocess, "Popen", recording_popen)
    iso_editions(seven_zip, retail_iso)
    assert [proc.args[1] for proc in started] == ["l", "x"]  # one listing, one stream
    assert all(proc.returncode is not None for proc in started)  # each waited for: none left running


# -- the build's preflight and doctor, on Microsoft's layout

def windows_inputs(folder: Path, iso: Path) -> WindowsInputs:
    for name in ("virtio-win.iso", "python-3.13.1-amd64.exe"):
        (folder / name).write_bytes(b"placeholder " + name.encode())
    return WindowsInputs(iso=iso, virtio_iso=folder / "virtio-win.iso",
                         python_installer=folder / "python-3.13.1-amd64.exe")


def test_the_builds_preflight_accepts_microsofts_layout_and_names_the_edition(retail_iso, tmp_path):
    said = []
    tools = preflight(windows_inputs(tmp_path, retail_iso), tmp_path / "catalog", progress=said.append)
    assert tools.edition.edition.name == "Windows 11 Pro"
    assert any(line.startswith("edition: Windows 11 Pro (index 3;") for line in said)


def test_the_preflight_names_a_missing_7zip(retail_iso, tmp_path, monkeypatch):
    monkeypatch.setattr("runner.images.windows_11.find_seven_zip", lambda: None)
    with pytest.raises(UsageError) as caught:
        preflight(windows_inputs(tmp_path, retail_iso), tmp_path / "catalog")
    assert "7-Zip: neither 7z nor 7zz is on PATH" in caught.value.message
    assert "apt install p7zip-full" in caught.value.message


def test_doctor_reads_microsofts_layout_and_names_every_edition(retail_iso):
    checks = {c.name: c for c in windows_checks(retail_iso, None)}
    editions = checks["windows: ISO editions"]
    assert editions.status == "ok"
    assert "1: Windows 11 Home; 2: Windows 11 Education; 3: Windows 11 Pro" in editions.detail
    assert "the build installs Windows 11 Pro" in editions.detail


def test_doctors_fix_for_an_unreadable_iso_does_not_send_the_lab_elsewhere(tmp_path):
    iso = microsoft_layout_iso(tmp_path, RETAIL, with_install_image=False)
    check = next(c for c in windows_checks(iso, None) if c.name == "windows: ISO editions")
    assert check.status == "fail" and "as downloaded from Microsoft" in check.fix


def test_a_stream_that_takes_too_long_is_cut_off_and_says_so(retail_iso, tmp_path):
    from runner.images.iso_files import open_file

    # A fake 7-Zip whose stream never ends (yes(1), whatever it is asked), so only the watchdog ends it.
    fake = tmp_path / "fake-7z-endless"
    fake.write_text("#!/bin/sh\nexec yes\n")
    fake.chmod(0o755)
    with pytest.raises(UsageError, match="7-Zip had not streamed it"):
        with open_file(str(fake), retail_iso, "udf", "sources/install.wim", timeout=0.5) as reader:
            reader.read(2**34, 16)  # past all the stream gives before it is cut off
