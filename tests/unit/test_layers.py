"""The layers of runner/ (docs/architecture.md), enforced over the source: no module imports from a
layer above its own, no contract module imports an implementation, and there are no import
cycles. Imports are read with `ast`, those inside functions included. An import under
`if TYPE_CHECKING:` is an annotation: it does not count for the layers of modules, but it counts
for cycles (a circle of types is one a reader follows all the same) and in the folder picture."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "runner"

# Lowest first. Every layer but the base is whole packages (folders); the base is the modules at
# the top of runner/, and the commands layer holds the package's two entry points beside cli/.
BASE = ("runner", "runner.errors", "runner.config", "runner.console", "runner.sockets", "runner.owner", "runner.screen",
        "runner.interrupts", "runner.workers", "runner.registry", "runner.choices", "runner.assets",
        "runner.frozen_clock")
ENTRY_POINTS = ("runner.api", "runner.__main__")
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", BASE),
    ("backends", ("runner.display.*", "runner.guest.*", "runner.hypervisor.*")),
    ("network", ("runner.network.*",)),
    ("guests", ("runner.profiles.*",)),
    ("images", ("runner.images.*",)),
    ("tasks", ("runner.tasks.*",)),
    ("scoring", ("runner.scoring.*",)),
    ("benchmarks", ("runner.benchmarks.*",)),
    ("episode VM", ("runner.vm.*",)),
    ("agents and MCP", ("runner.agents.*", "runner.mcp.*")),
    ("run records", ("runner.records.*",)),
    ("live view", ("runner.live.*",)),
    ("runs", ("runner.runs.*",)),
    ("cluster", ("runner.cluster.*",)),
    ("inspect sandbox", ("runner.sandbox.*",)),
    ("audit", ("runner.audit.*",)),
    ("commands", ("runner.cli.*", *ENTRY_POINTS)),
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
    return imports(module, with_annotations=False)


def imports(module: str, *, with_annotations: bool) -> set[str]:
    """The runner modules MODULE imports; WITH_ANNOTATIONS, those under TYPE_CHECKING too."""
    found: set[str] = set()

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, not with_annotations)
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
        # "pkg.*" is the package's folder: its __init__ (named pkg) and every module in it.
        if any(fnmatch.fnmatchcase(module, p) or (p.endswith(".*") and module == p[:-2]) for p in patterns):
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
    """Annotations included."""
    cycle = cycle_in({m: imports(m, with_annotations=True) & MODULES.keys() for m in MODULES})
    assert cycle is None, " -> ".join(cycle or [])


def folder_of(module: str) -> str:
    """The folder picture's node for MODULE: its package; the base's modules are the top of
    runner/, and each entry point is a node of its own."""
    if module in BASE or module in ENTRY_POINTS:
        return "runner" if module in BASE else module
    return module if (MODULES[module].name == "__init__.py") else module.rsplit(".", 1)[0]


def folder_picture() -> dict[str, set[str]]:
    """Folder -> the folders it imports, annotations included: the picture a reader sees."""
    picture: dict[str, set[str]] = {}
    for module in MODULES:
        deps = imports(module, with_annotations=True) & MODULES.keys()
        picture.setdefault(folder_of(module), set()).update(folder_of(d) for d in deps)
    for folder, deps in picture.items():
        deps.discard(folder)
    return picture


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 visiting, 2 done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := walk(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def test_every_folder_is_one_layer():
    layers: dict[str, set[str]] = {}
    for module in MODULES:
        layers.setdefault(folder_of(module), set()).add(LAYERS[layer_of(module)][0])
    mixed = {folder: names for folder, names in layers.items() if len(names) > 1}
    assert not mixed, f"folders that straddle layers: {mixed}"


def test_the_folder_picture_has_no_import_running_up():
    upward = [f"{folder} -> {dep}" for folder, deps in sorted(folder_picture().items()) for dep in sorted(deps)
              if layer_of(dep) > layer_of(folder if folder != "runner" else "runner.errors")]
    assert not upward, "folders that import from a folder above them (annotations included): " + ", ".join(upward)


def test_the_folder_picture_has_no_circle():
    cycle = cycle_in(folder_picture())
    assert cycle is None, "a circle of folders (annotations included): " + " -> ".join(cycle or [])


def test_the_rules_can_fail():
    """The checker sees an upward import, and a cycle, when there is one."""
    assert layer_of("runner.cli") > layer_of("runner.runs.run") > layer_of("runner.vm.episode")
    assert "runner.records.results" in runtime_imports("runner.records.report")
    assert "runner.display.keys" in runtime_imports("runner.scoring.safety")
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert "runner.guest.qga" in imports("runner.profiles.parts", with_annotations=True)
    assert "runner.guest.qga" not in runtime_imports("runner.profiles.parts")


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
