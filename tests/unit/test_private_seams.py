"""No test reaches into the slot scheduler or the VM supply: they are tested through their
interfaces (runner/runs/scheduler.py, runner/runs/vm_supply.py; issue 44). Read with `ast`:
an attribute of another object than `self` named as one of their private members."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUARDED = {"runner/runs/scheduler.py": "SlotScheduler", "runner/runs/vm_supply.py": "VmSupply"}


def private_members(path: Path, class_name: str) -> set[str]:
    tree = ast.parse(path.read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
             and not n.name.startswith("__")}
    names |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
              and n.value.id == "self" and n.attr.startswith("_") and not n.attr.startswith("__")}
    return names


def test_the_guarded_classes_have_private_members_to_guard():
    for path, cls in GUARDED.items():
        assert len(private_members(ROOT / path, cls)) >= 5, cls  # the check below reads the right classes


def test_no_test_touches_a_private_member_of_the_scheduler_or_the_vm_supply():
    private = set().union(*(private_members(ROOT / path, cls) for path, cls in GUARDED.items()))
    touched = []
    for test in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(test.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                touched.append(f"{test.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert touched == []
