"""Flags built from dataclass fields: defaults, help and types come from the dataclass."""

import argparse
import dataclasses

import pytest

from bench.cli_fields import add_dataclass_arguments, dataclass_values, field_help


@dataclasses.dataclass(frozen=True)
class _Config:
    width: int = dataclasses.field(default=64, metadata={"help": "image width",
                                                         "unit": "pixels"})
    band: tuple[float, float] = dataclasses.field(default=(0.05, 0.15),
                                                  metadata={"help": "height band"})
    limit: int | None = dataclasses.field(default=None, metadata={
        "help": "frame limit", "default_help": "the task's"})
    mode: str = dataclasses.field(default="a", metadata={"help": "mode", "choices": ("a", "b")})
    verbose: bool = dataclasses.field(default=False, metadata={"help": "talk"})
    hidden: float = 1.0  # no help metadata: not a flag unless asked for


def test_defaults_types_and_help_come_from_the_fields():
    parser = argparse.ArgumentParser()
    dests = add_dataclass_arguments(parser, _Config, prefix="cfg-")
    assert set(dests.values()) == {"width", "band", "limit", "mode", "verbose"}
    args = parser.parse_args([])
    assert {name: getattr(args, dest) for dest, name in dests.items()} == {
        "width": 64, "band": [0.05, 0.15], "limit": None, "mode": "a", "verbose": False}
    assert dataclass_values(args, dests) == {"width": 64, "band": (0.05, 0.15), "mode": "a",
                                             "verbose": False}
    args = parser.parse_args(["--cfg-width", "32", "--cfg-band", "1", "2", "--cfg-verbose"])
    assert _Config(**dataclass_values(args, dests)) == _Config(width=32, band=(1.0, 2.0),
                                                               verbose=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--cfg-mode", "c"])  # choices from the metadata
    fields = {f.name: f for f in dataclasses.fields(_Config)}
    assert field_help(fields["width"]) == "image width, pixels [default 64]"
    assert field_help(fields["band"]) == "height band [default 0.05 0.15]"
    assert field_help(fields["limit"]) == "frame limit [default the task's]"


def test_override_flags_default_to_none_and_rename():
    parser = argparse.ArgumentParser()
    dests = add_dataclass_arguments(parser, _Config, only=("width", "hidden"),
                                    flags={"width": "size"}, parser_defaults=False,
                                    metadata={"hidden": {"help": "a hidden knob"}})
    assert dests == {"size": "width", "hidden": "hidden"}
    args = parser.parse_args([])
    assert args.size is None and args.hidden is None and dataclass_values(args, dests) == {}
    assert "a hidden knob [default 1]" in parser.format_help()
    with pytest.raises(ValueError, match="no field"):
        add_dataclass_arguments(argparse.ArgumentParser(), _Config, only=("nope",))


def test_train_parser_defaults_match_train_config():
    from bench.cli import build_parser
    from bench.recon.cli import TRAIN_FLAGS
    from bench.recon.train import TrainConfig

    args = build_parser().parse_args(["train", "--manifest", "m", "--out", "o"])
    config = TrainConfig()
    for name in TRAIN_FLAGS:
        assert getattr(args, name) == getattr(config, name), name
    assert (not args.no_densify) == config.densify
