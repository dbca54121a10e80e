"""The files a benchmark's task needs from the asset store (runner.assets), from its upstream.json:
`download` steps put files in the guest; `cloud_file` getters are gold files, which stay on the
host.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.assets import AssetStore, assets_root
from runner.benchmarks.classify import getters, steps
from runner.tasks.model import UPSTREAM_FILE, Task


@dataclass(frozen=True)
class TaskAssets:
    guest: tuple[str, ...]  # URLs whose files go into the guest (setup's downloads)
    host: tuple[str, ...]  # gold files: only the host's scoring reads them

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.guest) | set(self.host)))


def task_assets(task: Task) -> TaskAssets:
    """The URLs an imported task needs, from its upstream.json (none for other tasks)."""
    path = task.folder / UPSTREAM_FILE
    if task.spec.scoring != "host" or not path.is_file():
        return TaskAssets((), ())
    return urls_of(json.loads(path.read_bytes()))


def urls_of(data: dict[str, Any]) -> TaskAssets:
    guest = [str(f["url"]) for s in steps(data) if s.get("type") == "download"
             for f in (s.get("parameters") or {}).get("files", []) if isinstance(f, dict) and "url" in f]
    host = []
    for getter in getters(data):
        if getter.get("type") == "cloud_file":
            path = getter.get("path")
            host += [str(p) for p in (path if isinstance(path, list) else [path]) if p]
    return TaskAssets(tuple(dict.fromkeys(guest)), tuple(dict.fromkeys(host)))


def missing_assets(given: Path | None) -> Callable[[Task], str | None]:
    """For a study's walk: why a task cannot be tried for want of its files, or None."""
    root = assets_root(given)
    store = AssetStore(root) if root is not None else None

    def check(task: Task) -> str | None:
        urls = task_assets(task).all
        if not urls:
            return None
        if store is None:
            return f"it needs {len(urls)} downloaded files and no asset store was given (--assets)"
        _found, problems = store.resolve(urls)
        return f"{len(problems)} of its {len(urls)} files are not in the asset store" if problems else None

    return check
