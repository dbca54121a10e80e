"""`run --resume` refuses to add episodes unlike the run's own: each difference is named."""

import json

import pytest
from test_cluster_options import host_image

from runner.config import Settings
from runner.errors import UsageError
from runner.runs.request import RunRequest
from runner.runs.resume_check import resume_differences
from runner.runs.run_plan import plan_run


def started_run(tmp_path, **options) -> tuple[Settings, RunRequest]:
    """A run folder as a first `run` leaves it: its run.json, and one result."""
    cache = tmp_path / "cache"
    host_image(cache)
    settings = Settings.resolve(cache, "test:///default")
    request = RunRequest.of("linux-core", "oracle", tasks=("env-var", "calc-to-file"), out=tmp_path / "run",
                         **options)
    plan = plan_run(settings, request)
    from runner.runs.run import base_provenance

    out = request.results.out
    out.mkdir()
    (out / "run.json").write_text(json.dumps(base_provenance(request, plan, {})))
    (out / "results.jsonl").write_text("")
    return settings, request


def resumed(request: RunRequest, **changes) -> RunRequest:

    return request.with_options(resume=True, **changes)


def test_the_same_options_resume(tmp_path):
    settings, request = started_run(tmp_path, trials=2, max_steps=40)
    plan = plan_run(settings, resumed(request, vm_pool=4, start="cold", record=True))  # where and how it runs may change
    assert plan.previous is not None


@pytest.mark.parametrize("changes, named", [
    ({"agent": "nop"}, "agent: oracle then, nop now"),
    ({"tasks": ("env-var",)}, "tasks: env-var,calc-to-file then, env-var now"),
    ({"trials": 3}, "--trials: 2 then, 3 now"),
    ({"tools": ("screen",)}, "--tools: ['screen', 'mouse', 'keyboard'] then, ['screen'] now"),
    ({"max_steps": 10}, "--max-steps: 40 then, 10 now"),
    ({"timeout_s": 60}, "--timeout-s: None then, 60 now"),
])
def test_a_resume_unlike_the_run_is_refused_naming_the_difference(tmp_path, changes, named):
    settings, request = started_run(tmp_path, trials=2, max_steps=40)
    with pytest.raises(UsageError) as info:
        plan_run(settings, resumed(request, **changes))
    assert named in info.value.message and "--resume would add episodes unlike" in info.value.message


def test_another_image_is_named_by_its_sha256():
    previous = {"agent": {"name": "oracle"}, "image": {"sha256": "a" * 64}, "suite": {"tasks": ["t"]}, "arguments": {}}
    found = resume_differences(previous, RunRequest.of("s", "oracle").arguments(), "oracle", "b" * 64, ["t"])
    assert found == [f"image: sha256 {'a' * 16}... then, {'b' * 16}... now"]


def test_a_walks_baseline_adds_each_batch_and_the_run_lists_every_task_tried(tmp_path):
    # tasks select's nop baseline resumes one run folder batch after batch, each with new tasks
    from runner.runs.run import base_provenance

    settings, request = started_run(tmp_path, adds_tasks=True)
    next_batch = resumed(request, tasks=("folder-tree", "zip-roundtrip"))
    plan = plan_run(settings, next_batch)
    assert plan.previous is not None
    assert base_provenance(next_batch, plan, {})["suite"]["tasks"] == ["env-var", "calc-to-file", "folder-tree",
                                                                       "zip-roundtrip"]
    with pytest.raises(UsageError):  # another agent is still refused
        plan_run(settings, resumed(next_batch, agent="nop"))
