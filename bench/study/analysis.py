"""Verdicts of a study from its results store: rates, ranking agreement, transitions, reliability.

Everything here is recomputed from the stored rows with :mod:`protocols`:

* ``success_rates`` - per (scene, task, condition, domain, policy): k / n with a
  95% Wilson interval;
* ``ranking`` - per condition: pairwise ranking agreement with the "real"
  domain (correct / eligible, reversals, simulated and real ties), MAE in
  percentage points, MMRV (SIMPLER, per scene-task comparison of the two
  policies, averaged over comparisons) and Pearson r of the simulated vs real
  rates over every policy cell;
* ``transitions`` - per counterfactual condition vs clean: Fisher significance
  lost / gained, reversed, newly tied, agreement, corrected;
* ``quality`` - per (scene, condition, view protocol, metric): mean over frames
  and the paired change vs clean;
* ``reliability`` - the scene-held-out threshold classifier (YUBI Eq. 8) for
  every (view protocol, metric) as a method, per task and All-three, plus the
  always-reliable baseline (needs >= 2 scenes); comparisons whose real
  outcome is a tie are unrankable and left out;
* figures ``ranking_<condition>.png/.pdf`` - real vs simulated success per
  scene and task (Wilson bars), clean rates as red ticks.

Every table names where its real numbers came from (column ``real_source``:
``real_results:<file> sha256:<12 hex>`` or ``simulated-real``) and the quality
table where its Test references came from (``test_reference``: the capture
file, ``synthetic-capture`` or ``renders-only``). The real counts of a study
with ``real_results`` are read from the store's ``real_source`` entry.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.study.spec import CLEAN, StudySpec
from bench.study.store import ResultsStore
from protocols.figures import ranking_figure
from protocols.metric_directions import is_lower_better
from protocols.ranking import REAL_TIE, PolicyPair, mae, mmrv, pearson, rank_agreement
from protocols.reliability import (
    ALL_THREE,
    all_tasks_label,
    evaluate_methods,
    reliability_label,
)
from protocols.stats import wilson_interval
from protocols.tablefmt import write_table
from protocols.transitions import condition_transitions

Counts = dict[tuple[str, str, str, str, str], tuple[int, int]]


def real_source(store: ResultsStore) -> dict[str, Any]:
    """The stored real-domain source (``kind``, ``label``, and for real results the counts)."""
    import json

    from bench.study.real_results import SIMULATED_REAL

    text = store.get_meta("real_source")
    return json.loads(text) if text else {"kind": SIMULATED_REAL, "label": SIMULATED_REAL}


def success_counts(store: ResultsStore, study: str) -> Counts:
    """(scene, condition, task, policy, domain) -> (successes, trials).

    With ``real_results`` the ``real`` cells are the robot's counts (condition ``clean``).
    """
    counts: dict[tuple[str, str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in store.rollouts(study):
        cell = counts[(row.scene, row.condition, row.task, row.policy, row.domain)]
        cell[0] += int(row.success)
        cell[1] += 1
    source = real_source(store)
    if source["kind"] == "real_results":
        for scene, task, policy, k, n in source["counts"]:
            counts[(scene, CLEAN, task, policy, "real")] = [int(k), int(n)]
    return {k: (v[0], v[1]) for k, v in counts.items()}


def condition_pairs(spec: StudySpec, counts: Counts, condition: str
                    ) -> dict[tuple[str, str], PolicyPair]:
    """(scene, task) -> pi_1 vs pi_2 with real counts and the condition's sim counts."""
    pairs = {}
    for scene in spec.scene_names:
        for task in spec.tasks:
            p1, p2 = spec.policies[task]
            real1 = counts[(scene, CLEAN, task, p1, "real")]
            real2 = counts[(scene, CLEAN, task, p2, "real")]
            sim1 = counts[(scene, condition, task, p1, "sim")]
            sim2 = counts[(scene, condition, task, p2, "sim")]
            pairs[(scene, task)] = PolicyPair(f"{scene}/{task}", *real1, *real2, *sim1, *sim2)
    return pairs


def _rates_table(spec: StudySpec, counts: Counts, out: Path, source: str) -> list[Path]:
    rows = []
    for scene in spec.scene_names:
        for task in spec.tasks:
            cells = [(CLEAN, "real")] + [(c, "sim") for c in spec.all_conditions]
            for cond, domain in cells:
                for role, policy in zip(("pi_1", "pi_2"), spec.policies[task], strict=True):
                    k, n = counts[(scene, cond, task, policy, domain)]
                    ci = wilson_interval(k, n)
                    rows.append([scene, task, cond, domain, role, policy, k, n, k / n, ci.low,
                                 ci.high, source if domain == "real" else "simulation"])
    header = ["scene", "task", "condition", "domain", "role", "policy", "successes", "trials",
              "rate", "wilson_low", "wilson_high", "source"]
    return write_table(out, "success_rates", header, rows,
                       title="Success rates (95% Wilson intervals)",
                       notes=[f"Real domain: {source}."])


