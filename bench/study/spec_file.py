"""A study spec file, read once: the :class:`StudySpec` and the :class:`ExecutorConfig` it names.

The file holds the study (every :class:`bench.study.spec.StudySpec` field) and, under
``executor``, where its rollouts run (:class:`bench.study.executors.ExecutorConfig`: a name
or an object of its fields). The executor is not part of the study's science: it stays out
of the spec and its hash, so a study may be resumed with another executor.
:func:`load_spec` reads the file once and resolves both, the executor first (so a bad
``executor`` is refused before the study's own checks, before any output); the CLI flags
then override the executor (:func:`bench.study.executors.config_from_args`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from bench.provenance import read_json
from bench.study.executors import ExecutorConfig
from bench.study.spec import StudySpec, spec_from_dict, split_spec_keys


class SpecFile(NamedTuple):
    """A spec file, resolved: the study, and where its rollouts run."""

    spec: StudySpec
    executor: ExecutorConfig


def spec_file_from_dict(data: Any, *, base: str | os.PathLike | None = None) -> SpecFile:
    """The study and executor of a parsed spec file (relative paths resolve against ``base``).

    No ``executor`` key: the default :class:`ExecutorConfig` (serial).
    """
    _, run = split_spec_keys(data)
    executor = ExecutorConfig.from_dict(run["executor"]) if "executor" in run else \
        ExecutorConfig()
    return SpecFile(spec_from_dict(data, base=base), executor)


def load_spec(path: str | os.PathLike) -> SpecFile:
    """Read a spec JSON file once (relative paths are relative to the file)."""
    path = Path(path)
    data = read_json(path, what="spec file", fix="write a JSON StudySpec (see bench.study.spec)")
    return spec_file_from_dict(data, base=path.parent)
