"""Sequential stopping for studies (spec key ``sequential``; statistics in protocols.sequential).

For every (scene, task) policy pair the runner adds simulated rollouts in
batches: after each look (``min_trials``, then every ``batch_size`` paired trials,
up to ``max_trials`` = the spec's ``trials``) it runs the e-value test of
:mod:`protocols.sequential` on the paired outcomes of pi_1 and pi_2 in *every*
condition. A condition's decision is frozen at the first look where its test
crosses ``2 / alpha``; the pair stops, in every condition together, once every
condition has decided (or at ``max_trials``). So trials stay paired across
conditions: trial ``t`` exists in all conditions of a pair or in none, and the
clean-vs-counterfactual comparisons of the analysis compare the same starts.
Conditions that decided early keep receiving rollouts until the last one
decides; those extra rollouts do not change their frozen decision.

The "real" domain keeps its fixed ``real_trials``. Outputs: ``tables/sequential.csv``
/ ``.md`` (decision per pair and condition, trials, rollouts saved vs the fixed
design) and ``figures/sequential_<condition>.png`` / ``.pdf``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from bench.study.plan import RolloutCell, domain_trials, rollout_cells
from bench.study.spec import CLEAN, StudySpec
from bench.study.store import ResultsStore
from protocols.sequential import UNDECIDED, SequentialDecision, decide


def _pair_spec(spec: StudySpec, scene: str, task: str, trials: int) -> StudySpec:
    """The spec restricted to one (scene, task) and the first ``trials`` simulated trials.

    ``sequential`` is dropped: the look's spec is a fixed design of ``trials`` trials (a
    config whose ``max_trials`` equals the study's trials would refuse the smaller count).
    """
    return dataclasses.replace(
        spec, tasks=(task,), policies={task: spec.policies[task]}, trials=trials,
        sequential=None,
        sample_scenes={k: v for k, v in spec.sample_scenes.items() if k == scene},
        scenes={k: v for k, v in spec.scenes.items() if k == scene},
        extra_conditions={c: {scene: m[scene]} for c, m in spec.extra_conditions.items()})


def _pair_cells(spec: StudySpec, scene: str, task: str) -> dict[str, RolloutCell]:
    """Condition -> the fixed design's simulated cell of one (scene, task) pair."""
    return {c.condition: c for c in rollout_cells(spec)
            if c.domain == "sim" and (c.scene, c.task) == (scene, task)}


def _outcomes(store: ResultsStore, spec: StudySpec, scene: str, task: str
              ) -> dict[tuple[str, str, str], dict[int, int]]:
    """(condition, policy, domain) -> {trial: success} of the stored rollouts."""
    rows: dict[tuple[str, str, str], dict[int, int]] = {}
    for row in store.rollouts(spec.name):
        if row.scene == scene and row.task == task:
            rows.setdefault((row.condition, row.policy, row.domain), {})[row.trial] = int(
                row.success)
    return rows


def _paired(outcomes: dict, cond: str, p1: str, p2: str, upto: int
            ) -> tuple[list[int], list[int]]:
    """Outcomes of the trials 0, 1, ... that both policies have, up to ``upto``.

    Stops at the first gap: a rollout that is not stored (e.g. one that ended in a
    policy fault) ends the paired prefix there.
    """
    a, b = outcomes.get((cond, p1, "sim"), {}), outcomes.get((cond, p2, "sim"), {})
    n = 0
    while n < upto and n in a and n in b:
        n += 1
    return [a[t] for t in range(n)], [b[t] for t in range(n)]


def _real_counts(outcomes: dict, policy: str) -> tuple[int, int]:
    real = outcomes.get((CLEAN, policy, "real"), {})
    return sum(real.values()), len(real)


