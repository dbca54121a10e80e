"""One registry of benchmarks (runner/benchmarks/registry.py): a new benchmark is one module that
registers itself. A throwaway benchmark, registered here and nowhere else, is imported by the
CLI, classified by its own asset hosts and missing apps, and scored with its own guest steps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from runner.benchmarks import linux_steps, registry
from runner.benchmarks.host_scoring import steps_of
from runner.benchmarks.registry import Benchmark, Profile
from runner.cli import app

REPO = Path(__file__).resolve().parents[2]
DATA = next((p for p in (REPO.parent / "shared" / "data", Path("/work/shared/data")) if p.is_dir()), None)
TASK = "e0df059f-28a6-4169-924f-b9623e7184cc"  # OSWorld's renamed folder: an offline os task


@pytest.fixture
def toybench():
    """A benchmark that exists only in this test: OSWorld's layout under its own root, its own
    asset host, and an app of the os domain it says the guest lacks."""
    toy = registry.register(Benchmark(
        name="toybench", examples_root="toy_examples",
        profile=Profile("linux", "linux-desktop", ".sh", linux_steps.STEPS_SH, linux_steps.setup_script,
                        linux_steps.collect_script, frozenset(linux_steps.COLLECTORS),
                        lambda _task, _setup: ["toybench's own fidelity note"]),
        steps=linux_steps, asset_hosts=("assets.toy.example",), missing_apps={"os": "the toy OS app is not here"}))
    yield toy
    registry.unregister("toybench")


@pytest.mark.skipif(DATA is None, reason="the benchmarks' task files (../shared/data) are not here")
def test_a_benchmark_registered_by_one_module_imports_classifies_and_scores(toybench, tmp_path):
    src = tmp_path / "toy-checkout"
    task_file = DATA / "osworld-f6cee71" / "evaluation_examples" / "examples" / "os" / f"{TASK}.json"
    (src / "toy_examples" / "examples" / "os").mkdir(parents=True)
    shutil.copy(task_file, src / "toy_examples" / "examples" / "os" / task_file.name)
    assert "toybench" in registry.names()
    out = tmp_path / "suite"
    result = CliRunner().invoke(app, ["tasks", "import", "toybench", str(src), "--out", str(out), "--version", "t1"])
    assert result.exit_code == 0, result.output
    spec = yaml.safe_load((out / TASK / "task.yaml").read_text())
    assert spec["source"]["bench"] == "toybench" and spec["image"] == "linux-desktop"
    assert "toybench's own fidelity note" in spec["fidelity"]
    assert any("the toy OS app is not here" in reason for reason in spec["excluded"])  # its missing apps
    assert json.loads((out / "import.json").read_text())["bench"] == "toybench"
    task = SimpleNamespace(spec=SimpleNamespace(source=SimpleNamespace(bench="toybench")))
    assert steps_of(task) is linux_steps


def test_an_unknown_benchmark_is_one_clear_usage_error():
    result = CliRunner().invoke(app, ["tasks", "import", "nobench", "/tmp", "--out", "/tmp/never"])
    assert result.exit_code == 2 and "'nobench' is not one of osworld, waa" in result.output


def test_a_name_is_registered_once(toybench):
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(Benchmark(**{**toybench.__dict__, "asset_hosts": ()}))
