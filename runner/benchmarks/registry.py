"""The benchmarks cu-run imports, one module each that registers itself.

A benchmark module (runner.benchmarks.osworld, runner.benchmarks.waa) says everything the
importer, the classifier and the host's scoring need to know of its benchmark, in one
`Benchmark`: where a checkout keeps its task files, how its tasks become cu-run tasks (the
guest, the script language, the step translators), the hosts its assets come from, the apps its
domains use that the guest lacks, and the guest side of the host's scoring. A new benchmark is
one such module, added to BUILT_IN (or registered by a lab's own code before it imports).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from runner.errors import UsageError
from runner.registry import Registry

if TYPE_CHECKING:
    from runner.benchmarks.linux_steps import Script

BUILT_IN = ("runner.benchmarks.osworld", "runner.benchmarks.waa")


@dataclass(frozen=True)
class UpstreamTask:
    """One task file of a benchmark, as runner.benchmarks.upstream reads it from the benchmark's tree."""

    bench: str
    upstream_id: str
    domain: str
    path: str  # inside the benchmark's tree, as the task's source records it
    raw: bytes  # the task file, byte for byte: it is kept beside the imported task
    data: dict[str, Any]
    in_test_all: bool
    in_test_small: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


@dataclass(frozen=True)
class Profile:
    """How one benchmark's tasks become cu-run tasks: its guest, its scripts' language."""

    profile: str  # the guest profile (runner.profiles)
    image: str  # the catalog image its tasks run on
    ext: str  # its scripts' extension: .sh, .ps1
    helpers: str  # the helpers setup and collection call (steps.<ext>)
    setup: Callable[[dict[str, Any]], Script]
    collect: Callable[[dict[str, Any]], Script]
    collectable: frozenset[str]  # the getter types its collector gathers
    fidelity: Callable[[UpstreamTask, Script], list[str]]  # where this guest differs from the benchmark's


@dataclass(frozen=True)
class Benchmark:
    name: str
    examples_root: str  # where a checkout keeps evaluation examples, from the repository's root
    profile: Profile
    steps: ModuleType  # its guest side of host scoring: where the collector packs the export
    asset_hosts: tuple[str, ...]  # hosts that serve its own files (the asset store holds them)
    missing_apps: Mapping[str, str] = field(default_factory=dict)  # domain -> why its app is not here


BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark", BUILT_IN, lambda benchmark: benchmark.name,
    lambda name, known: UsageError(f"no benchmark {name!r}: cu-run imports {', '.join(known)}"))
register = BENCHMARKS.register
unregister = BENCHMARKS.unregister
names = BENCHMARKS.names
get = BENCHMARKS.get  # the benchmark NAME, or a UsageError naming those there are
