"""The real robot's outcomes as data (spec key ``real_results``).

Three layouts are read (``pandas`` for the CSVs):

* **per trial** - columns ``scene,task,policy,trial,success`` (+ optional
  ``progress,init_x,init_y,init_yaw_deg,notes``); ``success`` is 0/1 (or
  true/false), one row per real rollout, trial ids unique per cell;
* **per cell** - columns ``scene,task,policy,successes,trials``;
* **YUBI public layout** - a directory like ``results/yubi/data`` (its
  ``success_rate_overall/<Scene>.csv``: ``Real (pi_1)`` / ``Real (pi_2)`` rows),
  read with :func:`protocols.yubi.load_yubi`; scene and task names match the
  spec's case-insensitively, ``pi_1``/``pi_2`` are the spec's policies in order.

Every refusal is one line naming the file, the row (1-based line number of the
CSV, header = line 1) and the fix. The result carries the source's path and
sha256 (a digest over the files read for the YUBI layout), which every table
and the manifest name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import BenchError

PER_TRIAL = ("scene", "task", "policy", "trial", "success")
PER_TRIAL_OPTIONAL = ("progress", "init_x", "init_y", "init_yaw_deg", "notes")
PER_CELL = ("scene", "task", "policy", "successes", "trials")
SIMULATED_REAL = "simulated-real"


@dataclass(frozen=True)
class RealOutcomes:
    """Real success counts of every (scene, task, policy) cell of a study.

    Attributes:
        counts: (scene, task, policy) -> (successes, trials).
        path: The file or directory read.
        sha256: sha256 of the file (YUBI layout: over the files read, in order).
        layout: ``per-trial``, ``per-cell`` or ``yubi``.
    """

    counts: dict[tuple[str, str, str], tuple[int, int]]
    path: str
    sha256: str
    layout: str

    @property
    def label(self) -> str:
        """The source as named in every table: ``real_results:<file> sha256:<first 12>``."""
        return f"real_results:{Path(self.path).name} sha256:{self.sha256[:12]}"

    def to_json(self) -> dict[str, Any]:
        """The outcomes as JSON (path, sha256, layout, counts)."""
        return {"path": self.path, "sha256": self.sha256, "layout": self.layout,
                "counts": [[*k, *v] for k, v in sorted(self.counts.items())]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> RealOutcomes:
        """Outcomes back from :meth:`to_json`."""
        counts = {(s, t, p): (int(k), int(n)) for s, t, p, k, n in data["counts"]}
        return RealOutcomes(counts, data["path"], data["sha256"], data["layout"])


def _fail(path: Path, line: int | None, message: str) -> BenchError:
    where = f"{path.name} row {line}" if line is not None else path.name
    return BenchError(f"real_results {where}: {message}")


def _integer(path: Path, line: int, column: str, value: Any) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number != int(number):
        raise _fail(path, line, f"{column} is {value!r}, not a whole number; write a count")
    if number < 0:
        raise _fail(path, line, f"{column} is {value!r}, a negative count; counts are >= 0")
    return int(number)


def _check_trials(path: Path, line: int, what: str, trials: int) -> None:
    """Refuse a cell of more real trials than any robot runs (issue 30: 1e22 was accepted)."""
    from bench.safety import MAX_REAL_TRIALS

    if trials > MAX_REAL_TRIALS:
        raise _fail(path, line, f"{what} exceeds the cap of {MAX_REAL_TRIALS:,} real trials per "
                    "cell; fix the count (a real robot runs far fewer)")


def _read_csv(path: Path):
    import pandas as pd

    from bench.tabular import read_csv_frame  # UTF-8 with or without a BOM

    try:
        frame = read_csv_frame(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise _fail(path, None, f"cannot be read as CSV ({exc}); fix the file") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    return frame


def _check_names(spec: Any, path: Path, line: int, scene: str, task: str, policy: str) -> None:
    if scene not in spec.scene_names:
        raise _fail(path, line, f"unknown scene {scene!r}; the spec's scenes are "
                    f"{spec.scene_names}")
    if task not in spec.tasks:
        raise _fail(path, line, f"unknown task {task!r}; the spec's tasks are {list(spec.tasks)}")
    if policy not in spec.policies[task]:
        raise _fail(path, line, f"unknown policy {policy!r} for task {task!r}; the spec's "
                    f"policies are {list(spec.policies[task])}")


def _per_trial(spec: Any, path: Path, frame: Any) -> dict[tuple[str, str, str], tuple[int, int]]:
    counts: dict[tuple[str, str, str], list[int]] = {}
    seen: dict[tuple[str, str, str, int], int] = {}
    for index, row in enumerate(frame.itertuples(index=False)):
        line = index + 2
        scene, task, policy = row.scene.strip(), row.task.strip().lower(), row.policy.strip()
        _check_names(spec, path, line, scene, task, policy)
        trial = _integer(path, line, "trial", row.trial)
        key = (scene, task, policy, trial)
        if key in seen:
            raise _fail(path, line, f"trial {trial} of {scene}/{task}/{policy} is listed twice "
                        f"(also row {seen[key]}); give every trial its own id")
        seen[key] = line
        text = row.success.strip().lower()
        value = {"1": 1, "0": 0, "true": 1, "false": 0, "1.0": 1, "0.0": 0}.get(text)
        if value is None:
            raise _fail(path, line, f"success is {row.success!r}; write 1/0 (or true/false)")
        for column in ("init_x", "init_y", "init_yaw_deg"):
            text_value = getattr(row, column).strip() if column in frame.columns else ""
            if text_value:
                try:
                    ok = math.isfinite(float(text_value))
                except ValueError:
                    ok = False
                if not ok:
                    raise _fail(path, line, f"{column} is {text_value!r}; write a number "
                                "(metres / degrees) or leave it empty")
        if "progress" in frame.columns and row.progress.strip():
            try:
                progress = float(row.progress)
            except ValueError:
                progress = math.nan
            if not 0.0 <= progress <= 1.0:
                raise _fail(path, line, f"progress is {row.progress!r}; write a number in [0, 1]")
        cell = counts.setdefault((scene, task, policy), [0, 0])
        cell[0] += value
        cell[1] += 1
        _check_trials(path, line, f"{scene}/{task}/{policy}: {cell[1]:,} trials", cell[1])
    return {k: (v[0], v[1]) for k, v in counts.items()}


def _per_cell(spec: Any, path: Path, frame: Any) -> dict[tuple[str, str, str], tuple[int, int]]:
    counts: dict[tuple[str, str, str], tuple[int, int]] = {}
    rows: dict[tuple[str, str, str], int] = {}
    for index, row in enumerate(frame.itertuples(index=False)):
        line = index + 2
        scene, task, policy = row.scene.strip(), row.task.strip().lower(), row.policy.strip()
        _check_names(spec, path, line, scene, task, policy)
        k = _integer(path, line, "successes", row.successes)
        n = _integer(path, line, "trials", row.trials)
        if n < 1:
            raise _fail(path, line, "trials is 0; a cell needs at least one trial")
        _check_trials(path, line, f"trials {row.trials.strip()}", n)
        if k > n:
            raise _fail(path, line, f"successes {k} > trials {n}; fix the counts")
        key = (scene, task, policy)
        if key in rows:
            raise _fail(path, line, f"{scene}/{task}/{policy} is listed twice (also row "
                        f"{rows[key]}); give one row per cell")
        rows[key] = line
        counts[key] = (k, n)
    return counts


def _yubi(spec: Any, path: Path) -> tuple[dict[tuple[str, str, str], tuple[int, int]], str]:
    from bench.provenance import sha256_bytes, sha256_file
    from protocols.yubi import load_yubi

    try:
        data = load_yubi(path)
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(path, None, f"{exc}") from None
    scenes = {s.lower(): s for s in spec.scene_names}
    counts = {}
    for (scene, task), pair in data.clean.items():
        name, task_name = scenes.get(scene.lower()), task.lower()
        if name is None or task_name not in spec.tasks:
            continue  # the public data may hold more scenes / tasks than the study
        p1, p2 = spec.policies[task_name]
        counts[(name, task_name, p1)] = (pair.real_k1, pair.real_n1)
        counts[(name, task_name, p2)] = (pair.real_k2, pair.real_n2)
    digest = sha256_bytes("".join(f"{f.relative_to(path)}\t{sha256_file(f)}\n"
                                  for f in data.files).encode())
    return counts, digest


def _check_complete(spec: Any, path: Path,
                    counts: dict[tuple[str, str, str], tuple[int, int]]) -> None:
    for scene in spec.scene_names:
        for task in spec.tasks:
            present = [p for p in spec.policies[task] if (scene, task, p) in counts]
            if len(present) == 1:
                missing = next(p for p in spec.policies[task] if p not in present)
                raise _fail(path, None, f"{scene}/{task} has outcomes for {present[0]} only; a "
                            f"comparison needs both policies - add {missing}'s trials")
            if not present:
                raise _fail(path, None, f"no outcomes for {scene}/{task}; add both policies' "
                            "trials or drop the scene/task from the spec")


def read_real_results(spec: Any) -> RealOutcomes:
    """Read and validate ``spec.real_results`` against the spec's scenes, tasks, policies."""
    from bench.provenance import sha256_file

    path = Path(spec.real_results)
    if path.is_dir():
        counts, digest = _yubi(spec, path)
        layout = "yubi"
    elif path.is_file():
        frame = _read_csv(path)
        columns = set(frame.columns)
        if {"trial", "success"} & columns:
            layout, required = "per-trial", PER_TRIAL
        elif {"successes", "trials"} & columns:
            layout, required = "per-cell", PER_CELL
        else:
            raise _fail(path, None, f"columns {sorted(columns)} are neither per-trial "
                        f"{list(PER_TRIAL)} nor per-cell {list(PER_CELL)}; fix the header")
        missing = [c for c in required if c not in columns]
        if missing:
            raise _fail(path, None, f"missing columns {missing} ({layout} layout needs "
                        f"{list(required)}); fix the header")
        if frame.empty:
            raise _fail(path, None, "holds no rows; add the real trials")
        reader = _per_trial if layout == "per-trial" else _per_cell
        counts = reader(spec, path, frame)
        digest = sha256_file(path)
    else:
        raise BenchError(f"real_results {path} does not exist; give the CSV of your robot's "
                         "trials (relative paths are relative to the spec)")
    _check_complete(spec, path, counts)
    return RealOutcomes(counts, str(path), digest, layout)