def run_sequential_rollouts(spec: StudySpec, store: ResultsStore, bundles: dict, out: Path, *,
                            progress: bool = True, write_report: bool = True,
                            results_out: dict | None = None, executor: Any = None) -> int:
    """Run the rollouts of ``spec`` with sequential stopping; write its table and figures.

    Args:
        spec: The study (its ``sequential`` config is set).
        store: The results store; rollouts are committed as they end (resumable).
        bundles: (scene, condition) -> condition bundle.
        out: The study output directory.
        progress: Show a progress bar of the looks.
        write_report: Write ``tables/sequential.*`` and the figures under ``out`` now; the
            study runner passes False and writes them into its staged ``tables/`` with
            :func:`write_sequential_report` (``results_out`` receives what it needs).
        results_out: Filled with the per-pair results when given.
        executor: Where each look's rollouts run (:mod:`bench.study.executors`).

    Returns:
        The number of rollouts run now (resumed rows already stored are not counted).
    """
    from bench.progress import progress as progress_bar
    from bench.study.rollouts import run_rollouts

    config = spec.sequential
    cap = domain_trials(spec, "sim")
    looks = config.looks(cap)
    ran = 0
    results: dict[tuple[str, str], dict[str, Any]] = {}
    pairs = [(s, t) for s in spec.scene_names for t in spec.tasks]
    bar = progress_bar(total=len(pairs) * len(looks), desc="sequential looks", unit="look",
                       file=sys.stderr, disable=not progress)
    for scene, task in pairs:
        p1, p2 = spec.policies[task]
        decisions: dict[str, SequentialDecision] = {}
        for index, look in enumerate(looks):
            ran += run_rollouts(_pair_spec(spec, scene, task, look), store, bundles,
                                progress=False, out=out, executor=executor)
            outcomes = _outcomes(store, spec, scene, task)
            decisions = {c: decide(*_paired(outcomes, c, p1, p2, look), config,
                                   max_trials=cap) for c in spec.all_conditions}
            bar.update(1)
            if all(d.decision != UNDECIDED for d in decisions.values()):
                bar.update(len(looks) - index - 1)
                break
        results[(scene, task)] = {"trials": look, "decisions": decisions,
                                  "outcomes": outcomes}
    bar.close()
    if results_out is not None:
        results_out.update(results)
    if write_report:
        write_sequential_report(spec, results, out / "tables", out / "figures")
    return ran


def _real_order(outcomes: dict, p1: str, p2: str) -> int:
    from protocols.ranking import order_sign

    (k1, n1), (k2, n2) = _real_counts(outcomes, p1), _real_counts(outcomes, p2)
    return order_sign(k1, n1, k2, n2) if n1 and n2 else 0


def write_sequential_report(spec: StudySpec, results: dict, tables: Path,
                            figures: Path) -> list[Path]:
    """``<tables>/sequential.csv|.md`` and one ``<figures>/sequential_<condition>`` each."""
    from protocols.plan_figures import sequential_figure
    from protocols.tablefmt import write_table

    config, cap = spec.sequential, domain_trials(spec, "sim")
    rows, figure_panels = [], {c: {} for c in spec.all_conditions}
    total_run = fixed = 0
    for (scene, task), result in results.items():
        p1, p2 = spec.policies[task]
        real = _real_order(result["outcomes"], p1, p2)
        n = result["trials"]
        cells = _pair_cells(spec, scene, task)  # the fixed design's; the pair ran n trials
        ran = {cond: cell._replace(trials=n).rollouts for cond, cell in cells.items()}
        total_run += sum(ran.values())
        fixed += sum(cell.rollouts for cell in cells.values())
        for cond, d in result["decisions"].items():
            named = {"pi_1": p1, "pi_2": p2}.get(d.decision, UNDECIDED)
            sign = {"pi_1": 1, "pi_2": -1}.get(d.decision, 0)
            agrees = "" if d.decision == UNDECIDED or real == 0 else int(sign == real)
            rows.append([scene, task, cond, p1, p2, n, named, d.decided_at, d.favour_pi1,
                         d.favour_pi2, d.log_e_pi1, d.log_e_pi2, agrees,
                         cells[cond].rollouts - ran[cond]])
            outcomes = result["outcomes"]
            sim1, sim2 = _paired(outcomes, cond, p1, p2, n)
            figure_panels[cond][f"{scene}/{task}"] = {
                "sim1": sim1, "sim2": sim2, "real1": _real_counts(outcomes, p1),
                "real2": _real_counts(outcomes, p2), "decided_at": d.decided_at,
                "decision": named}
    header = ["scene", "task", "condition", "pi_1", "pi_2", "paired_trials_run", "decision",
              "decided_at", "discordant_pi1", "discordant_pi2", "log_e_pi1", "log_e_pi2",
              "agrees_with_real", "rollouts_saved"]
    notes = [f"Method {config.method!r}, alpha {config.alpha:g} (two one-sided e-processes at "
             f"alpha/2; decide once E >= {2 / config.alpha:g}), looks at "
             f"{config.looks(cap)} paired trials; valid under optional stopping.",
             "A pair stops in every condition together once each condition has decided; "
             "decided_at is where that condition's decision was frozen.",
             f"Simulated rollouts run: {total_run} of the fixed design's {fixed} "
             f"(saved {fixed - total_run}, {100.0 * (fixed - total_run) / fixed:.1f}%)."]
    paths = write_table(tables, "sequential", header, rows,
                        title="Sequential evaluation: decision per policy pair and condition",
                        notes=notes)
    for cond, panels in figure_panels.items():
        paths += sequential_figure(figures / f"sequential_{cond}", f"{spec.name}: {cond}",
                                   panels)
    return paths
