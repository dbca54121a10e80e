"""A registry of one kind of plug-in (agents, benchmarks, image builders): each built-in is one
module that registers itself when imported, and the registry imports its built-in modules the
first time it is asked. Names come in the order of the built-in modules (the order a person
reads in --help), whichever was imported first, then any registered by other code.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Generic, TypeVar

from runner.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, built_in: tuple[str, ...], name_of: Callable[[T], str],
                 unknown: Callable[[str, tuple[str, ...]], UsageError]) -> None:
        """UNKNOWN(name, the names there are): the error for a name nobody registered."""
        self.kind = kind  # what the items are, for messages: "agent", "benchmark", "image builder"
        self.built_in = built_in  # the modules that register the built-ins
        self._name_of = name_of
        self._unknown = unknown
        self._items: dict[str, tuple[T, str]] = {}  # name -> (item, the module that registered it)

    def register(self, item: T) -> T:
        """Adds ITEM, from the calling module (at its import); a name is registered once."""
        name = self._name_of(item)
        if name in self._items and self._items[name][0] is not item:
            raise ValueError(f"{self.kind} {name} is registered twice")
        self._items[name] = (item, sys._getframe(1).f_globals.get("__name__", ""))
        return item

    def unregister(self, name: str) -> None:
        """Removes a registration (a test's throwaway one)."""
        self._items.pop(name, None)

    def names(self) -> tuple[str, ...]:
        self._load_built_in()

        def rank(name: str) -> int:
            module = self._items[name][1]
            return self.built_in.index(module) if module in self.built_in else len(self.built_in)

        return tuple(sorted(self._items, key=rank))  # stable: within a module, as registered

    def items(self) -> tuple[T, ...]:
        return tuple(self._items[name][0] for name in self.names())

    def find(self, name: str) -> T | None:
        self._load_built_in()
        found = self._items.get(name)
        return None if found is None else found[0]

    def get(self, name: str) -> T:
        """The item NAME, or the registry's UsageError naming those there are."""
        item = self.find(name)
        if item is None:
            raise self._unknown(name, self.names())
        return item

    def _load_built_in(self) -> None:
        for module in self.built_in:
            importlib.import_module(module)
