"""Reuse the rollouts of an earlier study (``--reuse-from DIR``) instead of running them again.

A rollout depends only on its bundle, task, policy, domain and start
(:func:`bench.study.plan.init_index`, :mod:`bench.study.work_unit`), so when a study is run
again with e.g. one task's policy pair changed, every row of an unchanged (task, policy)
cell is the row a fresh run would store. :func:`reuse_from` copies those rows from the
earlier study's store, checked, so that only the missing rollouts run:

1. :func:`check_source` (before ``--out`` is touched): ``DIR`` is another study output whose
   stored spec equals the new one in every top-level field except those that only select
   which cells exist (:data:`FREE_FIELDS`, and :data:`PER_ENTRY_FIELDS` where both studies
   have the entry: :func:`spec_difference`);
2. the rows to reuse: planned by the new spec (:func:`bench.study.plan.rollout_plan`),
   stored in the source, missing from the new store, run under the same (scene, task) time
   limit (a changed limit runs that cell again: :func:`same_limit`), simulated rows only
   under the same simulated-only settings of their scene (:func:`sim_rerun_scenes`), and on
   a bundle whose manifest sha256 is the new bundle's (a changed bundle is refused);
3. the spot check: per reused (scene, task, policy, domain) group one rollout - the lowest
   planned trial of the first planned condition with a reusable row - run again with the
   new study's env and policies by its executor and compared with the source's row in
   every column (:data:`CHECKED_COLUMNS`; none is wall-clock), reply extras and OBS-Policy
   frames; any difference refuses the run and stores nothing;
4. one transaction copies the other rows with their reply extras, latency measurements and
   the policies' measured latency, and the Test / OBS-Probe quality rows of bundles both
   studies scored alike, and records what was reused (meta :data:`META_KEY`, also written
   to ``<out>/``:data:`RECORD_FILE`); the check rollouts are then committed as ordinary rows.

The source is read through :meth:`~bench.study.store.ResultsStore.open_read_only`; nothing
in it is written or locked. OBS-Policy scores are not copied: they are scored after the
rollouts from the (copied) frames, per condition.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.study.plan import rollout_plan
from bench.study.spec import StudySpec
from bench.study.store import (
    DB_NAME,
    QUALITY_COLUMNS,
    REPLY_COLUMNS,
    ROLLOUT_COLUMNS,
    ROLLOUT_KEY,
    ResultsStore,
    RolloutRow,
)

#: Meta key of the new store: a JSON list, one record per run that reused rows.
META_KEY = "reused_from"
#: The same records as a manifest in the study output.
RECORD_FILE = "reused_from.json"
SPEC_FILE = "study.json"  # bench.study.runner.SPEC_FILE (a higher floor)
#: Spec fields that only select which cells exist: free to differ.
FREE_FIELDS = ("policies", "trials", "real_trials", "tasks", "conditions", "metrics")
#: Spec fields whose entries select cells: free to differ where only one study has the entry
#: (an extra condition's per-scene paths, a policy label's ref). ``max_frames`` may differ
#: too, but a (scene, task) whose limit differs is run again (:func:`same_limit`).
PER_ENTRY_FIELDS = ("extra_conditions", "policy_refs")
#: ``real_world`` keys (scene -> entry) that only change the simulated domain's rollouts of
#: that scene: free to differ; the simulated rows of a scene whose entry differs are run
#: again, its real rows and quality rows are still reused (:func:`sim_rerun_scenes`).
SIM_ONLY_WORLD_KEYS = ("background_color",)
#: Columns the spot check compares: every non-key column (none is wall-clock).
CHECKED_COLUMNS = tuple(c for c in ROLLOUT_COLUMNS if c not in ROLLOUT_KEY)
#: Quality protocols copied (OBS-Policy is scored later from the frames).
QUALITY_PROTOCOLS = ("test", "obs-probe")
_LATENCY_COLUMNS = (*ROLLOUT_KEY, "queries", "p50_ms", "p95_ms")  # bench.study.faults


def _log(message: str) -> None:
    print(f"[bench study] {message}", file=sys.stderr)


# --------------------------------------------------------------------------- the source


@dataclass(frozen=True)
class ReuseSource:
    """An earlier study output found fit to reuse (:func:`check_source`)."""

    given: str  # the path as given (recorded)
    path: Path
    spec: dict[str, Any]  # its stored spec
    spec_sha256: str  # sha256 of the stored spec text


def _defaults() -> dict[str, Any]:
    """Every spec field's default as JSON (a stored spec may lack a later or dropped key)."""
    from bench.provenance import to_jsonable

    out = {}
    for f in dataclasses.fields(StudySpec):
        value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out[f.name] = json.loads(json.dumps(to_jsonable(value)))
    return out


