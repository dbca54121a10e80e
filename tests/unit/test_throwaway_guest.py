"""A guest written from nothing, with only the two parts no task runs without (ShellAccess and
TaskScripts), run through the episode lifecycle: libvirt's test:///default driver for the domain,
FakeDisplay for the screen, and LocalShell (sh on this host) as both of its shells. It stages by
copying files one by one and reads its verdict apart, as a guest without the one-command staging
does. What it lacks, the episode does without and says so; a task that needs a part it lacks is
refused before any VM starts."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from fakes.display import LocalShell
from fakes.driver_host import TestDriverHost, image_of
from runner.agents.builtin import NopAgent, OracleAgent
from runner.config import Settings
from runner.errors import UsageError
from runner.mcp.server import build_server
from runner.profiles import PROFILES, register
from runner.profiles.base import GuestProfile
from runner.profiles.parts import DesktopUser, Phase, Quarantine, ShellAccess, ShellEndpoint, Shells, TaskScripts
from runner.records.results import ResultLog
from runner.runs.pool_config import PoolConfig
from runner.runs.scheduler import SlotScheduler
from runner.tasks.guest_parts import require_parts
from runner.tasks.model import load_suite
from runner.vm.selfcheck import run_shell_checks
from typing_extensions import override

q = shlex.quote


class ThrowawayAccess(ShellAccess):
    def __init__(self, root: Path) -> None:
        self.root = root

    @override
    def home(self, user: str) -> str:
        return str(self.root / "home")

    @override
    def access_problem(self, manifest) -> str | None:
        return None

    @override
    def admin_access_missing(self, manifest) -> str | None:
        return None

    @override
    def shell_port(self, manifest) -> int:
        return 22

    @override
    def open_shells(self, image, host, port, agent=None) -> Shells:
        return Shells(user=LocalShell(), admin=LocalShell())

    @override
    def endpoint(self, image, host, port) -> ShellEndpoint:
        return ShellEndpoint("local", {}, "sh on this host")


class ThrowawayScripts(TaskScripts):
    script_ext = ".sh"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.admin_task_dir = str(root / "admin-task")
        self.agent_task_dir = str(root / "agent-task")

    @override
    def privileged_prelude(self, folder: str, user: DesktopUser, phase: Phase) -> str:
        return (f"TASK_DIR={q(folder)} USER_HOME={q(user.home)} DESKTOP_USER={q(user.name)}\n"
                "export TASK_DIR USER_HOME DESKTOP_USER\ncd / || exit 1\n")  # never a folder the agent can write

    @override
    def agent_prelude(self, folder: str) -> str:
        home = self.root / "home"
        return f"TASK_DIR={q(folder)} HOME={q(str(home))}\nexport TASK_DIR HOME\ncd \"$HOME\" || exit 1\n"

    @override
    def stage_script(self, folder: str, subfolders: list[str]) -> str:
        return f"rm -rf {q(folder)} && mkdir -m 700 {q(folder)}" + "".join(
            f" && mkdir -p {q(folder + '/' + d)}" for d in subfolders)

    @override
    def remove_script(self, folder: str) -> str:
        return f"rm -rf {q(folder)}"

    @override
    def staged_path(self, folder: str, relative: str) -> str:
        return f"{folder}/{relative}"

    @override
    def verdict_helper(self, record: str) -> str:
        # A pass never overwrites a fail; either ends the script.
        return (f'verdict() {{ if [ "$1" = pass ]; then [ -e {q(record)} ] || echo pass > {q(record)}; '
                f'else printf "fail\\n%s\\n" "$2" > {q(record)}; fi; exit 0; }}\n')

    @override
    def verdict_read_script(self, record: str) -> str:
        return f"cat {q(record)} 2>/dev/null || true"

    @override
    def hand_home_script(self, user: DesktopUser) -> str:
        return "true"

    @override
    def grant_admin_script(self, user: DesktopUser) -> str:
        return "true"

    @override
    def clock_script(self, now: float) -> str:
        return f"printf %s {now:.3f} > {q(str(self.root / 'clock'))}"

    @override
    def sync_script(self) -> str:
        return "true"

    @override
    def quote_arguments(self, args: Sequence[str]) -> str:
        return shlex.join(args)


@pytest.fixture
def throwaway(tmp_path):
    root = tmp_path / "guest"
    (root / "home").mkdir(parents=True)
    profile = register(GuestProfile("throwaway", default_image="fake", access=ThrowawayAccess(root),
                                    scripts=ThrowawayScripts(root)))
    yield profile
    del PROFILES[profile.name]


def suite_of(tmp_path: Path, task_yaml: str = "") -> Path:
    folder = tmp_path / "suite" / "goal"
    (folder / "sub").mkdir(parents=True)
    (folder / "task.yaml").write_text(f"id: goal\ninstruction: x\nprofile: throwaway\n{task_yaml}")
    (folder / "setup.sh").write_text('rm -f "$USER_HOME/goal"\n')
    (folder / "oracle.sh").write_text('. "$TASK_DIR/sub/answer.sh"\necho "$ANSWER" > "$HOME/goal"\n')
    (folder / "sub" / "answer.sh").write_text("ANSWER=done\n")
    (folder / "verify.sh").write_text('[ "$(cat "$USER_HOME/goal" 2>/dev/null)" = done ] && verdict pass\n'
                                      'verdict fail "no goal"\n')
    return tmp_path / "suite"


def run_one(tmp_path: Path, agent, suite: Path):
    host = TestDriverHost()
    try:
        settings = Settings.resolve(cache_dir=tmp_path / "cache", libvirt_uri="test:///default")
        (task,) = load_suite(str(suite)).tasks
        pool = PoolConfig(image=image_of(tmp_path, "throwaway"), accel="tcg", vm_pool=1, run_id="throwaway")
        out = tmp_path / f"out-{agent.name}"
        SlotScheduler(host, settings, pool, agent, out).run([(task, 1)])
        (record,) = ResultLog(out).latest()
        return record, out / task.id
    finally:
        for domain in host.cu_domains():
            host.destroy(domain.name)
        host.close()


def test_a_guest_of_two_parts_runs_an_episode_to_its_verdict(throwaway, tmp_path):
    record, folder = run_one(tmp_path, OracleAgent(), suite_of(tmp_path))
    assert (record.outcome, record.reason) == ("pass", ""), record
    episode = next(folder.iterdir())
    assert (episode / "verify.log").read_text().endswith("--- verdict\npass\n")  # read apart, by verdict_read_script
    # What it lacks is said where the parts would have written: nothing was stopped, nothing listed.
    assert "throwaway guests have no quarantine" in (episode / "quarantine.log").read_text()
    assert json.loads((episode / "write-set.json").read_text())["not_listed"] == \
        "throwaway guests have no write-set lister"
    assert not (tmp_path / "guest" / "admin-task").exists() and not (tmp_path / "guest" / "agent-task").exists()


def test_the_same_guest_fails_an_agent_that_did_nothing(throwaway, tmp_path):
    record, _folder = run_one(tmp_path, NopAgent(), suite_of(tmp_path))
    assert (record.outcome, record.reason) == ("fail", "no goal"), record


@pytest.mark.parametrize("task_yaml, part", [
    ("network:\n  allow: [https://example.com]\n", "its network: needs a network end"),
    ("desktop_in_verify: true\n", "desktop_in_verify needs a quarantine"),
    ("write_set:\n  allow: ['~/goal']\n", "its write_set: needs a write-set lister"),
    ("safety:\n  - {id: no-rm, ran: '^rm '}\n", "its ran: rule no-rm needs an exec audit"),
])
def test_a_task_that_needs_a_part_the_guest_lacks_is_refused_before_any_vm(throwaway, tmp_path, task_yaml, part):
    (task,) = load_suite(str(suite_of(tmp_path, task_yaml))).tasks
    with pytest.raises(UsageError, match=f"goal: {part}, and throwaway guests have none"):
        require_parts([task])


def test_what_else_lacks_a_part_says_so(throwaway):
    assert throwaway.part(Quarantine) is None
    assert throwaway.part_labels == ("shell access", "task scripts")
    # The conformance checks skip what they have no probe for; the file tools are refused.
    assert all(r.ok and r.detail.startswith("skipped: throwaway guests have no conformance probes")
               for r in run_shell_checks(LocalShell(), throwaway))
    from fakes.display import FakeDisplay

    with pytest.raises(UsageError, match="throwaway guests have none"):
        build_server(FakeDisplay(1280, 800), LocalShell(), toolsets=("files",), file_root="/tmp", guest=throwaway)


def test_a_run_asks_for_the_parts_it_needs_before_any_vm(throwaway, tmp_path):
    from runner.runs.request import RunRequest
    from runner.runs.run_plan import plan_run

    settings = Settings.resolve(tmp_path / "cache")
    request = RunRequest.of(str(suite_of(tmp_path, "desktop_in_verify: true\n")), "nop")
    with pytest.raises(UsageError, match="desktop_in_verify needs a quarantine, and throwaway guests have none"):
        plan_run(settings, request)
    (tmp_path / "suite" / "goal" / "task.yaml").write_text("id: goal\ninstruction: x\nprofile: throwaway\n")
    with pytest.raises(UsageError, match="--tools files needs a file tools, and throwaway guests have none"):
        plan_run(settings, RunRequest.of(str(tmp_path / "suite"), "nop", tools=("screen", "files")))
