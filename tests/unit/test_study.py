"""Study files: what they must say, how arms become runs, the interleaved order, the
comparison of arms. tests/e2e/test_study.py runs a study on VMs, killed and resumed."""

import json

import pytest

from runner.errors import UsageError
from runner.records.results import EpisodeRecord, ResultLog, summarize
from runner.runs.run import interleaved
from runner.runs.study import arm_request, compare_arms, comparison_markdown, load_study
from runner.tasks.model import load_suite

GOOD = """suite: linux-core
tasks: [editor-write-save, folder-tree]
trials: 2
vm_pool: 2
arms:
  - name: own
    agent: scripted
  - name: attached
    agent: claude
    mcp_server: "cu-run mcp --attach vnc://{vnc}"
    append_system_prompt: skill.md
    max_turns: 30
    timeout_s: 1800
    env: {VENDOR_MODE: strict}
"""


def _study(tmp_path, text=GOOD):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def test_an_arm_becomes_a_run_request_with_its_server_prompt_turns_timeout_and_environment(tmp_path):
    (tmp_path / "skill.md").write_text("Use the vendor's tools carefully.")
    study = load_study(_study(tmp_path))
    own, attached = (arm_request(study, arm, tmp_path / "out", resume=False) for arm in study.spec.arms)
    assert own.results.out == tmp_path / "out" / "own" and own.agent.mcp_server is None
    assert own.work.tasks == ("editor-write-save", "folder-tree")
    assert attached.agent.mcp_server == "cu-run mcp --attach vnc://{vnc}"
    assert attached.agent.append_prompt.startswith("Use the vendor")
    assert attached.agent.max_turns == 30 and attached.work.timeout_s == 1800
    assert dict(attached.agent.agent_env) == {"VENDOR_MODE": "strict"}
    assert len(study.sha256) == 64


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace("tasks: [editor-write-save, folder-tree]", "tasks: [a]\nselection: s.yaml"), "one of them"),
    (lambda t: t.replace("name: attached", "name: own"), "own more than once"),
    (lambda t: t.replace("    agent: scripted\n", "    agent: scripted\n    tools: [screen]\n    mcp_server: x\n"),
     "brings its own"),
    (lambda t: t.replace("trials: 2", "trials: 0"), "trials"),
    (lambda t: t + "colour: blue\n", "colour"),
    (lambda t: t + "start: lukewarm\n", "start"),  # a choice is made from its text here, at the edge
])
def test_a_bad_study_file_is_refused_naming_the_field(tmp_path, change, message):
    with pytest.raises(UsageError, match=message):
        load_study(_study(tmp_path, change(GOOD)))


def test_a_missing_prompt_file_is_refused_naming_the_arm(tmp_path):
    study = load_study(_study(tmp_path))
    with pytest.raises(UsageError, match="arm attached: cannot read its append_system_prompt"):
        arm_request(study, study.spec.arms[1], tmp_path / "out", resume=False)


def test_runs_are_interleaved_trial_by_trial_task_by_task_run_by_run():
    tasks = load_suite("linux-core").select(["folder-tree", "editor-write-save"])
    to_go = [[(t, n) for n in (2, 1) for t in reversed(tasks)] for _arm in ("a", "b")]
    order = [(run, task.id, trial) for run, task, trial in interleaved(to_go, ["folder-tree", "editor-write-save"])]
    assert order == [(0, "folder-tree", 1), (1, "folder-tree", 1), (0, "editor-write-save", 1),
                     (1, "editor-write-save", 1), (0, "folder-tree", 2), (1, "folder-tree", 2),
                     (0, "editor-write-save", 2), (1, "editor-write-save", 2)]


def test_the_comparison_puts_every_arm_against_the_first(tmp_path):
    for arm, outcome in (("own", "pass"), ("other", "pass"), ("worse", "fail")):
        folder = tmp_path / arm
        folder.mkdir()
        log = ResultLog(folder)
        records = [EpisodeRecord(t, n, outcome, "", 1.0, 0, 1, "x", "y") for t in ("t1", "t2") for n in (1, 2, 3, 4)]
        for r in records:
            log.append(r)
        (folder / "summary.json").write_text(json.dumps(summarize(records, ["t1", "t2"])))
    result = compare_arms(tmp_path, ["own", "other", "worse"])
    assert result["baseline"] == "own" and set(result["against"]) == {"other", "worse"}
    assert result["against"]["other"]["overall"]["beyond_noise"] is False
    assert result["against"]["worse"]["overall"]["mean_task_delta"] == -1.0
    report = comparison_markdown(result)
    assert "## worse against own" in report and "| t1 | 4/4 (1.00) | 0/4 (0.00) | -1.00 |" in report


def test_the_runs_share_the_slots_and_the_supply_drains_before_the_pool_returns():
    # Before, a study returned with its arms' last VMs still being torn down in the background,
    # left to the process's exit. Fakes of the schedulers' and the supply's public sides record
    # the order.
    import queue
    import threading

    from runner.runs.scheduler import run_on_slots

    events, lock = [], threading.Lock()
    both_slots = threading.Barrier(2, timeout=10)  # the first two episodes run at once, one a slot

    stopping, supply = threading.Event(), None  # what the pool's schedulers share with the loop

    class FakeScheduler:
        def __init__(self, name):
            self.name, self.stopping, self.vms = name, stopping, supply

        def run_one(self, slot, task, trial):
            with lock:
                events.append(("run", self.name, task, slot))
                first_two = len(events) <= 2
            if first_two:
                both_slots.wait()
            return None

        def keep(self, record):
            raise AssertionError("run_one returned no record")

        def slot_ended(self, slot):
            with lock:
                events.append(("slot ended", self.name, slot))

        def stop(self):
            events.append(("stop", self.name))

    class FakeSupply:
        def slot_ended(self, slot):
            with lock:
                events.append(("supply slot ended", slot))

        def drain(self, seconds=120.0):
            events.append(("drain",))

        def stop(self):
            events.append(("stop supply",))

        def still_there(self):
            return []

    work = queue.SimpleQueue()
    for task in ("t1", "t2", "t3"):
        for run in (0, 1):
            work.put((run, task, 1))
    supply = FakeSupply()
    run_on_slots([FakeScheduler("a"), FakeScheduler("b")], supply, stopping, work, slots=2)
    ran = [e for e in events if e[0] == "run"]
    assert sorted((name, task) for _k, name, task, _slot in ran) == sorted(
        (n, t) for n in "ab" for t in ("t1", "t2", "t3"))
    assert {slot for *_rest, slot in ran} == {0, 1}  # both slots took work
    assert events[-1] == ("drain",)  # after every episode and every slot's end
    assert sorted(e[1:] for e in events if e[0] == "slot ended") == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert sorted(e[1] for e in events if e[0] == "supply slot ended") == [0, 1]
    assert not any(e[0].startswith("stop") for e in events)