def correlation_stats(pairs: dict[tuple[str, str], PolicyPair]) -> tuple[float, float]:
    """(MMRV, Pearson r) of simulated vs real success rates of one condition.

    MMRV is :func:`protocols.ranking.mmrv` (SIMPLER) over the two policies of each
    scene-task comparison, averaged over comparisons (policies of different tasks are
    never ranked against each other); Pearson r over every policy cell (NaN when either
    side is constant).
    """
    values = [mmrv(sim=list(p.sim_rates), real=list(p.real_rates)) for p in pairs.values()]
    sim = [r for p in pairs.values() for r in p.sim_rates]
    real = [r for p in pairs.values() for r in p.real_rates]
    return float(np.mean(values)), pearson(sim=sim, real=real) if len(sim) >= 2 else float("nan")


def _ranking_table(spec: StudySpec, by_condition: dict[str, dict], out: Path, source: str
                   ) -> tuple[list[Path], list[dict[str, Any]]]:
    rows, summary = [], []
    for cond, pairs in by_condition.items():
        agreement = rank_agreement(pairs.values())
        error = mae(pairs.values()) if agreement.eligible else float("nan")
        violation, r = correlation_stats(pairs)
        rows.append([cond, agreement.correct, agreement.eligible, agreement.reversed,
                     agreement.sim_ties, agreement.real_ties, agreement.accuracy, error,
                     violation, r, source])
        summary.append({"condition": cond, "correct": agreement.correct,
                        "eligible": agreement.eligible, "accuracy": agreement.accuracy,
                        "mae": error, "mmrv": violation, "pearson": r, "real_source": source})
    header = ["condition", "correct", "eligible", "reversed", "sim_ties", "real_ties",
              "accuracy", "mae_pp", "mmrv", "pearson", "real_source"]
    stand_in = ("the same envs on the clean scene, initial conditions from a separate seeded "
                "block (simulated-real: a stand-in, no finding rests on it)")
    notes = ["Eligible: comparisons with a strict real order. Simulated ties count as wrong.",
             "MMRV: SIMPLER's mean maximum rank violation of the two policies per comparison, "
             "averaged over comparisons; Pearson: sim vs real rates over every policy cell.",
             f"Real domain: {stand_in if source == 'simulated-real' else source}."]
    paths = write_table(out, "ranking", header, rows, title="Ranking agreement vs real",
                        notes=notes)
    return paths, summary


def _transitions_table(spec: StudySpec, by_condition: dict[str, dict], out: Path, source: str
                       ) -> list[Path]:
    clean = list(by_condition[CLEAN].values())
    rows = []
    for cond, pairs in by_condition.items():
        if cond == CLEAN:
            continue
        t = condition_transitions(cond, clean, list(pairs.values()), alpha=spec.alpha)
        rows.append([cond, t.sig_lost, t.sig_gained, t.reversed, t.tied, t.agree, t.total,
                     t.corrected, source])
    header = ["condition", "sig_lost", "sig_gained", "reversed", "tied", "agree", "total",
              "corrected", "real_source"]
    notes = ["sig_lost/gained, reversed, tied, corrected: over every comparison, real ties "
             "included (YUBI Table I); agree/total: over the eligible ones.",
             f"Real domain: {source}."]
    return write_table(out, "transitions", header, rows,
                       title=f"Transitions vs clean (two-sided Fisher, p < {spec.alpha})",
                       notes=notes)


def quality_summary(store: ResultsStore, study: str
                    ) -> dict[tuple[str, str, str, str], float]:
    """(scene, condition, view protocol, metric) -> mean over frames."""
    values: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in store.quality(study):
        values[(row["scene"], row["condition"], row["view_protocol"], row["metric"])].append(
            row["value"])
    return {k: float(np.mean(v)) for k, v in values.items()}


def _quality_table(quality: dict, out: Path, test_sources: dict[str, str]) -> list[Path]:
    rows = []
    for (scene, cond, protocol, metric), value in sorted(quality.items()):
        clean = quality.get((scene, CLEAN, protocol, metric), float("nan"))
        reference = test_sources.get(scene, "") if protocol == "test" else "none (NR)"
        rows.append([scene, cond, protocol, metric, value, value - clean, reference])
    header = ["scene", "condition", "view_protocol", "metric", "mean", "delta_vs_clean",
              "test_reference"]
    notes = ["test_reference: the held-out captures (file + sha256), synthetic-capture (clean "
             "render + seeded noise, generated worlds only: clean PSNR is finite by "
             "construction) or renders-only (a user scene without captures: NR scores only)."]
    return write_table(out, "quality", header, rows, title="Scene quality (mean over frames)",
                       notes=notes)


