"""A tiny string-keyed registry with metadata, "did you mean" errors and entry-point plugins.

One registry per pluggable kind (perturbations, coverage plans, scorers, tasks,
policies, backends). Variants are entries, not subclasses: an entry is a
callable plus a metadata dict (e.g. ``{"mode": "FR", "lower_better": False}``).

A registry made with ``group=`` also takes entries from installed packages: every
entry point of that group (``[project.entry-points."splatbench.editors"]`` in a
plugin's ``pyproject.toml``) names a function that registers its entries (called
with no arguments; a module is imported instead). The group is read once, on the
first lookup of a name the registry does not hold or the first listing (``names``,
iteration, ``len``), never at import. A plugin that fails to load is skipped with a
one-line warning naming the plugin and its distribution (logger ``splatbench.plugins``),
and whatever it registered before failing is removed. Groups: :data:`PLUGIN_GROUPS`.
"""

from __future__ import annotations

import difflib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: The entry-point groups the bench reads (registry -> group); docs/extending.md.
PLUGIN_GROUPS = {
    "perturbation": "splatbench.editors",
    "scorer": "splatbench.metrics",
    "policy": "splatbench.policies",
    "executor": "splatbench.executors",
}

log = logging.getLogger("splatbench.plugins")


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
        group: Entry-point group of its plugins (``"splatbench.editors"``); None: none.
    """

    def __init__(self, kind: str, *, group: str | None = None) -> None:
        self.kind = kind
        self.group = group
        self._entries: dict[str, Entry[T]] = {}
        self._plugins_loaded = group is None
        self._loading = False
        self._lock = threading.RLock()
        #: entry-point name -> the one-line reason its plugin was skipped
        self.plugin_errors: dict[str, str] = {}

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
        if name not in self._entries:
            self.load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(self._unknown_message(name)) from None

    def get(self, name: str) -> T:
        """The registered object for ``name``."""
        return self.entry(name).obj

    def _unknown_message(self, name: str) -> str:
        self.load_plugins()
        close = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        broken = f"; {self.plugin_errors[name]}" if name in self.plugin_errors else ""
        return (f"unknown {self.kind} {name!r}{hint} (known: {', '.join(sorted(self._entries))})"
                f"{broken}")

    def names(self) -> list[str]:
        """Registered names in registration order (built-in first, then plugins)."""
        self.load_plugins()
        return list(self._entries)

    def registered(self) -> list[Entry[T]]:
        """The entries registered so far, without reading the plugin group."""
        return list(self._entries.values())

    def load_plugins(self) -> None:
        """Register the entries of the installed plugins of :attr:`group` (once).

        Each entry point names a function that registers entries (called with no
        arguments) or a module whose import registers them. A plugin that raises is
        skipped: its entries are removed again, and one line naming the plugin, its
        distribution and the error goes to the ``splatbench.plugins`` logger (and to
        :attr:`plugin_errors`, which an unknown-name error then quotes).
        """
        if self._plugins_loaded:
            return
        with self._lock:  # another thread waits here until the group is read
            if self._plugins_loaded or self._loading:  # _loading: a plugin lists the registry
                return
            self._loading = True
            try:
                from importlib.metadata import entry_points

                try:
                    found = list(entry_points(group=self.group))
                except Exception as exc:  # a broken installation must not break the bench
                    log.warning("cannot read the %s plugins (%s: %s); none loaded", self.group,
                                type(exc).__name__, _first_line(exc))
                    found = []
                for point in found:
                    self._load_plugin(point)
            finally:
                self._loading = False
                self._plugins_loaded = True

    def _load_plugin(self, point: Any) -> None:
        before = set(self._entries)
        try:
            hook = point.load()
            if callable(hook):
                hook()
        except Exception as exc:
            for name in set(self._entries) - before:  # nothing half-registered stays
                del self._entries[name]
            message = (f"{self.group} plugin {point.name!r} ({point.value}) from "
                       f"{_distribution(point)} failed to load and is skipped: "
                       f"{type(exc).__name__}: {_first_line(exc)}")
            self.plugin_errors[point.name] = message
            log.warning("%s", message)

    def __contains__(self, name: object) -> bool:
        if name in self._entries:
            return True
        self.load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        self.load_plugins()
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        self.load_plugins()
        return len(self._entries)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def _distribution(point: Any) -> str:
    """``"distribution NAME VERSION"`` of an entry point, as far as it is known."""
    dist = getattr(point, "dist", None)
    if dist is None:
        return "an unknown distribution"
    try:
        return f"distribution {dist.metadata['Name']} {dist.version}"
    except Exception:  # a distribution without readable metadata
        return "an unknown distribution"


def lazy(module: str, attr: str) -> Callable[..., Any]:
    """A callable that imports ``module.attr`` on first call (keeps heavy imports lazy)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        import importlib

        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    call.__qualname__ = f"lazy({module}.{attr})"
    return call
