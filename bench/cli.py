"""The ``bench`` command line: one entry point, one subcommand module per subsystem.

Each subsystem owns a small ``cli`` module exposing ``add_parser(subparsers)``
that registers its subcommand(s) and sets ``func`` (a callable taking the parsed
``argparse.Namespace`` and returning an exit code). Those modules import only
the standard library at module level, so ``bench --help`` stays fast; heavy
imports (torch, mujoco, warp) happen inside the handlers.

Errors: a :class:`bench.errors.BenchError` or ``ValueError`` raised by a handler
is printed as one line ``bench <cmd>: error: ...`` with exit code 2, never a
traceback; so are the errors user input can cause deeper down (every ``OSError``
with its file and errno-specific advice, truncated/corrupt files: ``struct.error``,
``EOFError``, ``zlib.error``, PIL's ``SyntaxError``; ``csv.Error``,
``UnicodeDecodeError``, ``TypeError``, ``OverflowError``, ``MemoryError``,
``sqlite3.Error``), see :func:`describe_error`. ``KeyError``/``IndexError`` stay
tracebacks: they are bugs. Set ``SPLATBENCH_DEBUG=1`` to see the traceback.
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
    "bench.rollout_cli",  # bench rollout (outside bench.sim: it builds policies)
    "bench.sim.task_cli",  # bench task validate | show
    "bench.serve_cli",  # bench serve (parser outside bench.policies: its package import is heavy)
    "bench.recon.cli",  # bench capture, bench coverage, bench train
    "bench.study.cli",  # bench study run | export
    "protocols.cli",  # bench tables, bench reliability, bench stats
    "protocols.plan_cli",  # bench plan trials, bench reliability-inputs
    "bench.demo.cli",  # bench demo
    "bench.align.cli",  # bench align color | pose (issue 16)
    "bench.sim.softbody.cli",  # bench softbody rollout (issue 16)
)


#: Namespace attribute naming the (sub)parser that left arguments unrecognised.
UNRECOGNIZED_BY = "_unrecognized_by"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, exit 2.

    The line is ``bench <cmd>: error: <msg>; see 'bench <cmd> --help'`` (argparse
    prints the whole usage first). ``add_subparsers`` makes every subparser with its
    parent's class, so each ``bench <cmd> [<subcmd>]`` parser is one of these too.
    """

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print ``message`` as one line with the --help hint and exit 2."""
        text = " ".join(str(message).split())  # argparse messages may wrap
        self.exit(2, f"{self.prog}: error: {text}; see '{self.prog} --help'\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's; the innermost parser that left arguments unrecognised is noted.

        argparse reports unknown arguments from the top-level parser (``bench: error``); the
        note lets :func:`main` name the subcommand that did not know them instead.
        """
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, UNRECOGNIZED_BY):
            setattr(namespace, UNRECOGNIZED_BY, self)
        return namespace, extras


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``bench`` parser from every subsystem's ``add_parser``."""
    parser = OneLineParser(
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
    from bench.cli_fields import state_defaults

    state_defaults(parser)  # "[default X]" in every help, from the parser's own defaults
    return parser


def _one_line_warning(command: str):
    """A ``warnings.showwarning`` that prints ``bench <cmd>: warning: ...`` on one line."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = str(message).splitlines()[0] if str(message) else category.__name__
        print(f"bench {command}: warning: {text}", file=sys.stderr)

    return show


def _oserror_fix(exc: OSError) -> str:
    """The repair advice for an operating-system error, by errno."""
    import errno

    fixes = {
        errno.EACCES: "check the permissions or choose another path",
        errno.EPERM: "check the permissions (or an immutable flag) or choose another path",
        errno.EROFS: "the file system is read-only; choose a writable path",
        errno.ENOSPC: "the disk is full; free space or choose another path",
        errno.EDQUOT: "the disk quota is exceeded; free space or choose another path",
        errno.EISDIR: "a directory stands where a file is expected; choose another path",
        errno.ENOTDIR: "a file stands where a directory is expected; choose another path",
        errno.ENOENT: "check the path",
        errno.EEXIST: "remove it or choose another path",
        errno.ENAMETOOLONG: "use a shorter path",
        errno.ELOOP: "a symbolic link loops; fix or remove it",
        errno.EMFILE: "too many open files; raise `ulimit -n`",
    }
    return fixes.get(exc.errno or -1, "check the path and try again")


def describe_error(exc: BaseException) -> str:
    """One line for an exception the user's input caused: the problem and the fix."""
    import csv
    import struct
    import zlib

    text = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, ValueError) and not isinstance(exc, UnicodeDecodeError):
        return text  # BenchError and validating ValueErrors already name the problem and fix
    if isinstance(exc, OSError) and not type(exc).__module__.startswith("PIL"):
        if exc.errno is None:  # raised by the bench with its own message
            return text
        where = "" if exc.filename is None else str(exc.filename)
        if exc.filename2 is not None:
            where = f"{where} -> {exc.filename2}"
        reason = exc.strerror or text
        return f"{reason}: {where}; {_oserror_fix(exc)}" if where else \
            f"{reason}; {_oserror_fix(exc)}"
    if isinstance(exc, MemoryError):
        return ("out of memory; reduce the sizes asked for (image size, trials, counts) or use a "
                "machine with more memory")
    if isinstance(exc, RecursionError):
        return "an input file is nested too deeply to read; check that it is the right file"
    if isinstance(exc, OverflowError):
        return f"a number is too large ({text}); use a value in the documented range"
    if isinstance(exc, UnicodeDecodeError):
        return (f"an input file is not UTF-8 text ({text}); check that it is the right file "
                "or re-save it as UTF-8")
    if isinstance(exc, struct.error | EOFError | zlib.error):
        return (f"an input file is truncated or corrupt ({type(exc).__name__}: {text}); "
                "re-export or re-copy it")
    if isinstance(exc, csv.Error):
        return f"malformed CSV ({text}); fix the quoting in the CSV file"
    if isinstance(exc, TypeError):
        return (f"a value in the input has the wrong type ({text}); check the types of the "
                "values in the files and options you passed")
    if isinstance(exc, SyntaxError | OSError):  # PIL reports bad image data this way
        return f"an image file is corrupt or not an image ({text}); re-export it"
    return f"{type(exc).__name__}: {text}"


