"""A two-sample Inspect task on cu-run's linux-test VMs, no model needed:

    inspect eval examples/inspect_task.py --model mockllm/model

Both samples are linux-core's folder-tree task ("create projects/alpha/docs and projects/beta/docs
in your home"). A scripted solver plays each sample's steps through Inspect's own computer()
tool, which the `cu-run` sandbox serves from the VM's screen: it clicks the terminal on the
desktop and types a command. One sample types the whole answer and passes; the other stops
halfway and fails, as designed. cu-run's scorer gives the verdict: the task's own verifier,
run through the admin channel after the desktop user's processes are frozen.

The log (`inspect view`) shows each step as a tool call with the screenshot it returned, and the
score's metadata names the episode's folder (screens, setup and verifier logs, the trajectory).
"""

from inspect_ai import Task, task
from inspect_ai.model import ChatMessageAssistant, execute_tools
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolCall, computer

from cu_run.inspect import cu_run_scorer, task_sample

TERMINAL = {"action": "left_click", "coordinate": [200, 150]}  # the terminal on linux-test's desktop
WAIT = {"action": "wait", "duration": 3}


def typed(command: str) -> dict:
    return {"action": "type", "text": command + "\n"}


SOLVES = [TERMINAL, WAIT, typed("mkdir -p ~/projects/alpha/docs ~/projects/beta/docs"), WAIT]
STOPS_HALFWAY = [TERMINAL, WAIT, typed("mkdir -p ~/projects/alpha/docs"), WAIT]


@solver
def scripted() -> Solver:
    """Plays the sample's `steps` as computer() calls, each one in the transcript."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        tools = [computer()]
        for number, step in enumerate(state.metadata["steps"], 1):
            call = ToolCall(id=f"step-{number}", function="computer", arguments=step)
            state.messages.append(ChatMessageAssistant(content=f"step {number}: {step['action']}", tool_calls=[call]))
            result = await execute_tools(state.messages, tools)
            state.messages.extend(result.messages)
        return state

    return solve


@task
def folder_tree_two_ways() -> Task:
    return Task(
        dataset=[task_sample("linux-core", "folder-tree", id="solves", metadata={"steps": SOLVES}),
                 task_sample("linux-core", "folder-tree", id="stops-halfway", metadata={"steps": STOPS_HALFWAY})],
        solver=scripted(),
        scorer=cu_run_scorer(),
        sandbox=("cu-run", "linux-test"),
    )
