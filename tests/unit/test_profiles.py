"""The guest-profile seam: no module outside runner/profiles/ tells profiles apart by name, and a
profile registered from a test is enough for a task, its scripts, the write set and the MCP file
tools to work on it."""

import ast
import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from fakes.display import FakeDisplay, LocalShell
from fakes.profiles import host_folders
from runner.images.catalog import ImageManifest
from runner.config import PROJECT_ROOT
from runner.guest.base import ExecResult, GuestShell
from runner.mcp.server import build_server
from runner.errors import UsageError
from runner.profiles import PROFILES, DesktopUser, GuestProfile, get_profile, register
from runner.tasks.scripts import run_privileged
from runner.tasks.model import load_suite
from runner.profiles.listing import WriteSetLister, Watch, take_listing
from typing_extensions import override

NAMES = {"linux", "windows"}


def profile_literals(tree: ast.AST) -> list[int]:
    """Lines where code tells profiles apart by name: a comparison with one, a dict keyed by
    profile names (a per-profile table), a profile= keyword given one, or a Literal[...] of them.
    (A lone "windows" key is a window list, not a profile.)"""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in NAMES for o in operands):
                found.append(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if len(keys & NAMES) >= 2:
                found.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "profile":
            if isinstance(node.value, ast.Constant) and node.value.value in NAMES:
                found.append(node.value.lineno)
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            if any(isinstance(c, ast.Constant) and c.value in NAMES for c in ast.walk(node.slice)):
                found.append(node.lineno)
    return sorted(found)


def test_no_module_outside_the_profiles_tells_them_apart_by_name():
    runner = PROJECT_ROOT / "runner"
    offenders = {}
    for path in sorted(runner.rglob("*.py")):
        if "profiles" in path.relative_to(runner).parts:
            continue
        lines = profile_literals(ast.parse(path.read_text()))
        if lines:
            offenders[str(path.relative_to(PROJECT_ROOT))] = lines
    assert offenders == {}


def test_the_literal_finder_finds_what_it_looks_for():
    code = ('if profile == "windows": pass\nWATCH = {"linux": 1, "windows": 2}\nm = M(profile="linux")\n'
            'P = Literal["linux", "windows"]\nwindow_list = {"windows": []}\nif "linux" != kind: pass\n')
    assert profile_literals(ast.parse(code)) == [1, 2, 3, 4, 6]


# What an episode runs on: it asks the guest for a part, or the shell for what it can do, and
# never tells them apart by their class (a third guest would fall through such a test).
EPISODE_MODULES = ("runs", "scoring", "tasks", "vm")


def class_tests(tree: ast.AST) -> list[int]:
    """Lines that test an object against a shell's or a guest profile's class."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance" and len(node.args) == 2:
            names = [n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)]
            if any(n.endswith(("Shell", "Profile")) or n.startswith(("Linux", "Windows")) for n in names):
                found.append(node.lineno)
    return found


def test_no_episode_module_tells_guests_or_shells_apart_by_class():
    runner = PROJECT_ROOT / "runner"
    offenders = {str(path.relative_to(PROJECT_ROOT)): lines
                 for folder in EPISODE_MODULES for path in sorted((runner / folder).rglob("*.py"))
                 if (lines := class_tests(ast.parse(path.read_text())))}
    assert offenders == {}
    assert class_tests(ast.parse("if watch and isinstance(vm.admin_shell, QemuAgentShell): pass")) == [1]


@pytest.fixture
def testos(tmp_path):
    profile = register(host_folders(tmp_path / "guest", "testos"))  # a third profile: sh on this host
    (tmp_path / "guest" / "home" / "alice").mkdir(parents=True)
    yield profile
    del PROFILES["testos"]


def test_a_profile_registered_from_a_test_runs_tasks_listings_and_file_tools(testos, tmp_path):
    task_dir = tmp_path / "suite" / "hello"
    task_dir.mkdir(parents=True)
    (task_dir / "task.yaml").write_text("id: hello\ninstruction: x\nprofile: testos\n")
    (task_dir / "oracle.sh").write_text("true\n")
    (task_dir / "data.txt").write_text("from the task\n")
    (task_dir / "verify.sh").write_text('cat "$TASK_DIR/data.txt"; echo "home=$USER_HOME user=$DESKTOP_USER"; '
                                        'echo note > "$USER_HOME/note.txt"; echo PASS\n')
    (task,) = load_suite(str(tmp_path / "suite")).tasks
    assert task.guest is testos and task.ext == ".sh"

    user = DesktopUser("alice", testos.access.home("alice"))
    result = run_privileged(LocalShell(), task, "verify", user, "verify")
    assert result.stdout.splitlines() == ["from the task", f"home={user.home} user=alice", "PASS"], result
    assert not Path(testos.scripts.admin_task_dir).exists()  # staged, then removed

    listing = take_listing(LocalShell(), testos.part(WriteSetLister), Watch((user.home,)))
    assert f"{user.home}/note.txt" in listing.entries

    server = build_server(FakeDisplay(), LocalShell(), toolsets=("files",), file_root=user.home, guest=testos)

    async def files():
        async with Client(server) as client:
            return (await client.call_tool("list_files", {})), (await client.call_tool("file_download",
                                                                                       {"path": "note.txt"}))

    listed, note = anyio.run(files)
    assert "note.txt" in listed.content[0].text and note.content[0].text == "note\n"


def test_an_image_of_an_unknown_profile_is_refused_and_a_registered_one_accepted(testos):
    manifest = {"name": "t", "profile": "plan9", "disk": "d.qcow2", "disk_sha256": "0" * 64, "disk_bytes": 1,
                "screen": {"width": 1, "height": 1}, "credentials": {"user": "alice", "password": "x"},
                "ssh": {"user": "alice", "private_key": "k", "host_key": "ssh-ed25519 AAAA", "admin_private_key": "a"},
                "built_at": "2026-12-01T00:00:00Z", "build_seconds": 1, "builder": "test"}
    with pytest.raises(ValueError, match="plan9"):
        ImageManifest.model_validate(manifest)
    accepted = ImageManifest.model_validate({**manifest, "profile": "testos"})
    assert accepted.desktop_user.home == testos.access.home("alice") and accepted.admin_access_missing() is None


class ScriptRecorder(GuestShell):
    """A fake guest shell that records each script and answers as told."""

    def __init__(self, answer: ExecResult) -> None:
        self.scripts: list[str] = []
        self.answer = answer

    @override
    def wait_ready(self, timeout):
        return 0.0

    @override
    def run(self, script, timeout=60.0):
        self.scripts.append(script)
        return self.answer

    @override
    def put(self, local, remote):
        raise AssertionError("not used")

    @override
    def get(self, remote, local):
        raise AssertionError("not used")

    @override
    def close(self):
        pass


def test_windows_file_tools_speak_powershell_and_confine_to_the_profile_folder():
    """The file tools once sent POSIX sh to a Windows guest; now they use the profile's scripts."""
    shell = ScriptRecorder(ExecResult(0, "f\t5\t2026-12-01 10:00\tnotes.txt\r\n", ""))
    server = build_server(FakeDisplay(), shell, toolsets=("files",), file_root="C:\\Users\\cu",
                          guest=get_profile("windows"))

    async def files():
        async with Client(server) as client:
            return (await client.call_tool("list_files", {"path": "Documents"}),
                    await client.call_tool("list_files", {"path": "..\\..\\Windows"}))

    listed, outside = anyio.run(files)
    assert "notes.txt" in listed.content[0].text
    assert "Get-ChildItem" in shell.scripts[0] and "'C:\\Users\\cu\\Documents'" in shell.scripts[0]
    assert outside.isError if hasattr(outside, "isError") else outside.is_error
    assert "leads outside C:\\Users\\cu" in outside.content[0].text and len(shell.scripts) == 1
    json.dumps(shell.scripts)  # plain text, nothing else


def _linux_image(tmp_path: Path, *, qemu_agent: bool):
    """A linux image folder with real key files (the SSH shells read them) and QEMU_AGENT."""
    import subprocess
    from datetime import UTC, datetime

    from runner.images.catalog import Catalog, sha256_file
    from runner.profiles.manifest import Credentials, ScreenSize, SshAccess

    folder = tmp_path / "linux-test"
    (folder / "keys").mkdir(parents=True)
    for key in ("client_key", "admin_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "keys" / key)], check=True)
    (folder / "disk.qcow2").write_bytes(b"golden")
    manifest = ImageManifest(
        name="linux-test", profile="linux", disk="disk.qcow2", disk_sha256=sha256_file(folder / "disk.qcow2"),
        disk_bytes=6, screen=ScreenSize(width=1280, height=800), credentials=Credentials(user="cu", password="cu"),
        built_at=datetime.now(UTC), build_seconds=1.0, builder="test", qemu_agent=qemu_agent,
        ssh=SshAccess(user="cu", private_key="keys/client_key",
                      host_key=" ".join((folder / "keys" / "client_key.pub").read_text().split()[:2]),
                      admin_user="root", admin_private_key="keys/admin_key"),
    )
    (folder / "manifest.json").write_text(json.dumps(manifest.model_dump(mode="json")))
    return Catalog(tmp_path).get("linux-test")


def test_linux_admin_goes_through_the_qemu_agent_when_the_image_runs_one(tmp_path):
    from runner.guest.qga import QemuAgentShell
    from runner.guest.ssh import SshShell

    linux = get_profile("linux")
    with_agent = _linux_image(tmp_path / "a", qemu_agent=True)
    shells = linux.access.open_shells(with_agent, "127.0.0.1", 2222, agent=lambda command, timeout: {})
    assert isinstance(shells.admin, QemuAgentShell) and isinstance(shells.user, SshShell)
    # An image built before the agent, or a caller with no way to the agent: SSH, as before.
    without = _linux_image(tmp_path / "b", qemu_agent=False)
    assert isinstance(linux.access.open_shells(without, "127.0.0.1", 2222, agent=lambda c, t: {}).admin, SshShell)
    assert isinstance(linux.access.open_shells(with_agent, "127.0.0.1", 2222).admin, SshShell)


def test_a_profile_holds_one_part_of_each_kind_and_says_which_it_lacks():
    from runner.profiles.linux import LinuxFileTools, LinuxQuarantine
    from runner.profiles.parts import FileTools, NetworkEnd, Quarantine

    linux = get_profile("linux")
    with pytest.raises(ValueError, match="two quarantine parts"):
        GuestProfile("twice", default_image="x", access=linux.access, scripts=linux.scripts,
                     parts=(LinuxQuarantine(), LinuxQuarantine()))
    with pytest.raises(TypeError, match="not one of a profile's optional parts"):
        linux.with_parts(object())  # type: ignore[arg-type]
    narrower = linux.with_parts(name="narrower", without=(NetworkEnd, FileTools))
    assert narrower.part(NetworkEnd) is None and isinstance(narrower.part(Quarantine), LinuxQuarantine)
    assert isinstance(linux.part(FileTools), LinuxFileTools)  # the original keeps its parts
    with pytest.raises(UsageError, match="a networked task needs a network end, and narrower guests have none"):
        narrower.needs(NetworkEnd, "a networked task")