def _limit(max_frames: Any, scene: str, task: str) -> int | None:
    """A (scene, task) time limit of a stored ``max_frames`` (StudySpec.frames_limit)."""
    if isinstance(max_frames, Mapping):
        return (max_frames.get(scene) or {}).get(task)
    return max_frames


def same_limit(source: Mapping[str, Any], spec: StudySpec, scene: str, task: str) -> bool:
    """Whether ``source`` (a stored spec JSON) ran (scene, task) under ``spec``'s time limit.

    A rollout's outcome depends on its limit, so the rows of a (scene, task) whose limit
    changed (e.g. re-measured for a new policy pair) are run again, never reused.
    """
    default = _defaults()["max_frames"]
    theirs = _limit(source.get("max_frames", default), scene, task)
    return theirs == spec.frames_limit(scene, task)


def sim_rerun_scenes(source: Mapping[str, Any], spec: StudySpec) -> set[str]:
    """Scenes whose simulated rows ``spec`` runs again: a :data:`SIM_ONLY_WORLD_KEYS` entry differs.

    (The colour map of a scene's simulated backgrounds, e.g.: the real domain and the Test /
    OBS-Probe scores never see it.)
    """
    new = json.loads(json.dumps(spec.to_json(), sort_keys=True)).get("real_world") or {}
    old = source.get("real_world") or {}
    return {scene for key in SIM_ONLY_WORLD_KEYS
            for scene in set(old.get(key) or {}) | set(new.get(key) or {})
            if (old.get(key) or {}).get(scene) != (new.get(key) or {}).get(scene)}


def same_settings(source: Mapping[str, Any], spec: StudySpec) -> Callable[[str, str, str], bool]:
    """``(scene, task, domain) -> bool``: whether ``source`` ran that cell as ``spec`` runs it.

    The same time limit (:func:`same_limit`) and, for simulated cells, the same simulated-only
    settings of the scene (:func:`sim_rerun_scenes`, computed once here).
    """
    rerun = sim_rerun_scenes(source, spec)

    def same(scene: str, task: str, domain: str) -> bool:
        return same_limit(source, spec, scene, task) and not (domain == "sim" and scene in rerun)

    return same


