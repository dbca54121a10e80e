"""The guest-profile seam: a kind of guest, put together from the parts it has (runner.profiles.parts).

A profile is a name, the catalog image its suites run on by default, how its paths compare, and
its parts. Two are required, since no task runs without them: the shells (ShellAccess) and the
task scripts (TaskScripts). Every other part is looked up by its kind, and whoever uses one does
without it or says what is missing: `profile.part(Quarantine)` may be None, and
`profile.needs(NetworkEnd, "a networked task")` raises a UsageError naming the guest and the part.

No module outside runner/profiles/ compares a profile's name or class; adding a profile is
writing its parts, and one registry entry (runner.profiles.register).
"""

from __future__ import annotations

from typing import TypeVar

from runner.errors import UsageError
from runner.profiles.listing import WriteSetLister
from runner.profiles.parts import (
    DesktopProbe,
    DesktopUser,
    ExecAudit,
    FileTools,
    NetworkEnd,
    Part,
    Phase,
    Probes,
    Quarantine,
    ScriptLint,
    ShellAccess,
    ShellEndpoint,
    Shells,
    TaskScripts,
    WarmUp,
)

P = TypeVar("P", bound=Part)

# The kinds of part a profile may lack, each at most once.
OPTIONAL_PARTS: tuple[type[Part], ...] = (WarmUp, WriteSetLister, Quarantine, ExecAudit, NetworkEnd, FileTools, Probes,
                                          ScriptLint)


class GuestProfile:
    """A kind of guest: NAME, and the parts it is made of."""

    def __init__(self, name: str, *, default_image: str, access: ShellAccess, scripts: TaskScripts,
                 parts: tuple[Part, ...] = (), windows_paths: bool = False) -> None:
        self.name = name
        self.default_image = default_image  # the catalog image a suite of this profile runs on by default
        self.windows_paths = windows_paths  # paths are case-insensitive and use backslashes
        self.access = access
        self.scripts = scripts
        self._parts: dict[type[Part], Part] = {}
        for part in parts:
            kind = _kind_of(part)
            if kind in self._parts:
                raise ValueError(f"guest profile {name!r} is given two {kind.label} parts")
            self._parts[kind] = part

    def part(self, kind: type[P]) -> P | None:
        """This guest's part of KIND (one of OPTIONAL_PARTS), or None when it has none."""
        found = self._parts.get(kind)
        assert found is None or isinstance(found, kind)
        return found

    def needs(self, kind: type[P], what: str) -> P:
        """This guest's part of KIND; a UsageError saying that WHAT needs it when it has none."""
        found = self.part(kind)
        if found is None:
            raise UsageError(f"{what} needs a {kind.label}, and {self.name} guests have none",
                             fix="run it on a guest profile with one (docs/architecture.md: guest profiles)")
        return found

    @property
    def part_labels(self) -> tuple[str, ...]:
        """What this guest is made of, for people: the required parts, then the optional ones it has."""
        return (self.access.label, self.scripts.label, *(kind.label for kind in OPTIONAL_PARTS if kind in self._parts))

    def with_parts(self, *parts: Part, name: str | None = None, access: ShellAccess | None = None,
                   scripts: TaskScripts | None = None, without: tuple[type[Part], ...] = ()) -> GuestProfile:
        """A copy named NAME with PARTS in place of its parts of the same kinds, and none of WITHOUT's
        kinds: a guest that differs from this one in a few parts (a test's, or a variant image's)."""
        kept = {kind: part for kind, part in self._parts.items() if kind not in without}
        kept.update({_kind_of(part): part for part in parts})
        return GuestProfile(name or self.name, default_image=self.default_image, access=access or self.access,
                            scripts=scripts or self.scripts, parts=tuple(kept.values()),
                            windows_paths=self.windows_paths)


def _kind_of(part: Part) -> type[Part]:
    kinds = [kind for kind in OPTIONAL_PARTS if isinstance(part, kind)]
    if len(kinds) != 1:
        raise TypeError(f"{type(part).__name__} is not one of a profile's optional parts "
                        f"({', '.join(k.__name__ for k in OPTIONAL_PARTS)})")
    return kinds[0]


__all__ = ["OPTIONAL_PARTS", "DesktopProbe", "DesktopUser", "GuestProfile", "Phase", "ShellEndpoint", "Shells"]
