"""``bench study compare``: paired deployment-fidelity comparison of two study outputs.

Two studies run with the same spec except one deployment knob (gains, shadows,
fisheye mode, asynchronous execution) hold rollouts with the same keys
``(scene, condition, task, policy, domain, trial)``: the same start, so they pair
one to one. For the rollouts present in both (domain ``sim`` by default):

* per task: the paired delta (variant - base) of success rate and of mean final
  progress, each with a 95% paired-bootstrap CI (scipy ``bootstrap`` over the paired
  differences, percentile method, seeded): identical runs give exactly [0, 0];
* per (task, policy) success rates in both, and the Pearson, Spearman and Kendall
  correlation of those rates between base and variant (scipy.stats; NaN with fewer
  than 3 points or a constant side);
* per policy: median time to first grasp (seconds at the 10 Hz control rate, over the
  rollouts that grasped) with a 95% bootstrap CI, in both.

Writes ``deltas.csv|md``, ``policies.csv|md``, ``correlation.csv|md``,
``compare.png|pdf`` and ``manifest.json`` into ``--out`` (staged, atomic).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError

CONTROL_HZ = 10.0
N_RESAMPLES = 9999


def paired_bootstrap_ci(differences: np.ndarray, *, seed: int = 0,  # [N] -> (lo, hi)
                        confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of paired differences (NaN for N < 2)."""
    from scipy.stats import bootstrap

    diffs = np.asarray(differences, dtype=np.float64)
    if len(diffs) < 2:
        return (math.nan, math.nan)
    if np.all(diffs == diffs[0]):  # every resample has the same mean: the CI is that point
        return (float(diffs[0]), float(diffs[0]))
    result = bootstrap((diffs,), np.mean, confidence_level=confidence, n_resamples=N_RESAMPLES,
                       method="percentile", random_state=np.random.default_rng(seed))
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def median_ci(values: np.ndarray, *, seed: int = 0) -> tuple[float, float, float]:
    """(median, CI low, CI high) with a percentile bootstrap of the median."""
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return (math.nan, math.nan, math.nan)
    median = float(np.median(x))
    if len(x) < 2 or np.all(x == x[0]):
        return (median, median if len(x) > 1 else math.nan, median if len(x) > 1 else math.nan)
    result = bootstrap((x,), np.median, confidence_level=0.95, n_resamples=N_RESAMPLES,
                       method="percentile", random_state=np.random.default_rng(seed))
    return (median, float(result.confidence_interval.low), float(result.confidence_interval.high))


def rank_correlations(base: np.ndarray, variant: np.ndarray) -> dict[str, float]:
    """Pearson, Spearman and Kendall of two rate vectors ``[P]`` (NaN when undefined)."""
    from scipy import stats

    a, b = np.asarray(base, np.float64), np.asarray(variant, np.float64)
    if len(a) < 3 or np.all(a == a[0]) or np.all(b == b[0]):
        return {"pearson": math.nan, "spearman": math.nan, "kendall": math.nan}
    return {"pearson": float(stats.pearsonr(a, b)[0]),
            "spearman": float(stats.spearmanr(a, b)[0]),
            "kendall": float(stats.kendalltau(a, b)[0])}


def load_rollouts(folder: str | Path) -> list[Any]:
    """Every stored rollout of a study output directory (or its results.sqlite)."""
    from bench.study.store import DB_NAME, ResultsStore

    path = Path(folder)
    db = path / DB_NAME if path.is_dir() else path
    if not db.is_file():
        raise BenchError(f"no results database at {db}; pass a `bench study run` output "
                         "directory")
    with ResultsStore.open_read_only(db) as store:  # an input: nothing written beside it
        return store.rollouts()


def check_same_study(base: list[Any], variant: list[Any], *, base_path: str | Path,
                     variant_path: str | Path) -> str:
    """The one study name both outputs hold; refuse a mix or two different studies (issue 30).

    A comparison pairs two runs of the same spec (one deployment knob changed), so both
    outputs hold rollouts of one study each, under the same name.
    """
    names = {}
    for flag, rows, path in (("--base", base, base_path), ("--variant", variant, variant_path)):
        studies = sorted({r.study for r in rows})
        if len(studies) > 1:
            raise BenchError(f"{flag} {path} holds rollouts of {len(studies)} studies "
                             f"{studies}; compare the outputs of one study run each")
        names[flag] = studies[0] if studies else None
    if None not in names.values() and names["--base"] != names["--variant"]:
        raise BenchError(f"--base holds study {names['--base']!r} but --variant holds study "
                         f"{names['--variant']!r}; compare two runs of the same spec (same name, "
                         "one deployment knob changed)")
    return names["--base"] or names["--variant"] or ""


def pair_rollouts(base: list[Any], variant: list[Any], *, domain: str = "sim"
                  ) -> list[tuple[Any, Any]]:
    """(base, variant) rows with the same key minus the study name, sorted by key."""
    def keyed(rows):
        return {r.key[1:]: r for r in rows if r.domain == domain}

    b, v = keyed(base), keyed(variant)
    common = sorted(set(b) & set(v))
    if not common:
        raise BenchError(f"the two studies share no {domain!r} rollouts (same scene, "
                         "condition, task, policy and trial); compare runs of the same spec")
    return [(b[k], v[k]) for k in common]


