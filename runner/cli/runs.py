"""`cu-run run|validate|report|compare|export`: runs, and what they left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from runner.choices import AccelChoice, Gate, NetMode, StartChoice
from runner.cli.options import (
    _comma_list,
    _key_values,
    AccelOpt,
    AgentOpt,
    app,
    CacheDir,
    ClusterOpt,
    con,
    err,
    export_app,
    ImageOpt,
    LibvirtUri,
    LiveControlOpt,
    LiveHostOpt,
    LiveOpt,
    NetOpt,
    NetHostsOpt,
    LivePortOpt,
    OutOpt,
    PoolOpt,
    RecordOpt,
    SelectionOpt,
    StartOpt,
    SuiteOpt,
    TasksOpt,
    TrialsOpt,
    TagsOpt,
    ExcludeTagsOpt,
    AssetsOpt,
    EvaluatorsOpt,
    tag_filter,
)


@app.command()
def run(
    suite: SuiteOpt,
    agent: AgentOpt,
    tasks: TasksOpt = None,
    tags: TagsOpt = None,
    exclude_tags: ExcludeTagsOpt = None,
    assets: AssetsOpt = None,
    evaluators: EvaluatorsOpt = None,
    vm_pool: PoolOpt = 1,
    trials: TrialsOpt = 1,
    out: OutOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="finish the run in --out, redoing nothing finished")] = False,
    fail_under: Annotated[float | None, typer.Option("--fail-under", help="exit 4 if the success rate is lower")] = None,
    image: ImageOpt = None,
    tools: Annotated[str, typer.Option("--tools", help="MCP tool sets the agent may use")] = "screen,mouse,keyboard",
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="tool calls per episode; then timeout")] = None,
    agent_cmd: Annotated[str | None, typer.Option("--agent-cmd", help="the executable for --agent command")] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", help="model turns for claude and codex")] = 50,
    agent_script: Annotated[str, typer.Option(
        "--agent-script", help="the scripted agent's script file in each task")] = "ui_oracle.yaml",
    record: RecordOpt = False,
    net: NetOpt = NetMode.live,
    net_hosts: NetHostsOpt = None,
    gate: Annotated[Gate, typer.Option(
        "--gate", help="--fail-under over all tasks, or stable: flaky tasks left out")] = Gate.all,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    cluster: ClusterOpt = None,
    selection: SelectionOpt = None,
    mcp_server: Annotated[str | None, typer.Option(
        "--mcp-server", help="an external MCP server's command, per episode ({vnc}, {vnc_host}, {vnc_port} filled in), "
                             "instead of cu-run's tools")] = None,
    mcp_server_url: Annotated[str | None, typer.Option("--mcp-server-url", help="an external MCP server's URL")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="the model of the claude or codex agent, passed to its CLI and recorded in run.json "
                        "[default: the CLI's own]")] = None,
    agent_env: Annotated[list[str] | None, typer.Option(
        "--agent-env", help="KEY=VALUE in the agent's environment, over the runner's (repeat it)")] = None,
    timeout: Annotated[int | None, typer.Option(
        "--timeout", min=1, help="every task's agent time limit in seconds [default: each task's timeout_s]")] = None,
    append_prompt: Annotated[str, typer.Option(
        "--append-prompt", help="text after cu-run's system prompt, for claude and codex")] = "",
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Run an agent over a suite on a pool of VMs; results, artifacts and a summary go to --out."""
    from runner.api import run as run_suite

    result = run_suite(suite, agent, tasks=_comma_list(tasks), tags=tag_filter(tags, exclude_tags), cache_dir=cache_dir,
                       libvirt_uri=libvirt_uri, console=err, vm_pool=vm_pool, trials=trials, out=out, resume=resume,
                       fail_under=fail_under, image=image, accel=accel, tools=_comma_list(tools), max_steps=max_steps,
                       agent_cmd=agent_cmd, max_turns=max_turns, start=start, gate=gate, agent_script=agent_script,
                       record=record, cluster=cluster, selection=selection, mcp_server=mcp_server,
                       mcp_server_url=mcp_server_url, live=live, live_port=live_port, live_host=live_host,
                       live_control=live_control, model=model, agent_env=_key_values(agent_env or []),
                       timeout_s=timeout, append_prompt=append_prompt, assets=assets, evaluators=evaluators, net=net,
                       net_hosts=net_hosts)
    con.print(f"results in {result.out_dir}")
    raise typer.Exit(result.exit_code)


