"""The table of run options (runner.runs.request.RUN_OPTIONS) and what is made from it: the options of
`run`, `validate` and `study run`, the Python API's keywords (RunOptions), run.json's "arguments",
a study file's keys, the ranges. Each consumer is held to the table here, so none can drift."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path
from typing import get_type_hints

import click
import pytest
import typer
from test_layers import runtime_imports

from runner.cli import app
from runner.choices import AccelChoice
from runner.errors import UsageError
from runner.runs.request import (
    KEYWORDS,
    RUN_OPTIONS,
    AgentSetup,
    ResultsTo,
    RunOptions,
    RunRequest,
    Work,
    option_named,
    options_for,
)
from runner.runs.study import Arm, StudyFile

# A command's own parameters that share a name with a run option but are not the table's: a study's
# folder and its resume (each arm's run folder and resume are made from them).
OWN = {"study": {"out", "resume"}}


def command(*path: str) -> click.Command:
    group = typer.main.get_command(app)
    for name in path:
        group = group.commands[name]  # type: ignore[attr-defined]
    return group


@pytest.mark.parametrize("path, name", [(("run",), "run"), (("validate",), "validate"), (("study", "run"), "study")])
def test_each_command_takes_the_tables_options_for_it_and_no_other(path, name):
    params = {p.name: p for p in command(*path).params}
    taken = {row.name for row in options_for(name)}
    assert taken <= set(params), f"missing from {name}: {taken - set(params)}"
    others = {row.name for row in RUN_OPTIONS} & set(params) - taken - OWN.get(name, set())
    assert not others, f"{name} takes {others}, which the table does not give it"
    for row in options_for(name):
        param = params[row.name]
        assert param.opts == [row.flag] and param.required == row.required, row.name
        assert param.envvar == row.env, row.name
        if row.name != "agent":  # its help lists the agents there are (test_cli_input)
            assert param.help == row.help, row.name
        info = param.type_descriptor.parameter_info  # what typer was told: the range among it
        assert (info.min, info.max) == (row.at_least, row.at_most), row.name


def test_the_command_line_gives_the_tables_defaults():
    params = {p.name: p for p in command("run").params}
    for row in options_for("run"):
        if row.required:
            continue
        default = params[row.name].default
        given = {"tags": None, "exclude_tags": None, "tasks": None, "agent_env": None}
        if row.name in given:
            assert default is None, row.name  # no such option: the table's empty default
        elif row.name == "tools":
            assert default == ",".join(row.default)
        else:
            assert default == row.default, row.name


def test_the_apis_keywords_and_their_types_are_the_tables():
    hints = get_type_hints(RunOptions)
    assert not set(KEYWORDS) - set(hints), "add these to RunOptions as the table has them"
    assert not set(hints) - set(KEYWORDS), "RunOptions has these, which the table has not"
    for name, kind in hints.items():
        assert kind == option_named(name).takes, name


def test_the_api_refuses_an_option_the_table_has_not():
    with pytest.raises(TypeError, match="vm_pools"):
        RunRequest.of("s", "nop", vm_pools=2)  # type: ignore[call-arg]


def test_each_part_field_is_a_row_and_each_row_a_part_field_or_read_into_one():
    rows = {(row.part, row.field) for row in RUN_OPTIONS if not row.folded_into}
    parts = {(part, f.name) for part, kind in (("work", Work), ("agent", AgentSetup), ("results", ResultsTo))
             for f in fields(kind)}
    assert parts <= rows
    assert option_named("exclude_tags").folded_into == "tags"
    assert [row.name for row in RUN_OPTIONS].count("agent") == 1 and option_named("agent").field == "name"


def test_run_json_holds_every_option_by_its_name_in_the_tables_order():
    request = RunRequest.of("linux-core", "claude", tasks=["a"], tags=["x"], exclude_tags=["y"], tools="screen",
                            agent_env={"K": "v"}, out="runs/x", accel="tcg", fail_under=0.5)
    arguments = request.arguments()
    assert list(arguments) == [row.name for row in RUN_OPTIONS if not row.folded_into]
    assert json.loads(json.dumps(arguments)) == arguments  # as JSON holds it
    assert (arguments["tasks"], arguments["tags"], arguments["tools"], arguments["agent_env"]) == (
        ["a"], {"include": [["x"]], "exclude": ["y"]}, ["screen"], [["K", "v"]])
    assert (arguments["out"], arguments["accel"], arguments["fail_under"], arguments["selection"]) == (
        "runs/x", "tcg", 0.5, None)


@pytest.mark.parametrize("options, message", [
    ({"vm_pool": 0}, "--vm-pool must be at least 1, not 0"),
    ({"trials": 0}, "--trials must be at least 1"),
    ({"max_steps": 0}, "--max-steps must be at least 1"),
    ({"max_turns": 0}, "--max-turns must be at least 1"),
    ({"timeout_s": 0}, "--timeout must be at least 1"),
    ({"fail_under": 1.5}, "--fail-under must be between 0 and 1, not 1.5"),
])
def test_a_value_out_of_its_range_is_refused_naming_the_flag(options, message):
    with pytest.raises(UsageError, match=message):
        RunRequest.of("linux-core", "nop", **options)
    request = RunRequest.of("linux-core", "nop")
    with pytest.raises(UsageError, match=message):  # a part refuses it however it is made
        request.with_options(**options)


def test_a_study_file_takes_the_tables_options_under_their_study_keys():
    arm_keys = set(Arm.model_fields) - {"name"}
    assert arm_keys == {row.study_key for row in options_for("arm")}
    assert set(StudyFile.model_fields) - {"arms"} == {row.study_key for row in options_for("study file")}
    for model, name in ((Arm, "arm"), (StudyFile, "study file")):
        for row in options_for(name):
            spec = model.model_fields[row.study_key]
            if spec.annotation != row.type:
                continue  # a study file's own spelling (a file, a mapping, none for the default)
            assert spec.default == (row.default if not row.required else spec.default), row.name
            assert spec.is_required() == row.required, row.name
            bounds = {type(m).__name__: m for m in spec.metadata}
            assert (getattr(bounds.get("Ge"), "ge", None), getattr(bounds.get("Le"), "le", None)) == (
                row.at_least, row.at_most), row.name


def test_a_study_file_s_choice_is_made_at_the_edge(tmp_path):
    from runner.runs.study import arm_request, load_study

    path = tmp_path / "study.yaml"
    path.write_text("suite: linux-core\ntasks: [env-var]\naccel: tcg\narms:\n  - {name: a, agent: nop, max_turns: 3}\n")
    study = load_study(path)
    request = arm_request(study, study.spec.arms[0], tmp_path / "out", resume=True, options={"live": True})
    assert request.how.accel is AccelChoice.tcg and request.agent.max_turns == 3 and request.where.live
    assert request.results.out == tmp_path / "out" / "a" and request.results.resume
    assert request.work.selection is None and isinstance(request.work.tasks, tuple)
    assert Path(request.work.suite).name == "linux-core"


def test_a_required_option_has_no_default_and_every_other_one():
    for row in RUN_OPTIONS:
        assert row.required == (row.name in {"suite", "agent"}), row.name
        assert row.required or row.default is not MISSING


def test_the_pool_contract_imports_the_plan_only_for_type_checking():
    assert not {"runner.runs.run_plan", "runner.runs.request"} & runtime_imports("runner.runs.pool")


def test_the_command_lines_values_reach_the_api_as_it_takes_them(monkeypatch):
    from typer.testing import CliRunner

    import runner.api
    from runner.runs.run import RunResult

    got = {}

    def fake_run(suite, agent, *, cache_dir=None, libvirt_uri=None, console=None, **options):
        got.update(suite=suite, agent=agent, cache_dir=cache_dir, options=options)
        return RunResult(Path("out"), {}, [], 0)

    monkeypatch.setattr(runner.api, "run", fake_run)
    result = CliRunner().invoke(app, ["run", "--suite", "linux-core", "--agent", "nop", "--tasks", "a, b",
                                      "--tags", "x,y", "--tags", "z", "--exclude-tags", "q", "--tools", "screen",
                                      "--agent-env", "K=v", "--timeout", "5", "--vm-pool", "2", "--start", "cold",
                                      "--cache-dir", "/tmp/c"])
    assert result.exit_code == 0, result.output
    assert (got["suite"], got["agent"], got["cache_dir"]) == ("linux-core", "nop", Path("/tmp/c"))
    request = RunRequest.of(got["suite"], got["agent"], **got["options"])
    assert (request.work.tasks, request.agent.tools, request.agent.agent_env, request.work.timeout_s) == (
        ("a", "b"), ("screen",), (("K", "v"),), 5)
    assert request.work.tags.include == (("x", "y"), ("z",)) and request.work.tags.exclude == ("q",)
    assert (request.how.vm_pool, request.how.start, request.results.gate) == (2, "cold", "all")
    assert set(got["options"]) == {row.name for row in options_for("run")} - {"suite", "agent", "exclude_tags"}


def test_study_run_hands_its_table_options_to_each_arm(monkeypatch):
    from typer.testing import CliRunner

    import runner.runs.study

    got = {}

    def fake_run_study(settings, path, out, resume, console, options, open_pool):
        got.update(path=path, out=out, resume=resume, options=options)
        return 0

    monkeypatch.setattr(runner.runs.study, "run_study", fake_run_study)
    result = CliRunner().invoke(app, ["study", "run", "s.yaml", "--out", "o", "--resume", "--live", "--live-port", "7"])
    assert result.exit_code == 0, result.output
    assert (got["path"], got["out"], got["resume"]) == (Path("s.yaml"), Path("o"), True)
    assert got["options"] == {"cluster": None, "live": True, "live_port": 7, "live_host": "127.0.0.1",
                              "live_control": False}


def test_the_options_other_commands_share_are_the_tables_rows_with_their_types():
    from typing import get_args

    from runner.cli import options

    shared = {name: alias for name, alias in vars(options).items() if name.endswith("Opt")}
    by_flag = {row.flag: row for row in RUN_OPTIONS}
    assert shared
    for name, alias in shared.items():
        kind, info = get_args(alias)
        row = by_flag[info.default]  # typer keeps an Annotated option's flag as its default
        spelt = options.SPELT.get(row.name)
        assert kind == (spelt.type if spelt and spelt.type is not None else row.type), name
        assert info.help in (row.help, spelt and spelt.help) and (info.min, info.max) == (row.at_least, row.at_most)