def spec_difference(source: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Top-level fields of two spec JSONs that forbid reusing ``source``'s rows for ``new``.

    :data:`FREE_FIELDS` may differ; :data:`PER_ENTRY_FIELDS` only where both have the entry
    and use it: an extra condition in both must have the same per-scene paths, a policy
    label both studies run the same ref (or none in both). ``max_frames`` may differ: a
    (scene, task) whose limit differs has none of its rows reused (:func:`same_limit`);
    so may ``real_world``'s :data:`SIM_ONLY_WORLD_KEYS`: a scene whose entry differs has none
    of its simulated rows reused (:func:`sim_rerun_scenes`). Every other field must be equal
    (``name`` too: it is part of the row key).
    """
    defaults = _defaults()

    def get(spec: Mapping[str, Any], key: str) -> Any:
        return spec.get(key, defaults.get(key))

    def labels(spec: Mapping[str, Any]) -> set[str]:
        return {p for pair in (get(spec, "policies") or {}).values() for p in pair}

    differ = []
    for key in sorted(set(source) | set(new)):
        a, b = get(source, key), get(new, key)
        if key in FREE_FIELDS:
            continue
        if key == "extra_conditions":
            a, b = a or {}, b or {}
            same = all(a[c] == b[c] for c in set(a) & set(b))
        elif key == "policy_refs":
            a, b = a or {}, b or {}
            same = all(a.get(p) == b.get(p) for p in labels(source) & labels(new))
        elif key == "max_frames":
            continue  # per (scene, task): a changed limit keeps that cell's rows out
        elif key == "real_world":  # per scene: a changed simulated-only entry, sim rows out
            a, b = ({k: v for k, v in (w or {}).items() if k not in SIM_ONLY_WORLD_KEYS}
                    for w in (a, b))
            same = a == b
        else:
            same = a == b
        if not same:
            differ.append(key)
    return differ


def check_source(spec: StudySpec, source: str | Path, *, out: str | Path | None
                 ) -> ReuseSource:
    """``source`` if its rows may be reused by ``spec`` run into ``out``; else one-line BenchError.

    Reads only: the source's stored spec, through a read-only connection. ``out`` None (a
    dry run without an output) skips the checks of the two directories against each other.
    """
    from bench.provenance import sha256_bytes
    from bench.safety import MARKER, check_output_path, real

    given = str(source)
    flag = f"--reuse-from {given}"
    if spec.sequential is not None:  # which trials ran depended on both policies of a pair
        raise BenchError(f"{flag}: a study with sequential stopping (spec key sequential) "
                         "cannot reuse rows; run without --reuse-from")
    path = Path(source)
    if not path.is_dir():
        raise BenchError(f"{flag} is not a directory; pass the --out directory of an earlier "
                         "study")
    if not ((path / SPEC_FILE).is_file() or (path / MARKER).is_file()):
        raise BenchError(f"{flag} is not a study output (no {SPEC_FILE}); pass the --out "
                         "directory of an earlier bench study run or bench demo")
    if not (path / DB_NAME).is_file():
        raise BenchError(f"{flag} holds no {DB_NAME} (the study stopped before it stored "
                         "anything); pass a study output that holds rollouts")
    if out is not None and real(path) == real(Path(out)):
        raise BenchError(f"{flag} is --out itself; reuse reads an earlier study in another "
                         "directory (to continue this one, pass --resume instead)")
    if out is not None:
        check_output_path(out, inputs=[("--reuse-from", path)])  # neither inside the other
    with ResultsStore.open_read_only(path / DB_NAME) as store:
        text = store.get_meta("spec")
    if text is None:
        raise BenchError(f"{flag}: its {DB_NAME} holds no study spec; pass the output of a "
                         "bench study run or bench demo")
    stored = json.loads(text)
    differ = spec_difference(stored, json.loads(json.dumps(spec.to_json(), sort_keys=True)))
    if differ:
        raise BenchError(
            f"{flag} ran a spec that differs in {', '.join(differ)}; only "
            f"{', '.join(FREE_FIELDS)} may differ (and {', '.join(PER_ENTRY_FIELDS)} where one "
            f"study lacks the entry) - run without --reuse-from, or with the source's "
            f"{differ[0]}")
    return ReuseSource(given, path, stored, sha256_bytes(text.encode()))


def count_reusable(spec: StudySpec, source: ReuseSource) -> tuple[int, int]:
    """(rows of ``source`` that ``spec`` plans, rollouts ``spec`` plans): for ``--dry-run``."""
    planned = [(spec.name, scene, cond, task, policy, domain, trial)
               for domain, scene, cond, task, trial in rollout_plan(spec)
               for policy in spec.policies[task]]
    with ResultsStore.open_read_only(source.path / DB_NAME) as src:
        stored = {row.key for row in src.rollouts(spec.name)}
    same = same_settings(source.spec, spec)
    held = sum(key in stored and same(key[1], key[3], key[5]) for key in planned)
    return held, len(planned)


# --------------------------------------------------------------------------- the report


@dataclass
class ReuseReport:
    """What :func:`reuse_from` did.

    Attributes:
        source: The source directory as given.
        spec_sha256: sha256 of the source's stored spec text.
        copied: (task, policy, domain) -> rows copied.
        checked: Rollout keys re-run by the spot check (one per group), stored as new rows.
        quality_rows: Test / OBS-Probe quality rows copied.
        reply_rows: Policy-reply rows copied.
    """

    source: str
    spec_sha256: str
    copied: dict[tuple[str, str, str], int] = field(default_factory=dict)
    checked: list[tuple] = field(default_factory=list)
    quality_rows: int = 0
    reply_rows: int = 0

    @property
    def rows(self) -> int:
        """Rollout rows copied."""
        return sum(self.copied.values())

    def to_json(self) -> dict[str, Any]:
        """The record stored under :data:`META_KEY` (keys ``task/policy/domain``)."""
        return {"source": self.source, "spec_sha256": self.spec_sha256,
                "copied": {"/".join(k): n for k, n in sorted(self.copied.items())},
                "checked": ["/".join(map(str, k[1:])) for k in self.checked],
                "quality_rows": self.quality_rows, "reply_rows": self.reply_rows}


# --------------------------------------------------------------------------- reuse


def reuse_from(spec: StudySpec, store: ResultsStore, source: str | Path | ReuseSource, *,
               bundles: Mapping[tuple[str, str], Any], out: str | Path | None = None,
               check: bool = True, progress: bool = True, executor: Any = None
               ) -> ReuseReport:
    """Copy the rows of ``source`` that ``spec`` plans and ``store`` lacks; see the module doc.

    Args:
        spec: The new study.
        store: Its open results store (written).
        source: The earlier study output (a path, or :func:`check_source`'s result).
        bundles: (scene, condition) -> :class:`bench.study.runner.ConditionBundle` of the new
            study (prepared: their manifests are compared with the source's rows).
        out: The new study's output directory (default: the store's directory).
        check: Run the spot check first (False copies unchecked: tests only).
        progress: Show the check's progress.
        executor: :class:`bench.study.executors.ExecutorConfig` of the check rollouts.

    Raises:
        BenchError: An unfit source, a changed bundle, missing OBS-Policy frames, or a check
            rollout that differs from the source's row or fails; then nothing was stored.
    """
    out = Path(store.path).parent if out is None else Path(out)
    found = source if isinstance(source, ReuseSource) else check_source(spec, source, out=out)
    report = ReuseReport(found.given, found.spec_sha256)
    with ResultsStore.open_read_only(found.path / DB_NAME) as src:
        rows = _reusable_rows(spec, store, src, found, bundles)
        frames = _source_frames(spec, found, rows)
        checks = _check_keys(rows) if check else {}
        latency = {(t, p): v for t, p, v in _source_table(
            src, "policy_latency", ("task", "policy", "p50_ms"), spec.name)}
        events = _spot_check(spec, src, found, checks, bundles, frames, latency, store,
                             executor=executor, progress=progress) if checks else []
        copied = [r for r in rows if r.key not in checks]
        keys = {r.key for r in copied}
        replies = [r for r in src.policy_replies(spec.name)
                   if tuple(r[k] for k in ROLLOUT_KEY) in keys]
        quality = _reusable_quality(spec, store, src, found, bundles)
        latencies = [r for r in _source_table(src, "rollout_latency", _LATENCY_COLUMNS,
                                              spec.name) if tuple(r[:7]) in keys]
    if not rows and not quality:  # nothing (left) to reuse: a resumed reuse
        records = json.loads(store.get_meta(META_KEY) or "[]")
        if records:  # the record file of a run killed right after its copy
            _write_record(out, records)
        return report
    for row in copied:
        report.copied[(row.task, row.policy, row.domain)] = \
            report.copied.get((row.task, row.policy, row.domain), 0) + 1
    report.checked = list(checks)
    report.quality_rows, report.reply_rows = len(quality), len(replies)
    _copy_frames(out, frames, keys)  # before the rows: a stored rollout always has its frames
    used = {(r.task, r.policy) for r in rows}
    records = json.loads(store.get_meta(META_KEY) or "[]") + [report.to_json()]
    from bench.study.faults import RolloutLog

    RolloutLog(store.path).close()  # its tables exist before the transaction writes them
    with store.transaction() as db:
        for row in copied:
            store.add_rollout(row)
        for key in keys:  # an error an earlier attempt left is void now
            db.execute(f"DELETE FROM rollout_errors WHERE {_where(ROLLOUT_KEY)}", key)
            db.execute(f"DELETE FROM policy_replies WHERE {_where(ROLLOUT_KEY)}", key)
        db.executemany(_insert("policy_replies", REPLY_COLUMNS),
                       [tuple(r[c] for c in REPLY_COLUMNS) for r in replies])
        db.executemany(_insert("quality", QUALITY_COLUMNS), quality)
        db.executemany(_insert("rollout_latency", _LATENCY_COLUMNS, verb="INSERT OR REPLACE"),
                       latencies)
        # the latency the copied rows ran with (deployment latency_ms "p50") stays the study's
        db.executemany("INSERT OR IGNORE INTO policy_latency VALUES (?, ?, ?, ?)",
                       [(spec.name, t, p, latency[(t, p)]) for t, p in sorted(used)
                        if (t, p) in latency])
        store.set_meta(META_KEY, json.dumps(records, sort_keys=True))
    _write_record(out, records)
    if events:
        from bench.study.rollouts import commit_outcome

        with RolloutLog(store.path) as log:
            for event in events:
                commit_outcome(spec, store, log, out, event)
    return report


def _reusable_rows(spec: StudySpec, store: ResultsStore, src: ResultsStore,
                   found: ReuseSource, bundles: Mapping[tuple[str, str], Any]
                   ) -> list[RolloutRow]:
    """Source rows ``spec`` plans and ``store`` lacks, in plan order; a changed bundle refused."""
    stored = {row.key: row for row in src.rollouts(spec.name)}
    same = same_settings(found.spec, spec)
    rows = []
    for domain, scene, cond, task, trial in rollout_plan(spec):
        for policy in spec.policies[task]:
            key = (spec.name, scene, cond, task, policy, domain, trial)
            row = stored.get(key)
            if row is None or store.has_rollout(key) \
                    or not same(scene, task, domain):
                continue
            sha = bundles[(scene, cond)].manifest_sha256
            if row.manifest_sha256 != sha:  # the row names the bundle it ran on
                raise BenchError(
                    f"--reuse-from {found.given}: condition {scene}/{cond} is not the bundle "
                    f"the source ran on (manifest sha256 {sha[:12]} here, "
                    f"{row.manifest_sha256[:12]} there: the bundle, its editor or the bench "
                    "version changed); run without --reuse-from")
            rows.append(row)
    return rows


def _source_frames(spec: StudySpec, found: ReuseSource, rows: list[RolloutRow]
                   ) -> dict[tuple, Path]:
    """Rollout key -> the source's OBS-Policy frames of every simulated row (when kept)."""
    from bench.study.obs_policy import frames_path, obs_policy_enabled

    if not obs_policy_enabled(spec):
        return {}
    paths = {}
    for row in rows:
        if row.domain != "sim":  # the "real" domain keeps none
            continue
        path = frames_path(found.path, row.scene, row.condition, row.task, row.policy, row.trial)
        if not path.is_file():
            raise BenchError(f"--reuse-from {found.given}: it holds no OBS-Policy frames "
                             f"{path} (it ran with another obs_policy_every or without an NR "
                             "metric); run without --reuse-from")
        paths[row.key] = path
    return paths


def _check_keys(rows: list[RolloutRow]) -> dict[tuple, RolloutRow]:
    """The spot check: key -> source row, one per (scene, task, policy, domain) group.

    ``rows`` is in plan order (condition, task, trial), so a group's first row is the lowest
    reusable trial of its first planned condition with a reusable row.
    """
    first: dict[tuple, RolloutRow] = {}
    for row in rows:
        first.setdefault((row.scene, row.task, row.policy, row.domain), row)
    return {row.key: row for row in first.values()}


def _spot_check(spec: StudySpec, src: ResultsStore, found: ReuseSource,
                checks: dict[tuple, RolloutRow], bundles: Mapping[tuple[str, str], Any],
                frames: dict[tuple, Path], latency: dict[tuple[str, str], float],
                store: ResultsStore, *, executor: Any, progress: bool) -> list[Any]:
    """Run the check rollouts through the executor and compare; their events, in order.

    Nothing is stored here: a difference refuses the run before anything is copied.
    """
    from bench.progress import progress as progress_bar
    from bench.study.executors import EXECUTORS, Driver, ExecutorConfig, chunks_of
    from bench.study.faults import RolloutLog
    from bench.study.work_unit import RolloutOutcome

    # one env per worker: rows are identical to a vector env's, and a check runs 1-2 per cell
    config = dataclasses.replace(executor or ExecutorConfig(), envs_per_worker=1)
    parallel = EXECUTORS.entry(config.kind).meta["parallel"]
    todo: dict[tuple[str, str, str, str], list[tuple[str, int]]] = {}
    for _, scene, cond, task, policy, domain, trial in checks:
        todo.setdefault((scene, cond, task, domain), []).append((policy, trial))
    chunks = chunks_of(spec, todo, bundles, size=config.chunk_size if parallel else None)
    events: list[Any] = []
    failures: dict[tuple, int] = {}
    failed: dict[tuple, str] = {}

    def attempt_failed(key: tuple, reason: str) -> bool:
        failures[key] = failures.get(key, 0) + 1
        if failures[key] <= config.retries:
            return True
        failed[key] = reason
        return False

    bar = progress_bar(total=len(checks), desc="reuse check", unit="rollout", file=sys.stderr,
                       disable=not progress)
    with RolloutLog(store.path) as log:
        def known(task: str, policy: str) -> float | None:  # the new study's own first
            value = log.policy_latency(spec.name, task, policy)
            return latency.get((task, policy)) if value is None else value

        try:
            EXECUTORS.get(config.kind)(spec, chunks, Driver(events.append, attempt_failed, bar,
                                                            known), config)
        finally:
            bar.close()
    outcomes = {e.key: e for e in events if isinstance(e, RolloutOutcome)}
    replies: dict[tuple, list] = {}
    for r in src.policy_replies(spec.name):
        key = tuple(r[k] for k in ROLLOUT_KEY)
        if key in checks:
            replies.setdefault(key, []).append((r["query"], r["extras"]))
    for key, old in checks.items():
        where = "/".join(map(str, key[1:6])) + f" trial {key[6]}"
        event = outcomes.get(key)
        if event is None or event.row is None:
            reason = failed.get(key) or (event.error if event is not None else "not run")
            reason = " ".join(str(reason).split())[:300]  # one line, however the policy wrote it
            raise BenchError(f"--reuse-from {found.given}: the check rollout {where} ended in "
                             f"an error ({reason}); nothing was copied - fix the policy, or "
                             "run without --reuse-from")
        differ = [f"{c} ({_plain(getattr(event.row, c))!r} here, {getattr(old, c)!r} in the "
                  "source)" for c in CHECKED_COLUMNS
                  if not _equal(getattr(event.row, c), getattr(old, c))]
        if sorted(event.replies or []) != sorted(replies.get(key, [])):
            differ.append("policy reply extras")
        if key in frames and not _same_frames(event.frames, frames[key]):
            differ.append("OBS-Policy frames")
        if differ:
            raise BenchError(f"--reuse-from {found.given}: the check rollout {where} differs "
                             f"from the source's in {', '.join(differ)}: the policy's weights "
                             "or the simulator changed since the source ran; nothing was "
                             "copied - run without --reuse-from")
    return events


def _equal(a: Any, b: Any) -> bool:
    """Exactly equal (the CSV writes floats in full); NaN equals NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it is stored as (for messages)."""
    return value.item() if hasattr(value, "item") else value


def _same_frames(frames: list[Any] | None, path: Path) -> bool:
    import numpy as np

    if frames is None:
        return False
    with np.load(path) as data:
        stored = data["frames"]
    return bool(np.array_equal(np.stack(frames).astype(np.uint8), stored))


def _reusable_quality(spec: StudySpec, store: ResultsStore, src: ResultsStore,
                      found: ReuseSource, bundles: Mapping[tuple[str, str], Any]
                      ) -> list[tuple]:
    """Test / OBS-Probe quality rows (QUALITY_COLUMNS tuples) of the source to copy.

    Per (scene, condition, protocol) the new study scores and lacks: when the source scored
    the same bundle (manifest sha256) with every metric of the new spec (a protocol is
    scored whole: ``score_quality`` skips one with any row), only the new spec's metrics.
    """
    metrics = set(spec.metrics)
    if not metrics <= set(found.spec.get("metrics") or ()):
        return []
    shas = {(c["scene"], c["condition"]): c["manifest_sha256"]
            for c in src.conditions(spec.name)}
    cells: dict[tuple[str, str, str], list[tuple]] = {}
    for q in src.quality(spec.name):
        if q["view_protocol"] in QUALITY_PROTOCOLS and q["metric"] in metrics:
            cells.setdefault((q["scene"], q["condition"], q["view_protocol"]), []).append(
                tuple(q[c] for c in QUALITY_COLUMNS))
    rows = []
    for scene in spec.scene_names:
        for cond in spec.quality_conditions:
            if shas.get((scene, cond)) != bundles[(scene, cond)].manifest_sha256:
                continue
            for protocol in QUALITY_PROTOCOLS:
                if not store.has_quality(spec.name, scene, cond, protocol):
                    rows += cells.get((scene, cond, protocol), [])
    return rows


def _source_table(src: ResultsStore, table: str, columns: tuple[str, ...], study: str
                  ) -> list[tuple]:
    """Rows of one of the source's fault / latency tables (none when it lacks the table).

    Read through the store's read-only connection (:class:`~bench.study.faults.RolloutLog`
    opens its database read-write).
    """
    db = src._db
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                  (table,)).fetchone() is None:
        return []
    return [tuple(r) for r in db.execute(
        f"SELECT {', '.join(columns)} FROM {table} WHERE study = ?", (study,))]


def _copy_frames(out: Path, frames: dict[tuple, Path], keys: set[tuple]) -> None:
    from bench.provenance import atomic_write_bytes
    from bench.study.obs_policy import frames_path

    for key, path in frames.items():
        if key in keys:
            _, scene, cond, task, policy, _, trial = key
            atomic_write_bytes(frames_path(out, scene, cond, task, policy, trial),
                               path.read_bytes())


def _where(columns: tuple[str, ...]) -> str:
    return " AND ".join(f"{c} = ?" for c in columns)


def _insert(table: str, columns: tuple[str, ...], *, verb: str = "INSERT") -> str:
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _write_record(out: Path, records: list[dict[str, Any]]) -> None:
    """``<out>/reused_from.json``: every reuse of this output, as a manifest."""
    from bench.provenance import atomic_write_json, make_manifest

    atomic_write_json(out / RECORD_FILE, make_manifest(
        tool="study-reuse/1", params={"sources": sorted({r["source"] for r in records})},
        seed=None, counts={"rows": sum(sum(r["copied"].values()) for r in records),
                           "checked": sum(len(r["checked"]) for r in records)},
        extra={"reused_from": records}))
