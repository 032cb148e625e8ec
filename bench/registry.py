"""A tiny string-keyed registry with metadata and "did you mean" errors.

One registry per pluggable kind (perturbations, coverage plans, scorers, tasks,
policies, backends). Variants are entries, not subclasses: an entry is a
callable plus a metadata dict (e.g. ``{"mode": "FR", "lower_better": False}``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered item: its key, the object, and free-form metadata."""

    name: str
    obj: T
    meta: dict[str, Any] = field(default_factory=dict)


class Registry(Generic[T]):
    """Name -> entry mapping for one pluggable kind.

    Args:
        kind: Human name of the kind, used in error messages ("perturbation").
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, obj: T | None = None, **meta: Any) -> Any:
        """Register ``obj`` under ``name``; usable as a decorator when ``obj`` is None."""
        if obj is None:

            def decorator(target: T) -> T:
                self.register(name, target, **meta)
                return target

            return decorator
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = Entry(name, obj, dict(meta))
        return obj

    def entry(self, name: str) -> Entry[T]:
        """Look up an entry; unknown names raise ValueError with close matches."""
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(self._unknown_message(name)) from None

    def get(self, name: str) -> T:
        """The registered object for ``name``."""
        return self.entry(name).obj

    def _unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(sorted(self._entries))})"

    def names(self) -> list[str]:
        """Registered names in registration order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


def lazy(module: str, attr: str) -> Callable[..., Any]:
    """A callable that imports ``module.attr`` on first call (keeps heavy imports lazy)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        import importlib

        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    call.__qualname__ = f"lazy({module}.{attr})"
    return call