#: What the funnel turns into one line: user input can cause each of these.
USER_ERRORS = (ValueError, OSError, TypeError, OverflowError, MemoryError, RecursionError,
               SyntaxError, EOFError)


def _user_error_types() -> tuple[type[BaseException], ...]:
    import csv
    import sqlite3
    import struct
    import zlib

    return (*USER_ERRORS, struct.error, csv.Error, zlib.error, sqlite3.Error)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: it unwinds like Ctrl-C, so every staging folder is removed.

    A subclass of ``KeyboardInterrupt``: code that cleans up on Ctrl-C (staged outputs,
    the study's worker pool) does the same here. ``signum`` is the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: Signals that stop a command the way Ctrl-C does (what `timeout`, SLURM's scancel and a
#: closed terminal send); the exit code is 128 + the signal's number (143, 129).
STOP_SIGNALS = ("SIGTERM", "SIGHUP")


def _install_stop_handlers() -> dict:
    """Make SIGTERM / SIGHUP raise :class:`Terminated`; returns the handlers to restore.

    Only in the main thread; a signal the process inherited as ignored (``nohup``) stays
    ignored. A second signal while the first one's cleanup runs is ignored (SIGKILL still
    stops everything; the next run then recovers what it left).
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    fired: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if fired:
            return  # the first signal's cleanup runs to its end
        fired.append(signum)
        raise Terminated(signum)

    previous = {}
    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is None or signal.getsignal(number) is signal.SIG_IGN:
            continue
        previous[number] = signal.getsignal(number)
        signal.signal(number, stop)
    return previous


def _restore_handlers(previous: dict) -> None:
    import signal

    for number, handler in previous.items():
        signal.signal(number, signal.SIG_DFL if handler is None else handler)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    owner = vars(args).pop(UNRECOGNIZED_BY, parser)
    if extras:  # named by the subcommand that does not know them (argparse names `bench`)
        owner.error(f"unrecognized arguments: {' '.join(extras)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    command = " ".join(a for a in (args.command, getattr(args, "subcommand", None)) if a)
    real_stdout = sys.stdout
    handlers: dict = {}
    try:
        handlers = _install_stop_handlers()  # SIGTERM / SIGHUP clean up like Ctrl-C
        sys.stdout = _GuardedStream(real_stdout)  # tells a failing stdout from a failing --out
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(command)  # restored when the block ends
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk on stdout is reported here, once
        return code
    except StdoutError as exc:
        if isinstance(exc.error, BrokenPipeError):
            _silence_stdout()
            return 141
        _silence_stdout()
        print(f"bench {command}: error: cannot write to standard output "
              f"({exc.error.strerror or exc.error}); redirect it to a file on a disk with "
              "space, or to a terminal", file=sys.stderr)
        return 2
    except Terminated as exc:
        import signal

        print(f"bench {command}: stopped by {signal.Signals(exc.signum).name}; nothing "
              "half-written is left", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `bench scene info X | head`: the reader left, stop quietly
        _silence_stdout()
        return 141
    except _user_error_types() as exc:
        if os.environ.get("SPLATBENCH_DEBUG"):
            raise
        print(f"bench {command}: error: {describe_error(exc)}", file=sys.stderr)
        return 2
    finally:
        _restore_handlers(handlers)
        if isinstance(sys.stdout, _GuardedStream):
            sys.stdout = real_stdout


class StdoutError(Exception):
    """Writing to standard output failed (``error`` is the OSError)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _GuardedStream:
    """Wraps ``sys.stdout`` so its OSErrors surface as :class:`StdoutError`."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutError(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise StdoutError(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail a second time."""
    stream = sys.stdout._stream if isinstance(sys.stdout, _GuardedStream) else sys.stdout
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
