"""The ``bench`` command line: one entry point, one subcommand module per subsystem.

Each subsystem owns a small ``cli`` module exposing ``add_parser(subparsers)``
that registers its subcommand(s) and sets ``func`` (a callable taking the parsed
``argparse.Namespace`` and returning an exit code). Those modules import only
the standard library at module level, so ``bench --help`` stays fast; heavy
imports (torch, mujoco, warp) happen inside the handlers.

Errors: a :class:`bench.errors.BenchError` or ``ValueError`` raised by a handler
is printed as one line ``bench <cmd>: error: ...`` with exit code 2, never a
traceback. Set ``SPLATBENCH_DEBUG=1`` to see the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from bench import __version__

# Subsystem CLI modules, in the order their subcommands appear in --help.
CLI_MODULES = (
    "bench.scene.cli",  # bench scene info | sample
    "perturbations.cli",  # bench perturb
    "bench.render.cli",  # bench render
    "metrics.cli",  # bench score
    "bench.sim.cli",  # bench rollout
    "bench.recon.cli",  # bench capture, bench coverage, bench train
    "bench.study.cli",  # bench study run | export
    "protocols.cli",  # bench tables, bench reliability, bench stats
    "protocols.plan_cli",  # bench plan trials, bench reliability-inputs
    "bench.demo.cli",  # bench demo
)


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``bench`` parser from every subsystem's ``add_parser``."""
    parser = argparse.ArgumentParser(
        prog="bench",
        description="splatbench: inject artifacts into Gaussian-splat scenes, score them, "
        "run paired policy rollouts and test whether sim rankings survive.",
    )
    parser.add_argument("--version", action="version", version=f"splatbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in CLI_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a subsystem not installed in this checkout
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        module.add_parser(subparsers)
    return parser


def _one_line_warning(command: str):
    """A ``warnings.showwarning`` that prints ``bench <cmd>: warning: ...`` on one line."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = str(message).splitlines()[0] if str(message) else category.__name__
        print(f"bench {command}: warning: {text}", file=sys.stderr)

    return show


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    command = " ".join(a for a in (args.command, getattr(args, "subcommand", None)) if a)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(command)  # restored when the block ends
            return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError) as exc:
        if os.environ.get("SPLATBENCH_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"bench {command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `bench scene info X | head`: the reader left, stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail too
        return 141


if __name__ == "__main__":
    sys.exit(main())
