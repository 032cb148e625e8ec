"""Statistics and study protocols (torch-, mujoco- and warp-free).

Modules:
    stats: Wilson / Clopper-Pearson intervals, Fisher exact test, Beta posteriors, paired bootstrap.
    ranking: pairwise ranking agreement (Acc_rank), MAE, SIMPLER's MMRV, Pearson/Spearman/Kendall.
    transitions: what a counterfactual condition changes relative to clean (Table I rows).
    reliability: reliability labels and the scene-held-out threshold classifier.
    metric_directions: which way is better for each quality metric.
    yubi, yubi_report, figures, tablefmt: regeneration of the YUBI-Real2Sim tables and figures.
    cli: ``bench tables``, ``bench reliability``, ``bench stats``.
"""

from pathlib import Path

#: The YUBI-Real2Sim public data shipped with the bench (``bench tables yubi``, the demo's check).
DEFAULT_YUBI_DATA = Path(__file__).resolve().parents[1] / "results" / "yubi" / "data"

