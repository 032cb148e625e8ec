"""Policies from anywhere: Python entry points ``"package.module:factory"`` and study policy refs.

A factory is any callable ``factory(env, *, seed, **kwargs) -> Policy`` (a class works).
On the command line: ``bench rollout --policy mypkg.pol:make_policy``. In a study spec
a task's policies are a list of *refs*, each a registry name, an entry point, or an
object naming a factory with keyword arguments and an optional display name::

    "policies": {"cup": ["mypkg.pol:make_a",
                         {"factory": "mypkg.pol:make_b", "kwargs": {"gain": 2}, "name": "b2"}]}

The stored policy column (and any path part) is the ref's *label*: ``name`` if given,
else the registry name, else the entry point with ``:`` replaced by ``.``
(``mypkg.pol.make_a``). Import errors, a missing attribute, a factory that raises
``TypeError`` on its arguments and a return value that is not a policy each give a
one-line :class:`~bench.errors.BenchError` naming the entry point.

The entry-point helpers (:func:`~bench.policies.factory.load_factory`,
:func:`~bench.policies.factory.check_policy`, :func:`~bench.policies.factory.build_entry_point`,
:func:`~bench.policies.factory.is_entry_point`) live in :mod:`bench.policies.factory`, below
the registry; the refs use the registry (:mod:`bench.policies.base`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bench.errors import BenchError
from bench.policies.factory import is_entry_point, load_factory

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
REF_KEYS = ("factory", "kwargs", "name")


# --------------------------------------------------------------------------- study refs


def check_ref(ref: Any) -> None:
    """Refuse a malformed policy ref (str, or {"factory", "kwargs", "name"} object)."""
    if isinstance(ref, str):
        if not ref:
            raise BenchError("a policy ref is empty; name a registered policy or an entry point")
        return
    if not isinstance(ref, Mapping):
        raise BenchError(f"a policy ref must be a name, an entry point or an object "
                         f"{{\"factory\": ..., \"kwargs\": {{...}}}}, got {ref!r}")
    unknown = sorted(set(ref) - set(REF_KEYS))
    if unknown or not isinstance(ref.get("factory"), str):
        raise BenchError(f"policy ref {dict(ref)!r}: needs a string \"factory\" and only the "
                         f"keys {list(REF_KEYS)}")
    if not isinstance(ref.get("kwargs", {}), Mapping):
        raise BenchError(f"policy ref {ref['factory']!r}: \"kwargs\" must be an object")
    if "name" in ref and not (isinstance(ref["name"], str)
                              and NAME_PATTERN.fullmatch(ref["name"])):
        raise BenchError(f"policy ref {ref['factory']!r}: \"name\" must match "
                         f"{NAME_PATTERN.pattern}, got {ref.get('name')!r}")


def ref_factory(ref: Any) -> str:
    """The factory of a ref: the string itself, or its ``factory`` field."""
    return ref if isinstance(ref, str) else str(ref["factory"])


def ref_kwargs(ref: Any) -> dict[str, Any]:
    """The factory keyword arguments of a ref (``{}`` for a string ref)."""
    return {} if isinstance(ref, str) else dict(ref.get("kwargs", {}))


def ref_label(ref: Any) -> str:
    """The name a ref is stored under (module docstring)."""
    if not isinstance(ref, str) and "name" in ref:
        return str(ref["name"])
    return ref_factory(ref).replace(":", ".")


def validate_ref(ref: Any) -> None:
    """Check a ref against the registry, or import its entry point (no policy is built)."""
    from bench.policies.base import POLICIES  # the package (imported first) registered them

    check_ref(ref)
    factory = ref_factory(ref)
    if is_entry_point(factory):
        load_factory(factory)
    else:
        try:
            POLICIES.entry(factory)
        except ValueError as exc:
            raise BenchError(str(exc) + "; or give an entry point package.module:factory"
                             ) from None


def build_ref(ref: Any, env: Any, *, seed: int = 0) -> Any:
    """Build the policy a ref names for ``env``."""
    from bench.policies.base import make_policy

    return make_policy(ref_factory(ref), env, seed=seed, **ref_kwargs(ref))
