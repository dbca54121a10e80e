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

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, built_in: tuple[str, ...], name_of: Callable[[T], str]) -> None:
        self.kind = kind  # what the items are, for messages: "agent", "benchmark", "image builder"
        self.built_in = built_in  # the modules that register the built-ins
        self._name_of = name_of
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
        for module in self.built_in:
            importlib.import_module(module)
        registered = list(self._items)

        def order(name: str) -> tuple[int, int]:
            module = self._items[name][1]
            rank = self.built_in.index(module) if module in self.built_in else len(self.built_in)
            return rank, registered.index(name)

        return tuple(sorted(registered, key=order))

    def find(self, name: str) -> T | None:
        if name not in self.names():
            return None
        return self._items[name][0]
