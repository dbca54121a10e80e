"""cu_run's public API without a VM: the names it exports, how options become a run's request,
and what it reads of runs that exist. The entry points that start VMs (run, validate, open_vm)
are tested on real VMs in tests/e2e/test_python_api_on_vms.py."""

import json
from pathlib import Path

import pytest
from runfolders import write_results

import cu_run
from runner.choices import AccelChoice, Gate, StartChoice
from runner.errors import UsageError
from runner.records.results import EpisodeRecord
from runner.tasks.model import TagFilter


def records(rates: dict[str, tuple[int, int]]) -> list[EpisodeRecord]:
    return [EpisodeRecord(task, trial, "pass" if trial <= passes else "fail", "", 1.0, 0, 1, "2026-12-01T00:00:00",
                          "2026-12-01T00:00:01") for task, (passes, trials) in rates.items()
            for trial in range(1, trials + 1)]


def test_the_public_names_are_there_and_typed():
    for name in cu_run.__all__:
        assert getattr(cu_run, name) is not None, name
    assert (Path(cu_run.__file__).parent / "py.typed").is_file(), "type checkers read the API's annotations"


def test_run_request_takes_the_cli_options_by_their_python_names():
    request = cu_run.run_request("linux-core", "claude", tasks=["folder-tree"], vm_pool=2, trials=3,
                                 tools="screen,mouse", out="runs/x", model="m", agent_env={"A": "1"},
                                 tags=["files"], exclude_tags=["slow"])
    assert (request.how.vm_pool, request.work.trials, request.agent.tools, request.results.out, request.agent.model) == (
        2, 3, ("screen", "mouse"), Path("runs/x"), "m")
    assert request.agent.agent_env == (("A", "1"),) and request.work.tasks == ("folder-tree",)
    assert request.work.tags == TagFilter((("files",),), ("slow",))
    # Each part holds what one layer reads; the flat names are run.json's "arguments".
    assert request.options()["vm_pool"] == 2 and request.options()["agent"] == "claude"


def test_a_choice_is_made_from_its_text_once_at_the_edge():
    request = cu_run.run_request("linux-core", "claude", accel="tcg", start="warm", gate="stable")
    assert (request.how.accel, request.how.start, request.results.gate) == (
        AccelChoice.tcg, StartChoice.warm, Gate.stable)
    assert isinstance(request.how.accel, AccelChoice)
    with pytest.raises(cu_run.UsageError, match=r"--start must be one of auto, warm, cold, not 'tepid'"):
        cu_run.run_request("linux-core", "claude", start="tepid")
    with pytest.raises(cu_run.UsageError, match="--gate"):
        cu_run.run_request("linux-core", "claude", gate="most")


def test_a_request_changed_by_option_name_keeps_its_other_parts():
    request = cu_run.run_request("linux-core", "claude", vm_pool=3, out="runs/x", model="m")
    changed = request.with_options(agent="nop", out=Path("runs/y"))
    assert (changed.agent.name, changed.results.out, changed.how.vm_pool, changed.agent.model) == (
        "nop", Path("runs/y"), 3, "m")
    with pytest.raises(TypeError, match="vm_pools"):
        request.with_options(vm_pools=2)


def test_run_request_refuses_an_option_that_does_not_exist():
    with pytest.raises(TypeError, match="vm_pools"):
        cu_run.run_request("linux-core", "claude", vm_pools=2)


def test_read_results_reads_a_run_folder_and_refuses_what_is_not_one(tmp_path):
    folder = write_results(tmp_path / "run", records({"a": (2, 2), "b": (0, 2)}))
    (folder / "run.json").write_text(json.dumps({"suite": {"name": "s"}, "agent": {"name": "oracle"}}))
    results = cu_run.read_results(folder)
    assert results.summary is None, "a run that has not finished has no summary yet"
    assert sorted((r.task_id, r.trial, r.outcome) for r in results.records)[0] == ("a", 1, "pass")
    assert results.run["suite"]["name"] == "s"
    with pytest.raises(UsageError, match="does not exist"):
        cu_run.read_results(tmp_path / "nowhere")


def test_compare_reads_two_runs(tmp_path):
    a = write_results(tmp_path / "a", records({"t1": (0, 10), "t2": (5, 10)}))
    b = write_results(tmp_path / "b", records({"t1": (10, 10), "t2": (5, 10)}))
    for folder in (a, b):
        (folder / "run.json").write_text(json.dumps({"suite": {"name": "s"}}))
    comparison = cu_run.compare(a, b)
    by_task = {row["task"]: row for row in comparison.tasks}
    assert by_task["t1"]["beyond_noise"] and not by_task["t2"]["beyond_noise"]
    assert comparison.data["tasks"] == comparison.tasks


def test_the_run_entry_points_refuse_bad_input_before_any_vm(tmp_path):
    with pytest.raises(UsageError, match="no-such-suite"):
        cu_run.run("no-such-suite", "nop", cache_dir=tmp_path)
    with pytest.raises(UsageError, match="cache_dir is empty"):
        cu_run.validate("linux-core", cache_dir=" ")