def reliability_labels(spec: StudySpec, by_condition: dict[str, dict[tuple[str, str], PolicyPair]]
                       ) -> dict[str, dict[tuple[str, str], int]]:
    """Target (each task, and All-three when there are >= 2 tasks) -> {(scene, condition): H}.

    ``H`` is :func:`protocols.reliability.reliability_label` (1 when the simulated
    ranking disagrees with real, simulated ties included). Only the spec's
    ``reliability_conditions`` are labelled (YUBI: every counterfactual condition, clean
    excluded; ``include_clean`` adds it). A real tie is
    unrankable: it has no label, and a (scene, condition) gets an All-three label
    only when every task is rankable there (as :mod:`protocols.yubi` does).
    Targets with no label at all are left out.
    """
    labels: dict[str, dict[tuple[str, str], int]] = {t: {} for t in spec.tasks}
    all_three: dict[tuple[str, str], int] = {}
    chosen = spec.reliability_conditions
    for cond, pairs in by_condition.items():
        if cond not in chosen:
            continue
        for scene in spec.scene_names:
            rankable = [(t, pairs[(scene, t)]) for t in spec.tasks
                        if pairs[(scene, t)].outcome != REAL_TIE]
            for task, pair in rankable:
                labels[task][(scene, cond)] = reliability_label(pair)
            if len(spec.tasks) > 1 and len(rankable) == len(spec.tasks):
                all_three[(scene, cond)] = all_tasks_label(
                    labels[t][(scene, cond)] for t, _ in rankable)
    labels[ALL_THREE] = all_three
    return {t: m for t, m in labels.items() if m}


def reliability(spec: StudySpec, by_condition: dict[str, dict], quality: dict, out: Path,
                source: str = "simulated-real") -> tuple[list[Path], dict[str, Any]]:
    """Scene-held-out reliability classifier over every (view protocol, metric) method.

    A method's score of a (scene, condition) is its mean over frames; directions
    come from :mod:`protocols.metric_directions` (LPIPS is negated inside
    :func:`protocols.reliability.evaluate_methods`).
    """
    if len(spec.scene_names) < 2:
        return [], {"skipped": f"leave-one-scene-out reliability needs >= 2 scenes, the study "
                               f"has {len(spec.scene_names)} ({', '.join(spec.scene_names)}); "
                               "add a scene to get tables/reliability.csv"}
    # a target needs labelled conditions in >= 2 scenes to hold one scene out
    usable = {t: m for t, m in reliability_labels(spec, by_condition).items()
              if len({s for s, _ in m}) >= 2}
    scores: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for (scene, cond, protocol, metric), value in quality.items():
        if np.isfinite(value):
            scores[f"{protocol}:{metric}"][(scene, cond)] = value
    if not usable or not scores:
        return [], {"skipped": "no comparison is rankable (real outcomes not tied) in >= 2 "
                               "scenes, which leave-one-scene-out reliability needs; add trials "
                               "or scenes to get tables/reliability.csv"}
    directions = {m: is_lower_better(m.split(":", 1)[1]) for m in scores}
    results, _ = evaluate_methods(dict(sorted(scores.items())), usable, lower_better=directions)
    targets = list(usable)
    rows = [[r.method, *[f"{r.correct[t]}/{r.total[t]}" for t in targets], source]
            for r in results]
    paths = write_table(out, "reliability", ["method", *targets, "real_source"], rows,
                        title="Scene-held-out reliability classifier (correct / decisions)",
                        notes=["H = 1 when the simulated ranking disagrees with real "
                               "(ties included); predict H = 1 iff oriented Q < tau.",
                               "Real ties are unrankable: no label; All-three only where every "
                               "task is rankable; targets labelled in < 2 scenes are left out.",
                               f"Conditions labelled: {', '.join(spec.reliability_conditions)}"
                               f"; real domain: {source}."])
    label_rows = [[t, s, c, v, source] for t, m in usable.items()
                  for (s, c), v in sorted(m.items())]
    paths += write_table(out, "reliability_labels",
                         ["target", "scene", "condition", "label", "real_source"],
                         label_rows, title="Reliability labels", notes=[f"Real domain: {source}."])
    return paths, {"methods": {r.method: {t: [r.correct[t], r.total[t]] for t in targets}
                               for r in results}}


def analyse(spec: StudySpec, store: ResultsStore, out: str | Path) -> dict[str, Any]:
    """Write every table and figure under ``out``; returns a JSON-able summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    import json

    counts = success_counts(store, spec.name)
    source = real_source(store)["label"]
    test_sources = json.loads(store.get_meta("test_sources") or "{}")
    by_condition = {c: condition_pairs(spec, counts, c) for c in spec.all_conditions}
    quality = quality_summary(store, spec.name)
    files = _rates_table(spec, counts, out, source)
    paths, ranking = _ranking_table(spec, by_condition, out, source)
    files += paths
    files += _transitions_table(spec, by_condition, out, source)
    files += _quality_table(quality, out, test_sources)
    paths, rel = reliability(spec, by_condition, quality, out, source)
    files += paths
    figures = out.parent / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    for cond, pairs in by_condition.items():
        files += ranking_figure(figures / f"ranking_{cond}", pairs, scenes=spec.scene_names,
                                tasks=list(spec.tasks),
                                title=f"{spec.name}: {cond} (real: {source})",
                                clean=None if cond == CLEAN else by_condition[CLEAN])
    return {"ranking": ranking, "reliability": rel, "real_source": source,
            "files": sorted(str(p.relative_to(out.parent)) for p in files)}
