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
  lost / gained, reversed, newly tied, agreement, corrected; beside them the control's
  (``clean-repeat``: the clean bundle on other starts) lost + gained, the noise floor; the
  outcomes the condition changed on the shared starts (``worse``: clean success -> failure,
  ``better``: the reverse) with the exact McNemar p over them and, beside it, Fisher's p of
  the pooled counts (which ignores the pairing); and how many comparisons are UNDERPOWERED;
* ``paired`` - the same per (condition, scene, task, policy): McNemar on the shared starts
  beside Fisher on the counts;
* ``comparisons`` - per (condition, scene, task): pi_1 vs pi_2 simulated, Fisher p, the
  exact power at the observed rates and the verdict UNDERPOWERED where the trials cannot
  detect the observed gap at 80 % power (:func:`protocols.power.power_verdicts`, the scan
  behind ``bench plan trials``);
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

from bench.study.spec import CLEAN, CONTROL, StudySpec
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
from protocols.stats import fisher_exact_p, mcnemar_exact_p, wilson_interval
from protocols.tablefmt import write_table
from protocols.transitions import condition_transitions

Counts = dict[tuple[str, str, str, str, str], tuple[int, int]]
#: (scene, condition, task, policy) -> {trial: success} of the simulated rollouts.
Outcomes = dict[tuple[str, str, str, str], dict[int, int]]
#: Target power of the UNDERPOWERED verdict (``bench plan trials``' default).
TARGET_POWER = 0.8


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


def _p(value: float) -> str:
    """A p-value with 4 significant figures (a fixed 6 decimals would print 3e-9 as 0)."""
    return f"{value:.4g}"


def sim_outcomes(store: ResultsStore, study: str) -> Outcomes:
    """(scene, condition, task, policy) -> {trial: success} of every simulated rollout."""
    outcomes: Outcomes = defaultdict(dict)
    for row in store.rollouts(study):
        if row.domain == "sim":
            outcomes[(row.scene, row.condition, row.task, row.policy)][row.trial] = int(
                row.success)
    return dict(outcomes)


def paired_change(clean: dict[int, int], cond: dict[int, int]) -> tuple[int, int, int]:
    """(shared trials, worse, better) over the trials both have.

    ``worse``: success under clean, failure under the condition; ``better``: the reverse
    (McNemar's discordant pairs b and c).
    """
    shared = sorted(set(clean) & set(cond))
    worse = sum(clean[t] and not cond[t] for t in shared)
    better = sum(cond[t] and not clean[t] for t in shared)
    return len(shared), worse, better


#: Columns of a :func:`_paired_rows` row (the paired table adds ``real_source``).
PAIRED_COLUMNS = ("condition", "scene", "task", "role", "policy", "clean_successes",
                  "clean_trials", "successes", "trials", "paired_trials", "worse", "better",
                  "mcnemar_p", "fisher_p", "starts")
#: Columns of a :func:`_comparison_rows` row (the comparisons table adds ``real_source``).
COMPARISON_COLUMNS = ("condition", "scene", "task", "sim_k1", "sim_n1", "sim_k2", "sim_n2",
                      "fisher_p", "significant", "power", "trials_needed", "verdict", "real_k1",
                      "real_n1", "real_k2", "real_n2", "outcome")


def _paired_rows(spec: StudySpec, outcomes: Outcomes) -> list[list[Any]]:
    """Per (condition, scene, task, policy): clean vs condition, McNemar beside Fisher."""
    rows = []
    for cond in spec.all_conditions:
        if cond == CLEAN:
            continue
        for scene in spec.scene_names:
            for task in spec.tasks:
                for role, policy in zip(("pi_1", "pi_2"), spec.policies[task], strict=True):
                    base = outcomes.get((scene, CLEAN, task, policy), {})
                    other = outcomes.get((scene, cond, task, policy), {})
                    if not base or not other:
                        continue
                    shared, worse, better = paired_change(base, other)
                    k0, k1 = sum(base.values()), sum(other.values())
                    rows.append([cond, scene, task, role, policy, k0, len(base), k1, len(other),
                                 shared, worse, better, _p(mcnemar_exact_p(worse, better)),
                                 _p(fisher_exact_p(k0, len(base), k1, len(other))),
                                 "disjoint (control)" if cond == CONTROL else "shared"])
    return rows


def _paired_table(spec: StudySpec, rows: list[list[Any]], out: Path, source: str
                  ) -> list[Path]:
    header = [*PAIRED_COLUMNS, "real_source"]
    notes = ["Each simulated trial t starts from the same initial condition in clean and in the "
             "condition (paired); worse: success under clean, failure under the condition; "
             "better: the reverse; mcnemar_p: exact two-sided McNemar (binomial test of worse "
             "vs better); fisher_p: two-sided Fisher of the counts, which ignores the pairing.",
             f"The control {CONTROL} runs the clean bundle from its own starts: its trial t is "
             "paired with clean's trial t by index only, so its discordant pairs are what "
             "different starts alone give.",
             f"Real domain: {source}."]
    return write_table(out, "paired", header, [[*r, source] for r in rows],
                       title="Outcomes changed vs clean, per policy (McNemar beside Fisher)",
                       notes=notes)


