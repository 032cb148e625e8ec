"""argparse flags built from a config dataclass, so the dataclass is the one source of defaults.

A field describes its own flag in ``dataclasses.field(metadata=...)``:

* ``help``: what the value means (a phrase, no unit, no default);
* ``unit``: the unit ("metres", "degrees", "pixels", "N", "count"), appended to the help;
* ``default_help``: the default's wording when the value alone does not explain it
  (``None`` fields: "the task's, 600");
* ``choices``: the allowed values (a tuple, or a zero-argument callable that reads a registry);
* ``metavar``: argparse's metavar for tuple fields.

The help of every flag ends in ``[default X]``, with X taken from the dataclass, so the
help cannot drift from the code. Only the standard library is imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def field_help(field: dataclasses.Field, *, default: Any = dataclasses.MISSING) -> str:
    """The help text of a field's flag: help, unit and ``[default X]``.

    Args:
        field: A dataclass field with ``metadata["help"]``.
        default: The default to state; by default the field's own.

    Returns:
        ``"<help>, <unit> [default <value>]"`` (unit and default parts only when known).
    """
    text = field.metadata.get("help", field.name.replace("_", " "))
    unit = field.metadata.get("unit")
    if unit:
        text = f"{text}, {unit}"
    stated = field.metadata.get("default_help")
    if stated is None:
        value = _field_default(field) if default is dataclasses.MISSING else default
        if value is not dataclasses.MISSING and value is not None:
            stated = format_default(value)
    return f"{text} [default {stated}]" if stated is not None else text


def format_default(value: Any) -> str:
    """How a default reads in help text: sequences space-separated, floats with ``%g``."""
    if isinstance(value, tuple | list):
        return " ".join(format_default(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if value == "":
        return '""'
    return str(value)


def add_dataclass_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    only: Iterable[str] | None = None,
    prefix: str = "",
    flags: Mapping[str, str] | None = None,
    parser_defaults: bool = True,
    defaults: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """Add one flag per dataclass field to ``parser``.

    Args:
        parser: Parser or argument group the flags go into.
        cls: The config dataclass (its field metadata carries help and unit).
        only: Field names to expose, in flag order; default every field with help metadata.
        prefix: Prefix of the flag names (``prefix="env-"`` gives ``--env-max-frames``).
        flags: Field name -> flag name (without ``--``) where the flag name differs from the
            field's (kept for scripts: ``half_angle_deg`` is ``--angle``).
        parser_defaults: True: the parser's default is the dataclass default. False: the
            parser's default is None (the flag is an override; "not given" stays
            distinguishable) while the help still states the dataclass default.
        defaults: Field name -> default that replaces the dataclass's (for a preset of the
            dataclass that a command starts from); the help states it.
        metadata: Field name -> flag metadata (``help``, ``unit``, ...) merged over the
            field's own, for a dataclass whose module another change owns; the default still
            comes from the dataclass.

    Returns:
        argparse dest -> field name, for :func:`dataclass_values`.
    """
    flags = dict(flags or {})
    defaults = dict(defaults or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extra = {name: dict(meta) for name, meta in (metadata or {}).items()}
    fields = {n: _with_metadata(f, extra[n]) if n in extra else f for n, f in fields.items()}
    names = list(only) if only is not None else [n for n, f in fields.items()
                                                  if "help" in f.metadata]
    unknown = [n for n in names if n not in fields]
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    hints = typing.get_type_hints(cls)
    dests = {}
    for name in names:
        field = fields[name]
        default = defaults.get(name, _field_default(field))
        flag = "--" + flags.get(name, prefix + name).replace("_", "-")
        kwargs = _argparse_kwargs(field, hints[name], default)
        kwargs["help"] = field_help(field, default=default)
        if not parser_defaults and kwargs.get("action") is None:
            kwargs["default"] = None
        action = parser.add_argument(flag, **kwargs)
        dests[action.dest] = name
    return dests


def dataclass_values(args: argparse.Namespace, dests: Mapping[str, str]) -> dict[str, Any]:
    """Field name -> value of the flags that were set (None values left out; lists as tuples)."""
    values = {}
    for dest, name in dests.items():
        value = getattr(args, dest, None)
        if value is not None:
            values[name] = tuple(value) if isinstance(value, list) else value
    return values


def _with_metadata(field: dataclasses.Field, extra: dict[str, Any]) -> dataclasses.Field:
    copy = dataclasses.field(default=field.default, default_factory=field.default_factory,
                             metadata={**field.metadata, **extra})
    copy.name, copy.type = field.name, field.type
    return copy


def _field_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _argparse_kwargs(field: dataclasses.Field, hint: Any, default: Any) -> dict[str, Any]:
    base, args = _strip_optional(hint)
    kwargs: dict[str, Any] = {}
    if base is bool:
        if default is not False:
            raise ValueError(f"{field.name}: only bool fields that default to False become flags")
        return {"action": "store_true"}
    if typing.get_origin(base) is tuple:
        item_types = typing.get_args(base)
        kwargs["nargs"] = len(item_types)
        kwargs["type"] = item_types[0]
        if default is not dataclasses.MISSING and default is not None:
            default = list(default)
    elif base in (int, float, str):
        kwargs["type"] = base
    elif typing.get_origin(base) is typing.Literal:
        kwargs["choices"] = list(typing.get_args(base))
    else:
        raise ValueError(f"{field.name}: no flag for a field of type {hint!r}")
    choices = field.metadata.get("choices")
    if choices is not None:
        kwargs["choices"] = list(choices() if isinstance(choices, Callable) else choices)
    if "metavar" in field.metadata:
        kwargs["metavar"] = field.metadata["metavar"]
    if default is dataclasses.MISSING:
        kwargs["required"] = True
    else:
        kwargs["default"] = default
    return kwargs


def _strip_optional(hint: Any) -> tuple[Any, tuple]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1:
            return members[0], ()
    return hint, ()


def state_defaults(parser: argparse.ArgumentParser) -> None:
    """Append ``[default X]`` to every flag's help that does not state its default yet.

    Walks ``parser`` and all its subparsers. Skipped: flags without help, defaults of None,
    False or SUPPRESS (switches and "not given"), and helps that already say ``[default``
    (a default that needs words, e.g. "[default: the task's, 600]"). So no help repeats a
    default by hand: argparse's default is the one source.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                state_defaults(sub)
            continue
        default = action.default
        if (not action.help or action.help == argparse.SUPPRESS or "[default" in action.help
                or default is None or default is False or default == argparse.SUPPRESS
                or not action.option_strings):
            continue
        action.help = f"{action.help} [default {format_default(default)}]"
