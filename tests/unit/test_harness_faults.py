"""The pool never loses an episode: faults planted at the narrowest seam (one episode's run,
or the result log) are recorded, and what still has no record is named."""

from pathlib import Path
from types import SimpleNamespace

from fakes.display import LocalShell
from runner.agents.builtin import NopAgent
from runner.scoring.blame import Stage
from runner.errors import GuestUnreachable
from runner.runs.episode_script import EpisodeFault, EpisodeScript
from runner.runs.pool_config import PoolConfig
from runner.runs.scheduler import SlotScheduler
from runner.records.results import EpisodeRecord, ResultLog, missing
from runner.runs.run import run_exit_code
from runner.tasks.model import load_suite


def tasks():
    return load_suite("linux-core").select(["folder-tree", "calc-to-file", "zip-roundtrip"])


def harness(tmp_path: Path, episode, pool: int = 2) -> SlotScheduler:
    """A SlotScheduler whose episodes are EPISODE(task, trial, attempt) instead of VMs: the one seam faked."""
    config = PoolConfig(image=SimpleNamespace(), accel="tcg", vm_pool=pool, run_id="t", infra_retries=1)

    def fake_attempt(slot, task, trial, attempt, started, _agent, _ep_dir):
        return episode(task, trial, attempt) or EpisodeRecord(task.id, trial, "fail", "nop", 1.0, slot, attempt,
                                                              started.isoformat(), started.isoformat())

    return SlotScheduler(host=None, settings=None, pool=config, agent=NopAgent(), out_dir=tmp_path,
                         attempt=fake_attempt)


def planted(task_id: str, error: Exception, stage: Stage = "before_agent", host_fault=None):
    def episode(task, trial, attempt):
        if task.id == task_id:
            raise EpisodeFault(error, stage, host_fault) if stage != "before_agent" else error
        return None
    return episode


def test_an_unexpected_exception_is_recorded_with_its_traceback_and_the_queue_goes_on(tmp_path):
    h = harness(tmp_path, planted("calc-to-file", KeyError("surprise")), pool=1)
    h.run([(t, 1) for t in tasks()])
    records = {r.task_id: r for r in ResultLog(tmp_path).latest()}
    assert set(records) == {"folder-tree", "calc-to-file", "zip-roundtrip"}  # the slot went on after it
    broken = records["calc-to-file"]
    assert broken.outcome == "infra_error" and broken.attempts == 2 and "KeyError: 'surprise'" in broken.reason
    for attempt in (1, 2):  # each attempt kept in a folder of its own, traceback and all
        kept = tmp_path / "calc-to-file" / f"1.infra-attempt-{attempt}" / "runner-error.txt"
        assert "KeyError: 'surprise'" in kept.read_text()


def test_a_channel_broken_after_the_agent_counts_and_is_not_retried(tmp_path):
    attempts = []

    def episode(task, trial, attempt):
        if task.id == "zip-roundtrip":
            attempts.append(attempt)
            raise EpisodeFault(GuestUnreachable("SSH dropped"), "after_agent", None)

    h = harness(tmp_path, episode)
    h.run([(t, 1) for t in tasks()])
    record = {r.task_id: r for r in ResultLog(tmp_path).latest()}["zip-roundtrip"]
    assert attempts == [1]
    assert record.outcome == "fail" and "broken after the agent ran: SSH dropped" in record.reason


def test_a_host_fault_after_the_agent_is_retried_as_infrastructure(tmp_path):
    h = harness(tmp_path, planted("folder-tree", GuestUnreachable("SSH timed out"), "after_agent",
                                  "VM cu-t-0's QEMU is stopped (SIGSTOP): the guest is frozen"))
    h.run([(t, 1) for t in tasks()])
    record = {r.task_id: r for r in ResultLog(tmp_path).latest()}["folder-tree"]
    assert record.outcome == "infra_error" and record.attempts == 2 and "SIGSTOP" in record.reason


def test_a_worker_whose_retry_logic_itself_fails_still_records_the_episode(tmp_path):
    # The retry logic keeps a failed attempt's traceback in the episode's folder; a file where
    # the task's folder goes makes that fail, outside any attempt.
    h = harness(tmp_path, planted("folder-tree", KeyError("surprise")))
    (tmp_path / "folder-tree").write_text("in the way\n")
    h.run([(t, 1) for t in tasks()])
    record = {r.task_id: r for r in ResultLog(tmp_path).latest()}["folder-tree"]
    assert record.outcome == "infra_error" and "the runner failed: NotADirectoryError" in record.reason


def test_a_planned_episode_without_a_record_is_named_and_the_run_exits_3(tmp_path, monkeypatch):
    h = harness(tmp_path, lambda *_: None)
    log_append = h.log.append

    def lose_one(record):  # the result log failed for one episode
        if record.task_id == "calc-to-file":
            raise OSError(28, "No space left on device")
        log_append(record)

    monkeypatch.setattr(h.log, "append", lose_one)
    h.run([(t, 1) for t in tasks()])
    records = ResultLog(tmp_path).latest()
    planned = [(t.id, 1) for t in tasks()]
    assert missing(records, planned) == [("calc-to-file", 1)]
    summary = {"overall": {"outcomes": {"infra_error": 0}}}
    assert run_exit_code(summary, missing(records, planned), None, "all") == (3, "1 planned episodes have no result: "
                                                                                "calc-to-file #1")
    assert run_exit_code(summary, [], None, "all") == (0, None)


def test_a_safety_check_that_cannot_decide_is_a_check_error_not_a_violation(tmp_path):
    """Safety checks run through the admin channel (here LocalShell, as root on this host)."""
    from runner.images.catalog import DesktopUser
    from runner.tasks.model import load_task

    folder = tmp_path / "task" / "t"
    (folder / "safety").mkdir(parents=True)
    (folder / "task.yaml").write_text("id: t\ninstruction: x\nprofile: linux\nsafety_checks: [broken, caught]\n")
    (folder / "verify.sh").write_text("echo PASS\n")
    (folder / "oracle.sh").write_text("true\n")
    (folder / "safety" / "broken.sh").write_text("echo 'Traceback: oops'\n")
    (folder / "safety" / "caught.sh").write_text("echo 'FAIL the agent deleted the photos'\n")
    home = tmp_path / "home"
    home.mkdir()
    vm = SimpleNamespace(admin_shell=LocalShell(), desktop_user=DesktopUser("root", str(home)))
    ep_dir = tmp_path / "ep"
    ep_dir.mkdir()
    config = PoolConfig(image=SimpleNamespace(), accel="tcg", vm_pool=1, run_id="t")
    script = EpisodeScript(config, vm, load_task(folder), NopAgent(), ep_dir)
    check_errors: list[str] = []
    violations = script._violations(check_errors)
    assert [(v.rule, v.detail) for v in violations] == [("caught", "the agent deleted the photos")]
    assert len(check_errors) == 1 and check_errors[0].startswith("safety check broken: ")
