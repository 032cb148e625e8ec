"""Policies from anywhere: a Python entry point ``"package.module:factory"`` imported and called.

A factory is any callable ``factory(env, *, seed, **kwargs) -> Policy`` (a class works);
:func:`build_entry_point` imports it (:func:`load_factory`), calls it and checks that the
result is a policy (:func:`check_policy`). Import errors, a missing attribute, a factory
that raises ``TypeError`` on its arguments and a return value that is not a policy each
give a one-line :class:`~bench.errors.BenchError` naming the entry point.

Below the policy registry (:func:`bench.policies.base.make_policy` builds entry points
with it) and the study's policy refs (:mod:`bench.policies.entry`, which re-exports these
names); it imports nothing else of :mod:`bench.policies`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

from bench.errors import BenchError

_ENTRY_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def is_entry_point(text: str) -> bool:
    """True when ``text`` is an entry point (contains ``:``) rather than a registry name."""
    return ":" in text


def load_factory(entry_point: str) -> Any:
    """Import ``"package.module:attr.path"`` and return the attribute (one-line errors)."""
    if not _ENTRY_PATTERN.fullmatch(entry_point):
        raise BenchError(f"policy entry point {entry_point!r} is malformed; write it as "
                         "package.module:factory")
    module_name, attr_path = entry_point.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or any error raised while the module runs
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise BenchError(f"policy entry point {entry_point!r}: cannot import {module_name!r} "
                         f"({type(exc).__name__}: {first}); install the package or fix "
                         "PYTHONPATH") from None
    obj: Any = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise BenchError(f"policy entry point {entry_point!r}: module {module_name!r} has "
                             f"no attribute {attr_path!r}; check the factory name")
        obj = getattr(obj, part)
    if not callable(obj):
        raise BenchError(f"policy entry point {entry_point!r} is a {type(obj).__name__}, not "
                         "a callable factory(env, *, seed, **kwargs)")
    return obj


def check_policy(obj: Any, *, source: str) -> Any:
    """Return ``obj`` if it has callable ``reset`` and ``act``; else a one-line BenchError."""
    missing = [m for m in ("reset", "act") if not callable(getattr(obj, m, None))]
    if missing:
        raise BenchError(f"policy entry point {source!r} returned {type(obj).__name__}, which "
                         f"is not a Policy (missing {' and '.join(missing)}); return an object "
                         "with reset(*, seed) and act(obs, info) -> float32 [T, 7]")
    return obj


def build_entry_point(entry_point: str, env: Any, *, seed: int = 0,
                      kwargs: Mapping[str, Any] | None = None) -> Any:
    """Call the factory of ``entry_point`` with ``env`` and ``seed``; check what it returns."""
    factory = load_factory(entry_point)
    try:
        policy = factory(env, seed=seed, **dict(kwargs or {}))
    except TypeError as exc:
        raise BenchError(f"policy entry point {entry_point!r} cannot be called as "
                         f"factory(env, seed=..., **kwargs): {exc}") from None
    check_policy(policy, source=entry_point)
    if not isinstance(getattr(policy, "name", None), str):
        try:
            policy.name = entry_point.replace(":", ".")
        except AttributeError:
            pass
    return policy