def compare(pairs: list[tuple[Any, Any]], *, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The three tables (module docstring) as lists of row dicts."""
    by_task: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    by_policy: dict[tuple[str, str], list[tuple[Any, Any]]] = defaultdict(list)
    for b, v in pairs:
        by_task[b.task].append((b, v))
        by_policy[(b.task, b.policy)].append((b, v))
    deltas = []
    for task, rows in sorted(by_task.items()):
        ds = np.array([float(v.success) - float(b.success) for b, v in rows])
        dp = np.array([v.progress_final - b.progress_final for b, v in rows])
        s_lo, s_hi = paired_bootstrap_ci(ds, seed=seed)
        p_lo, p_hi = paired_bootstrap_ci(dp, seed=seed)
        deltas.append({"task": task, "pairs": len(rows),
                       "base_success": float(np.mean([b.success for b, _ in rows])),
                       "variant_success": float(np.mean([v.success for _, v in rows])),
                       "delta_success": float(ds.mean()), "success_ci_low": s_lo,
                       "success_ci_high": s_hi, "delta_progress": float(dp.mean()),
                       "progress_ci_low": p_lo, "progress_ci_high": p_hi})
    policies = []
    for (task, policy), rows in sorted(by_policy.items()):
        row: dict[str, Any] = {"task": task, "policy": policy, "pairs": len(rows)}
        for side, pick in (("base", 0), ("variant", 1)):
            picked = [r[pick] for r in rows]
            grasps = np.array([r.first_grasp_frame / CONTROL_HZ for r in picked
                               if r.first_grasp_frame >= 0])
            med, lo, hi = median_ci(grasps, seed=seed)
            row.update({f"{side}_success": float(np.mean([r.success for r in picked])),
                        f"{side}_progress": float(np.mean([r.progress_final for r in picked])),
                        f"{side}_grasped": len(grasps), f"{side}_grasp_s_median": med,
                        f"{side}_grasp_s_ci_low": lo, f"{side}_grasp_s_ci_high": hi})
        policies.append(row)
    corr = rank_correlations(np.array([r["base_success"] for r in policies]),
                             np.array([r["variant_success"] for r in policies]))
    correlation = [{"statistic": k, "value": v, "points": len(policies)} for k, v in corr.items()]
    return {"deltas": deltas, "policies": policies, "correlation": correlation}


def _figure(tables: dict[str, list[dict[str, Any]]], stem: Path, *, title: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from protocols.figures import PDF_METADATA, PNG_METADATA

    deltas = tables["deltas"]
    tasks = [d["task"] for d in deltas]
    x = np.arange(len(tasks))
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 2.8), sharey=False)
    for ax, (what, label) in zip(axes, (("success", "success rate"),
                                        ("progress", "mean progress")), strict=True):
        mid = np.array([d[f"delta_{what}"] for d in deltas])
        lo = np.array([d[f"{what}_ci_low"] for d in deltas])
        hi = np.array([d[f"{what}_ci_high"] for d in deltas])
        err = np.nan_to_num(np.vstack([mid - lo, hi - mid]), nan=0.0)
        ax.bar(x, mid, color="#4c72b0", width=0.6)
        ax.errorbar(x, mid, yerr=np.maximum(err, 0.0), fmt="none", ecolor="black", capsize=3)
        ax.axhline(0.0, color="#555555", linewidth=0.8)
        ax.set_xticks(x, tasks)
        ax.set_ylabel(f"delta {label} (variant - base)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    fig.savefig(png, dpi=150, metadata=PNG_METADATA)
    fig.savefig(pdf, metadata=PDF_METADATA)
    plt.close(fig)
    return [png, pdf]


def write_comparison(base: str | Path, variant: str | Path, out: str | Path, *,
                     domain: str = "sim", seed: int = 0, overwrite: bool = False
                     ) -> dict[str, list[dict[str, Any]]]:
    """Compare two study outputs and write the tables, figure and manifest into ``out``."""
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.study.store import DB_NAME
    from protocols.tablefmt import write_table

    base_rows, variant_rows = load_rollouts(base), load_rollouts(variant)
    check_same_study(base_rows, variant_rows, base_path=base, variant_path=variant)
    pairs = pair_rollouts(base_rows, variant_rows, domain=domain)
    tables = compare(pairs, seed=seed)
    with staged_output_dir(out, overwrite=overwrite,
                           inputs=[("--base", base), ("--variant", variant)]) as tmp:
        outputs: dict[str, Path] = {}
        for stem, title in (("deltas", "Paired per-task deltas (variant - base), 95% CI"),
                            ("policies", "Per-policy rates and time to first grasp (s)"),
                            ("correlation", "Correlation of per-policy success rates")):
            rows = tables[stem]
            header = list(rows[0]) if rows else ["empty"]
            for path in write_table(tmp, stem, header, [list(r.values()) for r in rows],
                                    title=title):
                outputs[path.name] = path
        for path in _figure(tables, tmp / "compare", title=f"{Path(variant).name} vs "
                            f"{Path(base).name} ({len(pairs)} paired rollouts)"):
            outputs[path.name] = path
        base_db = Path(base) / DB_NAME if Path(base).is_dir() else Path(base)
        variant_db = Path(variant) / DB_NAME if Path(variant).is_dir() else Path(variant)
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool="study-compare/1", params={"domain": domain, "n_resamples": N_RESAMPLES,
                                            "confidence": 0.95, "control_hz": CONTROL_HZ},
            seed=seed, inputs={"base": base_db, "variant": variant_db}, outputs=outputs,
            counts={"pairs": len(pairs), "tasks": len(tables["deltas"]),
                    "policies": len(tables["policies"])}))
    return tables
