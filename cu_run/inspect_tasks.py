"""cu-run's Inspect tasks, registered as `cu_run/...` (Inspect names a package's tasks by it)."""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai._util.package import get_installed_package_name

from runner.sandbox.suite import suite_task

# Inspect prefixes a task's name with its installed package's, found by the distribution's
# metadata. Run from a source checkout, the cu_run.egg-info an editable install leaves there is
# found first and has no install record, so the prefix is ours to give.
def _probe() -> None:
    """Only asked which package Inspect takes this module to be in."""


_PREFIX = "" if get_installed_package_name(_probe) == "cu_run" else "cu_run/"


@task(name=f"{_PREFIX}suite")
def suite(suite: str = "linux-core", tasks: str | list[str] | None = None, tags: str | list[str] | None = None,
          image: str | None = None) -> Task:
    """A cu-run suite as an Inspect task: `inspect eval cu_run/suite -T suite=linux-core --model ...`.

    tasks: comma-separated task ids [default: every task that runs here]; tags: comma-separated,
    a task must have one; image: the catalog image [default: the one the tasks name, else linux-test].
    """
    return suite_task(suite, _listed(tasks), _listed(tags), image)


def _listed(value: str | list[str] | None) -> list[str] | None:
    """-T tasks=a,b arrives as a list (Inspect reads the value as YAML), -T tasks=a as a string."""
    if not value:
        return None
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [v.strip() for v in items if v.strip()]
