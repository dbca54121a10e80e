"""The layers of runner/ (docs/architecture.md), enforced over the source: no module imports from a
layer above its own, no contract module imports an implementation, and there are no import
cycles. Imports are read with `ast`, those inside functions included; an import under
`if TYPE_CHECKING:` is an annotation, not a dependency, and is not counted."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "runner"

# Lowest first. A module belongs to the first layer with a pattern that matches it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("runner", "runner.errors", "runner.config", "runner.console", "runner.net", "runner.owner",
              "runner.screen", "runner.interrupts", "runner.workers", "runner.registry")),
    ("backends", ("runner.display", "runner.display.*", "runner.guest", "runner.guest.*", "runner.hypervisor",
                  "runner.hypervisor.*")),
    ("scoring rules", ("runner.scoring", "runner.scoring.writeset", "runner.scoring.verdict", "runner.scoring.blame",
                       "runner.scoring.stats", "runner.scoring.ext4_reader", "runner.scoring.disk_listing")),
    ("guests", ("runner.profiles", "runner.profiles.*", "runner.images", "runner.images.catalog")),
    ("tasks", ("runner.tasks", "runner.tasks.*", "runner.scoring.quarantine", "runner.scoring.safety",
               "runner.images.scratch", "runner.images.warm_state", "runner.images.start_plan",
               "runner.episode_domain")),
    ("benchmarks", ("runner.benchmarks", "runner.benchmarks.*")),
    ("episode VM", ("runner.episode", "runner.images.warming", "runner.images.linux_images", "runner.images.windows_11",
                    "runner.images.windows_media", "runner.images.windows_build_watch", "runner.images.builders", "runner.gc",
                    "runner.runs.admission")),
    ("agents and MCP", ("runner.agents", "runner.agents.*", "runner.mcp", "runner.mcp.*", "runner.selfcheck")),
    ("run records", ("runner.runs", "runner.runs.results", "runner.runs.recording", "runner.runs.report",
                     "runner.runs.provenance", "runner.runs.inspect_export", "runner.runs.folders",
                     "runner.runs.compare")),
    ("live view", ("runner.live", "runner.live.*")),
    ("runs", ("runner.runs.*", "runner.session", "runner.doctor")),
    ("cluster", ("runner.cluster", "runner.cluster.*")),
    ("inspect sandbox", ("runner.sandbox", "runner.sandbox.*")),
    ("commands", ("runner.api", "runner.cli", "runner.cli.*", "runner.__main__")),
]

# The seams' interfaces: none may import a module that implements one.
CONTRACTS = {"runner.display.base", "runner.guest.base", "runner.hypervisor.host", "runner.profiles.base",
             "runner.agents.base", "runner.live.board", "runner.runs.pool"}
IMPLEMENTATIONS = {"runner.display.vnc", "runner.guest.ssh", "runner.guest.winrm", "runner.guest.qga",
                   "runner.hypervisor.libvirt_host", "runner.profiles.linux", "runner.profiles.windows",
                   "runner.runs.scheduler", "runner.runs.local_pool", "runner.cluster.driver",
                   "runner.runs.live_sources", "runner.agents.builtin", "runner.agents.command",
                   "runner.agents.model_cli", "runner.agents.scripted"}


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def runtime_imports(module: str) -> set[str]:
    """The runner modules MODULE imports when it runs (lazy imports in functions included)."""
    found: set[str] = set()

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if not type_only and isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("runner"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
        elif not type_only and isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("runner"))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(ast.parse(MODULES[module].read_text()), False)
    found.discard(module)
    return found


def layer_of(module: str) -> int:
    for number, (_name, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return number
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and to docs/architecture.md")


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_from_a_lower_layer_to_a_higher_one(module):
    upward = {dep: LAYERS[layer_of(dep)][0] for dep in runtime_imports(module) if layer_of(dep) > layer_of(module)}
    assert not upward, f"{module} ({LAYERS[layer_of(module)][0]}) imports from above: {upward}"


@pytest.mark.parametrize("contract", sorted(CONTRACTS))
def test_a_contract_imports_no_implementation(contract):
    assert not runtime_imports(contract) & IMPLEMENTATIONS


def test_there_are_no_import_cycles():
    graph = {m: runtime_imports(m) & MODULES.keys() for m in MODULES}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := walk(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = walk(module)
            assert cycle is None, " -> ".join(cycle)


def test_the_rules_can_fail():
    """The checker sees an upward import, and a cycle, when there is one."""
    assert layer_of("runner.cli") > layer_of("runner.runs.run") > layer_of("runner.episode")
    assert "runner.runs.results" in runtime_imports("runner.runs.report")
    assert "runner.display.keys" in runtime_imports("runner.scoring.safety")


def rendered_layers() -> str:
    """LAYERS as docs/architecture.md shows them: highest first, each pattern without `runner.`."""
    lines = []
    for name, patterns in reversed(LAYERS):
        shown = [p.removeprefix("runner.") if p != "runner" else "runner (the package)" for p in patterns]
        line = f"{name:<16}"
        for index, pattern in enumerate(shown):
            piece = pattern + ("," if index < len(shown) - 1 else "")
            if len(line) + 1 + len(piece) > 100 and line.strip():
                lines.append(line.rstrip())
                line = " " * 16
            line += ("" if line.endswith(" ") else " ") + piece
        lines.append(line.rstrip())
    return "\n".join(lines)


def test_the_docs_layer_map_is_the_one_enforced_here():
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    block = doc.split("## Layers", 1)[1].split("```", 2)[1].strip("\n")
    assert block == rendered_layers(), "docs/architecture.md's layer map differs; it should read:\n" + rendered_layers()
