"""The one place an episode VM is made (runner.vm.factory): nothing else in the project constructs
an EpisodeVM but the tests of EpisodeVM itself. Read with `ast`, and shown able to fail."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from runner.vm.episode import EpisodeOptions
from runner.vm.factory import EpisodeVmFactory

ROOT = Path(__file__).resolve().parents[2]
MAKER = "runner/vm/factory.py"
SEARCHED = ("runner", "cu_run", "bench", "examples")


def constructions(tree: ast.AST) -> list[int]:
    """The lines where TREE calls EpisodeVM (by name, or as an attribute of a module)."""
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and (getattr(node.func, "id", None) == "EpisodeVM" or getattr(node.func, "attr", None) == "EpisodeVM"))


def test_an_episode_vm_is_constructed_only_by_the_factory():
    found = {}
    for folder in SEARCHED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = constructions(ast.parse(path.read_text()))
            if lines:
                found[str(path.relative_to(ROOT))] = lines
    assert list(found) == [MAKER], found


def test_the_finder_finds_a_construction():
    code = "vm = EpisodeVM(host, image, s, run_id='r', slot=0)\nother = episode.EpisodeVM(h)\nEpisodeVM.start(vm)\n"
    assert constructions(ast.parse(code)) == [1, 2]


def test_each_vm_gets_its_own_copy_of_the_factorys_options(tmp_path):
    options = EpisodeOptions(accel="kvm", wait_desktop=False)
    make_vm = EpisodeVmFactory(None, SimpleNamespace(), SimpleNamespace(episodes_dir=tmp_path), run_id="r",  # type: ignore[arg-type]
                               options=options)
    one, two = make_vm(3, artifacts=tmp_path / "ep"), make_vm(4)
    assert (one.name, one.slot, one.run_id, one.artifacts, one.warm) == ("cu-r-3", 3, "r", tmp_path / "ep", None)
    assert one.options == options and one.options is not options and one.options is not two.options
