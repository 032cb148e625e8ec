"""Shared helpers for the protocols tests."""

import pytest


@pytest.fixture
def bench_main(monkeypatch):
    """``bench`` entry point restricted to the protocols subcommands.

    Uses the real dispatcher (error handling, exit codes) but imports only
    ``protocols.cli``, so these tests do not depend on other subsystems.
    """
    import bench.cli

    monkeypatch.setattr(bench.cli, "CLI_MODULES", ("protocols.cli",))
    return bench.cli.main
