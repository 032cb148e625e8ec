"""The ownership marker: how the bench knows a directory is its own output.

Every directory the bench stages carries :data:`MARKER`; ``--overwrite``, in-place swaps and the
recovery of killed runs (:mod:`bench.swap`) act only on directories that carry it (or a bench
``manifest.json`` from before the marker existed). Standard library only, below
:mod:`bench.safety` and :mod:`bench.swap`, which both read it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: File that marks a directory as written by the bench (so --overwrite may replace it).
MARKER = ".splatbench-output"
MARKER_FORMAT = "splatbench-output/1"


def marker_json() -> bytes:
    """Bytes of the ownership marker (deterministic: no time, no host)."""
    return (json.dumps({"format": MARKER_FORMAT}, sort_keys=True) + "\n").encode()


def is_bench_output(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` may be replaced: bench marker, bench manifest.json, or empty."""
    directory = Path(directory)
    if (directory / MARKER).is_file() or not any(directory.iterdir()):  # empty: nothing to lose
        return True
    manifest = directory / "manifest.json"
    if not manifest.is_file() or manifest.is_symlink():
        return False
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "tool" in data and "bench_version" in data