@app.command()
def validate(
    suite: SuiteOpt,
    tasks: TasksOpt = None,
    tags: TagsOpt = None,
    exclude_tags: ExcludeTagsOpt = None,
    assets: AssetsOpt = None,
    evaluators: EvaluatorsOpt = None,
    vm_pool: PoolOpt = 1,
    trials: TrialsOpt = 1,
    out: OutOpt = None,
    image: ImageOpt = None,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    record: RecordOpt = False,
    net: NetOpt = NetMode.live,
    net_hosts: NetHostsOpt = None,
    cluster: ClusterOpt = None,
    selection: SelectionOpt = None,
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Prove a suite sound: the oracle must pass every task and the nop agent fail every one."""
    from runner.api import validate as validate_suite

    found = validate_suite(suite, tasks=_comma_list(tasks), tags=tag_filter(tags, exclude_tags), out=out,
                           cache_dir=cache_dir, libvirt_uri=libvirt_uri, console=err, vm_pool=vm_pool, trials=trials,
                           image=image, accel=accel, start=start, record=record, net=net, net_hosts=net_hosts,
                           cluster=cluster, selection=selection,
                           live=live, live_port=live_port, live_host=live_host, live_control=live_control,
                           assets=assets, evaluators=evaluators)
    raise typer.Exit(found.exit_code)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="a run's --out folder, or validate's")]) -> None:
    """Regenerate DIR/report.html and DIR/junit.xml from the run's results and episode folders."""
    from runner.records.folders import is_validation_folder, run_folders
    from runner.records.report import write_reports, write_validation_index

    for folder in run_folders(run_dir):
        html_path, junit_path = write_reports(folder)
        if not (folder / "results.jsonl").is_file():
            con.print(f"nothing has finished yet in {escape(str(folder))}: the report is empty "
                      "(run the same command with --resume to continue)")
        con.print(f"{escape(str(html_path))}\n{escape(str(junit_path))}")
    if is_validation_folder(run_dir):
        con.print(escape(str(write_validation_index(run_dir))))


@export_app.command("inspect")
def export_inspect_log(
    run_dir: Annotated[Path, typer.Argument(help="a run's --out folder, or validate's")],
    out: Annotated[Path | None, typer.Option("--out", help="the log file [default: RUN_DIR/inspect.eval]; for a "
                                                           "validate folder, a folder for oracle.eval and nop.eval")] = None,
) -> None:
    """Write the run as an Inspect eval log: `inspect view` opens it, read_eval_log reads it."""
    from runner.records.folders import is_validation_folder, run_folders
    from runner.records.inspect_export import export_inspect

    if not is_validation_folder(run_dir):
        con.print(escape(str(export_inspect(run_dir, out))))
        return
    for folder in run_folders(run_dir):  # a validate folder: a log per run, OUT a folder for them
        con.print(escape(str(export_inspect(folder, out / f"{folder.name}.eval" if out else None))))


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="the baseline run folder")],
    run_b: Annotated[Path, typer.Argument(help="the run to compare with it")],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Per task and overall: the change in success from A to B, and whether it is beyond noise."""
    from runner.api import compare as compare_runs

    result = compare_runs(run_a, run_b).data
    if as_json:
        print(json.dumps(result, indent=2))
        return

    def side(s: dict | None) -> str:
        return "-" if s is None or s["rate"] is None else f"{s['passes']}/{s['scored']} ({s['rate']:.2f})"

    for warning in result["warnings"]:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    table = Table("task", f"A: {escape(result['label_a'])}", f"B: {escape(result['label_b'])}", "change",
                  "p (Fisher)", "beyond noise")
    for row in result["tasks"]:
        delta = "-" if row["delta"] is None else f"{row['delta']:+.2f}"
        p = "-" if row["p_value"] is None else f"{row['p_value']:.3f}"
        verdict = "[bold]yes[/]" if row["beyond_noise"] else ("too few trials" if "too few" in row.get("note", "") else "no")
        table.add_row(escape(row["task"]), side(row["a"]), side(row["b"]), delta, p, verdict)
    o = result["overall"]
    table.add_row("overall", side(o["a"]), side(o["b"]), f"{o['mean_task_delta']:+.2f} (mean per task)",
                  f"95% CI [{o['ci95'][0]:+.2f}, {o['ci95'][1]:+.2f}]", "[bold]yes[/]" if o["beyond_noise"] else "no")
    con.print(table)
    con.print("per task: Fisher's exact test (p < 0.05); overall: paired bootstrap over tasks (interval leaves out 0)")
