"""Real-vs-sim success-rate bar figures (YUBI-Real2Sim Fig. 4 style), PNG + PDF, byte-stable.

Figures are built on a bare :class:`matplotlib.figure.Figure` with the Agg
canvas (no pyplot state, no display) and saved without timestamps or version
strings, so the same data give the same bytes on the same matplotlib build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from protocols.ranking import CORRECT, PolicyPair, rank_agreement
from protocols.stats import wilson_interval

# light / dark for pi_1 / pi_2; grey for real, blue for simulation (as in the paper)
COLOURS = {
    ("real", 1): "#b5b5b5",
    ("real", 2): "#3a3a3a",
    ("sim", 1): "#9ecae1",
    ("sim", 2): "#2171b5",
}
PNG_METADATA = {"Software": None}
PDF_METADATA = {"CreationDate": None, "Producer": None, "Creator": None, "ModDate": None}
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "svg.hashsalt": "splatbench",
    "path.simplify": False,
}


def _bars(
    ax, pairs: Sequence[PolicyPair], tasks: Sequence[str], clean: Sequence[PolicyPair] | None
):
    width = 0.2
    for index, pair in enumerate(pairs):
        cells = (
            ("real", 1, pair.real_k1, pair.real_n1),
            ("real", 2, pair.real_k2, pair.real_n2),
            ("sim", 1, pair.sim_k1, pair.sim_n1),
            ("sim", 2, pair.sim_k2, pair.sim_n2),
        )
        for slot, (domain, policy, k, n) in enumerate(cells):
            interval = wilson_interval(k, n)
            x = index + (slot - 1.5) * width
            rate = 100.0 * interval.estimate
            err = [[rate - 100.0 * interval.low], [100.0 * interval.high - rate]]
            ax.bar(
                x, rate, width, color=COLOURS[(domain, policy)], edgecolor="black", linewidth=0.4
            )
            ax.errorbar(x, rate, yerr=err, fmt="none", ecolor="black", elinewidth=0.7, capsize=1.5)
        if clean is not None:
            ref = clean[index]
            for slot, rate in ((2, ref.sim_rates[0]), (3, ref.sim_rates[1])):
                ax.plot(
                    index + (slot - 1.5) * width,
                    100.0 * rate,
                    marker="_",
                    markersize=9,
                    color="#d62728",
                    markeredgewidth=1.5,
                    linestyle="none",
                )
        if pair.outcome != CORRECT:
            ax.text(
                index,
                103,
                pair.outcome.replace("_", " "),
                ha="center",
                fontsize=6.5,
                color="#d62728",
            )
    ax.set_xticks(range(len(tasks)), list(tasks))
    ax.set_ylim(0, 110)
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.grid(axis="y", linewidth=0.3, alpha=0.5)
    ax.set_axisbelow(True)


def ranking_figure(
    out_stem: Path,
    pairs: Mapping[tuple[str, str], PolicyPair],
    *,
    scenes: Sequence[str],
    tasks: Sequence[str],
    title: str,
    clean: Mapping[tuple[str, str], PolicyPair] | None = None,
    scene_labels: Mapping[str, str] | None = None,
) -> list[Path]:
    """One panel per scene: real and simulated success of pi_1 / pi_2 per task, Wilson 95% bars.

    Args:
        out_stem: Output path without suffix; ``.png`` and ``.pdf`` are written.
        pairs: (scene, task) -> comparison.
        scenes: Panel order.
        tasks: Bar-group order within a panel.
        title: Figure title (overall agreement is appended).
        clean: Optional clean comparisons, drawn as red ticks at the clean simulated rates.
        scene_labels: Optional display names of the scenes.

    Returns:
        The two written paths.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    labels = dict(scene_labels or {})
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(2.3 * len(scenes) + 0.6, 2.6))
        axes = fig.subplots(1, len(scenes), sharey=True, squeeze=False)[0]
        for ax, scene in zip(axes, scenes, strict=True):
            scene_pairs = [pairs[(scene, t)] for t in tasks]
            clean_pairs = [clean[(scene, t)] for t in tasks] if clean is not None else None
            _bars(ax, scene_pairs, tasks, clean_pairs)
            result = rank_agreement(scene_pairs)
            ax.set_title(
                f"{labels.get(scene, scene)}  Acc$_{{rank}}$ = {result.correct}/{result.eligible}"
            )
        axes[0].set_ylabel("Task success rate (%)")
        overall = rank_agreement(pairs[(s, t)] for s in scenes for t in tasks)
        fig.suptitle(
            f"{title}: overall Acc$_{{rank}}$ = {overall.correct}/{overall.eligible}"
            f" = {100.0 * overall.accuracy:.1f}%",
            fontsize=9,
        )
        handles = [
            Patch(
                facecolor=COLOURS[(d, p)], edgecolor="black", linewidth=0.4, label=f"{name} π$_{p}$"
            )
            for d, name in (("real", "Real"), ("sim", "Sim"))
            for p in (1, 2)
        ]
        note = "Error bars: 95% Wilson CI"
        if clean is not None:
            handles.append(
                Line2D(
                    [],
                    [],
                    color="#d62728",
                    marker="_",
                    linestyle="none",
                    markersize=9,
                    markeredgewidth=1.5,
                    label="Sim clean",
                )
            )
        fig.legend(
            handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=7
        )
        fig.text(0.995, 0.995, note, ha="right", va="top", fontsize=6, color="#555555")
        fig.subplots_adjust(left=0.07, right=0.99, top=0.80, bottom=0.2, wspace=0.08)
        png, pdf = out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")
        out_stem.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(png, dpi=150, metadata=PNG_METADATA)
        fig.savefig(pdf, metadata=PDF_METADATA)
    return [png, pdf]