def _comparison_rows(spec: StudySpec, by_condition: dict[str, dict]) -> list[list[Any]]:
    """Per (condition, scene, task): simulated pi_1 vs pi_2, Fisher p, power and verdict."""
    from protocols.power import power_verdicts

    keyed = [(cond, key, pair) for cond, pairs in by_condition.items()
             for key, pair in pairs.items() if pair.sim_n1 and pair.sim_n2]
    verdicts = power_verdicts([(p.sim_k1, p.sim_n1, p.sim_k2, p.sim_n2) for *_, p in keyed],
                              alpha=spec.alpha, power=TARGET_POWER)
    rows = []
    for (cond, (scene, task), pair), v in zip(keyed, verdicts, strict=True):
        p = fisher_exact_p(pair.sim_k1, pair.sim_n1, pair.sim_k2, pair.sim_n2)
        rows.append([cond, scene, task, pair.sim_k1, pair.sim_n1, pair.sim_k2, pair.sim_n2,
                     _p(p), int(p < spec.alpha), round(v.power, 4),
                     v.trials_needed or f">{v.trials}", v.verdict, pair.real_k1,
                     pair.real_n1, pair.real_k2, pair.real_n2, pair.outcome])
    return rows


def _comparisons_table(spec: StudySpec, rows: list[list[Any]], out: Path, source: str
                       ) -> list[Path]:
    header = [*COMPARISON_COLUMNS, "real_source"]
    notes = [f"power: exact two-sided Fisher power (p < {spec.alpha:g}) at the observed rates "
             "with the comparison's trials per policy; trials_needed: the smallest n with "
             f"power >= {TARGET_POWER:g}, as `bench plan trials --p1 k1/n1 --p2 k2/n2` says "
             "(>N: more than the trials run).",
             "verdict: UNDERPOWERED where the trials cannot detect the observed gap at "
             f"{TARGET_POWER:.0%} power; powered otherwise; no gap where the observed rates "
             "are equal (power is then the test's size).",
             f"Real domain: {source}."]
    return write_table(out, "comparisons", header, [[*r, source] for r in rows],
                       title="Simulated comparisons: significance and power", notes=notes)


def _transitions_table(spec: StudySpec, by_condition: dict[str, dict], out: Path, source: str,
                       paired: list[list[Any]], comparisons: list[list[Any]]) -> list[Path]:
    clean = list(by_condition[CLEAN].values())
    found = {cond: condition_transitions(cond, clean, list(pairs.values()), alpha=spec.alpha)
             for cond, pairs in by_condition.items() if cond != CLEAN}
    control = found.get(CONTROL)
    floor = "" if control is None else control.sig_lost + control.sig_gained
    verdict = COMPARISON_COLUMNS.index("verdict")
    rows = []
    for cond, t in found.items():
        mine = [dict(zip(PAIRED_COLUMNS, r, strict=True)) for r in paired if r[0] == cond]
        worse, better = sum(r["worse"] for r in mine), sum(r["better"] for r in mine)
        k0, n0 = sum(r["clean_successes"] for r in mine), sum(r["clean_trials"] for r in mine)
        k1, n1 = sum(r["successes"] for r in mine), sum(r["trials"] for r in mine)
        fisher = _p(fisher_exact_p(k0, n0, k1, n1)) if n0 and n1 else "nan"
        weak = sum(r[verdict] == "UNDERPOWERED" for r in comparisons if r[0] == cond)
        rows.append([cond, t.sig_lost, t.sig_gained, t.reversed, t.tied, t.agree, t.total,
                     t.corrected, t.sig_lost + t.sig_gained, floor, worse, better,
                     _p(mcnemar_exact_p(worse, better)), fisher, weak, len(t.pairs), source])
    header = ["condition", "sig_lost", "sig_gained", "reversed", "tied", "agree", "total",
              "corrected", "transitions", "control_transitions", "worse", "better",
              "mcnemar_p", "fisher_p", "underpowered", "comparisons", "real_source"]
    notes = ["sig_lost/gained, reversed, tied, corrected: over every comparison, real ties "
             "included (YUBI Table I); agree/total: over the eligible ones.",
             f"transitions = sig_lost + sig_gained; control_transitions: the same for the "
             f"control {CONTROL} (the clean bundle on its own starts): what chance alone "
             "gives" + ("" if control is not None else f" (no control in this study: add "
                        f"\"{CONTROL}\" to conditions)") + ".",
             "worse / better: simulated outcomes the condition changed on the starts it shares "
             "with clean, over every scene, task and policy (clean success -> failure / the "
             "reverse); mcnemar_p: exact McNemar over them; fisher_p: Fisher of the pooled "
             "counts beside it (ignores the pairing). Per policy: paired.csv.",
             f"underpowered: comparisons whose trials cannot detect their observed gap at "
             f"{TARGET_POWER:.0%} power (comparisons.csv).",
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


def _read_back(path: Path) -> list[dict[str, str]]:
    """A table just written, as rows of strings (the summary shows what the CSV says)."""
    import csv

    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


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
    paired = _paired_rows(spec, sim_outcomes(store, spec.name))
    comparisons = _comparison_rows(spec, by_condition)
    files += _transitions_table(spec, by_condition, out, source, paired, comparisons)
    files += _paired_table(spec, paired, out, source)
    files += _comparisons_table(spec, comparisons, out, source)
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
    transitions = _read_back(out / "transitions.csv")
    return {"ranking": ranking, "reliability": rel, "real_source": source,
            "transitions": transitions,
            "files": sorted(str(p.relative_to(out.parent)) for p in files)}
