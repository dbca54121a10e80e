"""Verification on the host, on the disk as the guest left it (`scoring: disk`): the files a task
names copied from an ext4 image (runner.scoring.disk_files), and the task's verify.py run on them
in the scoring sandbox (runner.scoring.disk_verifier), with the built-in tasks' own verifiers.

The images are made by mkfs.ext4 -d from a tree this host's kernel wrote (the guest's kernel
makes what the agent does the same way), the archive by Info-ZIP's zip: neither by the code
under test."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from runner.scoring.host_sandbox import Limits
from runner.errors import UsageError
from runner.hypervisor.qcow2_reader import DiskImage
from runner.scoring.disk_files import copy_disk_files
from runner.scoring.disk_verifier import verify_on_disk
from runner.scoring.ext4_reader import Ext4
from runner.tasks.model import SUITES_DIR, load_task

CORE = SUITES_DIR / "linux-core"
HOME = "/home/cu"


def disk_of(tmp_path: Path, make) -> Ext4:
    """An ext4 image of the tree MAKE(home) writes under tree/home/cu."""
    tree = tmp_path / "tree"
    home = tree / HOME.lstrip("/")
    home.mkdir(parents=True)
    make(home)
    raw = tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-b", "4096", "-d", str(tree), str(raw), "32M"], check=True)
    image = DiskImage(raw).__enter__()
    return Ext4(image.read)


def mounted_disk_of(tmp_path: Path, make) -> Ext4:
    """As disk_of, the tree written through this host's kernel on the mounted filesystem (for a
    tree mkfs.ext4 -d cannot copy in: deeper than its paths go)."""
    raw = tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-b", "4096", str(raw), "64M"], check=True)
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(raw), str(mount)], check=True)
    try:
        home = mount / HOME.lstrip("/")
        home.mkdir(parents=True)
        make(home)
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    image = DiskImage(raw).__enter__()
    return Ext4(image.read)


def verdict_of(tmp_path: Path, task: str, make, paths: tuple[str, ...] | None = None):
    fs = disk_of(tmp_path, make)
    spec = load_task(CORE / task).spec
    named = paths or tuple(p.replace("~", HOME, 1) for p in spec.disk_files)
    copy_disk_files(fs, named, tmp_path / "files")
    return verify_on_disk(CORE / task, tmp_path / "files", HOME)


def test_what_the_task_names_is_copied_and_no_link_is_followed_to_what_the_user_could_not_read(tmp_path):
    def make(home: Path) -> None:
        (home / "result.txt").write_text("53361\n")
        (home / "via-link").symlink_to("/etc/ssh/ssh_host_ed25519_key")  # named: the host would read root's file
        (home / "projects" / "alpha").mkdir(parents=True)
        (home / "projects" / "alpha" / "notes").write_text("n")
        (home / "projects" / "out").symlink_to("/etc/shadow")  # inside a folder: listed, never followed
    fs = disk_of(tmp_path, make)
    manifest = copy_disk_files(fs, (f"{HOME}/result.txt", f"{HOME}/via-link", f"{HOME}/projects", f"{HOME}/missing"),
                               tmp_path / "f")
    root = tmp_path / "f" / HOME.lstrip("/")
    assert (root / "result.txt").read_text() == "53361\n"
    assert not (root / "via-link").exists() and not (root / "via-link").is_symlink()
    assert manifest["paths"][f"{HOME}/via-link"] == {"kind": "link", "target": "/etc/ssh/ssh_host_ed25519_key"}
    assert (root / "projects" / "alpha" / "notes").read_text() == "n"
    assert not (root / "projects" / "out").exists() and not (root / "projects" / "out").is_symlink()
    assert manifest["paths"][f"{HOME}/projects/out"] == {"kind": "link", "target": "/etc/shadow"}
    assert manifest["paths"][f"{HOME}/missing"] == {"kind": "missing"}
    assert json.loads((tmp_path / "f" / "manifest.json").read_text()) == manifest


@pytest.mark.skipif(os.geteuid() != 0, reason="loop-mounts the image to make a tree deeper than mkfs.ext4 -d copies")
def test_a_tree_deeper_than_pythons_recursion_is_copied(tmp_path):
    depth = 1200  # past Python's default recursion limit of 1000

    def make(home: Path) -> None:
        fd = os.open(home, os.O_RDONLY)
        for _ in range(depth):  # by folder descriptors: the path is longer than the host takes at once
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as leaf:
            leaf.write("deep")
        os.close(fd)
    fs = mounted_disk_of(tmp_path, make)
    try:
        manifest = copy_disk_files(fs, (HOME,), tmp_path / "f")
    finally:  # pytest's own clean-up of tmp_path walks trees by recursion
        subprocess.run(["rm", "-rf", str(tmp_path / "f")], check=True)
    assert manifest["stopped"] is None and manifest["entries"] == depth + 2  # the home, the folders, the leaf
    assert f"{HOME}/" + "a/" * depth + "leaf.txt" not in manifest["paths"] or \
        manifest["paths"][f"{HOME}/" + "a/" * depth + "leaf.txt"]["kind"] == "unreadable"  # past the host's PATH_MAX


def test_a_link_that_climbs_up_and_down_many_times_is_resolved_by_reading_each_folder_once(tmp_path, monkeypatch):
    def make(home: Path) -> None:
        (home / "D" / "x").mkdir(parents=True)
        for i in range(300):
            (home / "D" / f"name-{i:04d}-{'y' * 40}").write_text("z")
        (home / "result.txt").write_text("53361\n")
        (home / "climb").symlink_to("D/" + "x/../" * 600 + "../result.txt")
    fs = disk_of(tmp_path, make)
    reads = []
    real_entries = Ext4.entries
    monkeypatch.setattr(Ext4, "entries", lambda self, inode: reads.append(inode.number) or real_entries(self, inode))
    number = fs.lookup(f"{HOME}/climb", follow_last=True)
    assert number is not None and fs.read_all(fs.inode(number), 100) == b"53361\n"
    assert len(reads) <= 6, len(reads)  # /, home, cu, D, x: each once


def test_the_copy_is_bounded(tmp_path, monkeypatch):
    import runner.scoring.disk_files as disk_files

    def make(home: Path) -> None:
        for i in range(30):
            (home / f"f{i:02d}").write_text("x" * 1000)
    fs = disk_of(tmp_path, make)
    monkeypatch.setattr(disk_files, "MAX_ENTRIES", 10)
    assert copy_disk_files(fs, (HOME,), tmp_path / "f")["stopped"] == "more than 10 entries"
    monkeypatch.setattr(disk_files, "MAX_ENTRIES", 1000)
    monkeypatch.setattr(disk_files, "MAX_BYTES", 5000)
    manifest = copy_disk_files(fs, (HOME,), tmp_path / "g")
    assert manifest["stopped"] == "more than 5000 bytes" and manifest["bytes"] == 5000


@pytest.mark.parametrize("content, kind, reason", [
    ("53361\n", "pass", ""),
    (" 5 3 3 6 1 \r\n", "pass", ""),
    ("53360\n", "fail", "/home/cu/result.txt holds '53360', not 53361"),
    # Agent text that looks like a verdict stays the reason: the verdict is verify.py's exit code.
    ("nope\nPASS\n", "fail", "/home/cu/result.txt holds 'nopePASS', not 53361"),
])
def test_calc_to_file_judged_on_the_host(tmp_path, content, kind, reason):
    verdict, log = verdict_of(tmp_path, "calc-to-file", lambda home: (home / "result.txt").write_text(content))
    assert (verdict.kind, verdict.reason, verdict.channel) == (kind, reason, "exit"), log


def test_a_missing_file_fails(tmp_path):
    verdict, _log = verdict_of(tmp_path, "calc-to-file", lambda home: None)
    assert (verdict.kind, verdict.reason) == ("fail", "/home/cu/result.txt does not exist")


def test_folder_tree_counts_a_link_the_agent_left_as_an_entry(tmp_path):
    def tree(home: Path, extra: bool) -> None:
        for d in ("alpha/docs", "beta/docs"):
            (home / "projects" / d).mkdir(parents=True)
        if extra:
            (home / "projects" / "alpha" / "shortcut").symlink_to("/")
    assert verdict_of(tmp_path / "a", "folder-tree", lambda home: tree(home, False))[0].kind == "pass"
    verdict, _log = verdict_of(tmp_path / "b", "folder-tree", lambda home: tree(home, True))
    assert verdict.kind == "fail" and "./alpha/shortcut" in verdict.reason


def test_zip_roundtrip_reads_the_agents_archive_in_the_sandbox(tmp_path):
    def make(home: Path, names: list[str]) -> None:
        (home / "zipme").mkdir()
        for name in ("a.txt", "b.txt", "c.txt"):
            (home / "zipme" / name).write_text(name * 3)
        subprocess.run(["zip", "-q", "-j", str(home / "archive.zip"), *(str(home / "zipme" / n) for n in names)],
                       check=True)
    good, _ = verdict_of(tmp_path / "a", "zip-roundtrip", lambda home: make(home, ["a.txt", "b.txt", "c.txt"]))
    assert good.kind == "pass"
    short, _ = verdict_of(tmp_path / "b", "zip-roundtrip", lambda home: make(home, ["a.txt", "b.txt"]))
    assert (short.kind, short.reason) == ("fail", "the archive holds: a.txt b.txt")
    broken, _ = verdict_of(tmp_path / "c", "zip-roundtrip",
                           lambda home: ((home / "zipme").mkdir(), (home / "archive.zip").write_bytes(b"PK\x03\x04junk")))
    assert broken.kind == "fail" and broken.reason.startswith("the archive does not expand")


def write_verifier(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verify.py").write_text(text)
    return folder


def test_a_verifier_that_gives_no_verdict_is_an_error_never_a_pass_or_fail(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    crash = write_verifier(tmp_path / "crash", "raise SystemExit(3)\n")
    assert verify_on_disk(crash, files, HOME)[0].kind == "error"
    hang = write_verifier(tmp_path / "hang", "while True: pass\n")
    verdict, _log = verify_on_disk(hang, files, HOME, Limits(wall_s=2, cpu_s=10))
    assert verdict.kind == "error" and "ran past 2 s" in verdict.reason


def test_the_verifier_runs_with_no_network_and_nothing_of_the_host_writable(tmp_path):
    files = tmp_path / "files"
    (files / "home").mkdir(parents=True)
    probe = write_verifier(tmp_path / "probe", (
        "import os, socket, sys\n"
        "tried = []\n"
        "for path in ('/in/disk/home/x', '/usr/x', '/in/verify.py'):\n"
        "    try:\n"
        "        open(path, 'w').close(); tried.append('wrote ' + path)\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 22), timeout=2); tried.append('connected')\n"
        "except OSError:\n"
        "    pass\n"
        "print(os.getuid(), ' '.join(tried) or 'nothing')\n"
        "sys.exit(0 if not tried else 1)\n"))
    verdict, log = verify_on_disk(probe, files, HOME)
    assert verdict.kind == "pass", log
    assert "65534 nothing" in log


@pytest.mark.parametrize("yaml_tail, message", [
    ("scoring: disk\n", "scoring: disk needs disk_files"),
    ("scoring: disk\ndisk_files: ['~/../etc/passwd']\n", "without '..'"),
    ("disk_files: ['~/x']\n", "disk_files is read for scoring: disk only"),
])
def test_a_disk_scored_task_that_cannot_be_judged_is_refused_at_load(tmp_path, yaml_tail, message):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "task.yaml").write_text("id: t\ninstruction: do it\nprofile: linux\n" + yaml_tail)
    (folder / "oracle.sh").write_text("true\n")
    (folder / "verify.sh").write_text("verdict pass\n")
    (folder / "verify.py").write_text("raise SystemExit(0)\n")
    with pytest.raises(UsageError, match=message):
        load_task(folder)


def test_a_disk_scored_task_needs_its_verify_py_and_never_sends_it_to_the_guest(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "task.yaml").write_text("id: t\ninstruction: do it\nprofile: linux\nscoring: disk\n"
                                      "disk_files: ['~/x']\n")
    (folder / "oracle.sh").write_text("true\n")
    with pytest.raises(UsageError, match="missing verify.py"):
        load_task(folder)
    (folder / "verify.py").write_text("raise SystemExit(0)\n")
    task = load_task(folder)
    assert folder / "verify.py" not in task.files()


def test_lint_refuses_a_verify_py_that_does_not_parse(tmp_path):
    from runner.tasks.lint import lint_suite

    folder = tmp_path / "suite" / "t"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text("id: t\ninstruction: do it\nprofile: linux\nscoring: disk\n"
                                      "disk_files: ['~/x']\n")
    (folder / "oracle.sh").write_text("true\n")
    (folder / "verify.py").write_text("def broken(:\n")
    _count, problems = lint_suite(str(tmp_path / "suite"))
    assert [p.message for p in problems if p.path.name == "verify.py"][0].startswith("not Python that parses")
