"""Figures of trial planning and sequential studies (PNG + PDF, byte-stable like protocols.figures).

* :func:`trials_heatmap` - trials per policy over a grid of rate pairs (Fisher power,
  sign probability), numbers printed in the cells;
* :func:`power_curves` - one panel per task: Fisher power and sign probability
  against trials per policy, one line per scene's pilot pair;
* :func:`sequential_figure` - one panel per scene-task of one condition: running
  simulated success of pi_1 / pi_2 with 95% Wilson bands, the real rates with
  Wilson bars at the right, and the sequential decision point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from protocols.figures import COLOURS, PDF_METADATA, PNG_METADATA, STYLE
from protocols.stats import wilson_bounds


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _save(fig, out_stem: Path) -> list[Path]:
    png, pdf = out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=150, metadata=PNG_METADATA)
    fig.savefig(pdf, metadata=PDF_METADATA)
    return [png, pdf]


def trials_heatmap(out_stem: Path, rates: Sequence[float],
                   panels: Mapping[str, np.ndarray], *, max_trials: int) -> list[Path]:
    """Heatmaps of trials per policy; ``panels`` title -> ``[G, G]`` (0 = not reached).

    Row ``i`` is ``p1 = rates[i]``, column ``j`` is ``p2 = rates[j]``.
    """
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = _figure(3.2 * len(panels) + 0.4, 3.2)
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        labels = [f"{r:g}" for r in rates]
        for ax, (title, table) in zip(axes, panels.items(), strict=True):
            shown = np.where(table > 0, table, np.nan).astype(float)
            ax.imshow(np.log10(shown), cmap="viridis_r", origin="lower",
                      vmin=0, vmax=np.log10(max_trials))
            for i in range(table.shape[0]):
                for j in range(table.shape[1]):
                    text = "-" if i == j else (str(int(table[i, j])) if table[i, j] > 0
                                               else f">{max_trials}")
                    ax.text(j, i, text, ha="center", va="center", fontsize=5.5,
                            color="black" if table[i, j] == 0 or table[i, j] > 30 else "white")
            ax.set_xticks(range(len(rates)), labels)
            ax.set_yticks(range(len(rates)), labels)
            ax.set_xlabel("success rate of π$_2$")
            ax.set_ylabel("success rate of π$_1$")
            ax.set_title(title)
        fig.subplots_adjust(left=0.08, right=0.99, top=0.88, bottom=0.15, wspace=0.3)
        return _save(fig, out_stem)


def power_curves(out_stem: Path, ns: Sequence[int],
                 curves: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]], *,
                 alpha: float, power: float, sign_target: float) -> list[Path]:
    """One panel per task; per pair label: (Fisher power [N], sign probability [N])."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = _figure(3.0 * len(curves) + 0.4, 2.8)
        axes = fig.subplots(1, len(curves), sharey=True, squeeze=False)[0]
        cycle = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]
        for ax, (task, pairs) in zip(axes, curves.items(), strict=True):
            for index, (label, (fisher, sign)) in enumerate(pairs.items()):
                colour = cycle[index % len(cycle)]
                ax.plot(ns, fisher, color=colour, linewidth=1.0, label=f"{label} Fisher")
                ax.plot(ns, sign, color=colour, linewidth=0.8, linestyle="--",
                        label=f"{label} sign")
            ax.axhline(power, color="#555555", linewidth=0.5, linestyle=":")
            ax.axhline(sign_target, color="#555555", linewidth=0.5, linestyle="-.")
            ax.set_title(task)
            ax.set_xlabel("trials per policy")
            ax.set_ylim(0, 1.02)
            ax.grid(linewidth=0.3, alpha=0.5)
            ax.legend(fontsize=5, frameon=False, loc="lower right")
        axes[0].set_ylabel(f"P(Fisher p < {alpha:g}) solid, P(right order) dashed")
        fig.subplots_adjust(left=0.09, right=0.99, top=0.9, bottom=0.16, wspace=0.08)
        return _save(fig, out_stem)


def _wilson_band(outcomes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.arange(1, outcomes.size + 1)
    k = np.cumsum(outcomes)
    low, high = np.empty(n.size), np.empty(n.size)
    for i, (kk, nn) in enumerate(zip(k, n, strict=True)):
        lo, hi = wilson_bounds(np.array([kk]), int(nn))
        low[i], high[i] = lo[0], hi[0]
    return k / n, low, high


def sequential_figure(out_stem: Path, title: str,
                      panels: Mapping[str, dict]) -> list[Path]:
    """One condition: per scene-task panel the running sim rates and the decision point.

    Each panel dict: ``sim1``, ``sim2`` (0/1 outcomes in trial order), ``real1``,
    ``real2`` ((k, n)), ``decided_at`` (int or None), ``decision`` (str).
    """
    import matplotlib

    with matplotlib.rc_context(STYLE):
        cols = min(3, len(panels))
        rows = (len(panels) + cols - 1) // cols
        fig = _figure(2.8 * cols + 0.8, 2.1 * rows + 0.8)
        axes = fig.subplots(rows, cols, sharey=True, squeeze=False).ravel()
        for ax, (label, panel) in zip(axes, panels.items(), strict=False):
            end = 1
            for policy, key in ((1, "sim1"), (2, "sim2")):
                outcomes = np.asarray(panel[key], dtype=np.float64)
                if outcomes.size == 0:
                    continue
                rate, low, high = _wilson_band(outcomes)
                x = np.arange(1, outcomes.size + 1)
                colour = COLOURS[("sim", policy)]
                ax.fill_between(x, 100 * low, 100 * high, color=colour, alpha=0.25, linewidth=0)
                ax.plot(x, 100 * rate, color=colour, linewidth=1.0, label=f"Sim π$_{policy}$")
                end = max(end, outcomes.size)
            for policy, key, offset in ((1, "real1", 0.03), (2, "real2", 0.07)):
                k, n = panel[key]
                if n == 0:
                    continue
                lo, hi = wilson_bounds(np.array([k]), int(n))
                xr = end * (1 + offset) + 0.5
                ax.errorbar(xr, 100 * k / n, yerr=[[100 * (k / n - lo[0])],
                                                   [100 * (hi[0] - k / n)]],
                            fmt="s", markersize=3, color=COLOURS[("real", policy)],
                            ecolor="black", elinewidth=0.6, capsize=1.5,
                            label=f"Real π$_{policy}$")
            if panel.get("decided_at"):
                ax.axvline(panel["decided_at"], color="#d62728", linewidth=0.8, linestyle="--")
                ax.text(panel["decided_at"], 104, f"{panel['decision']} @ {panel['decided_at']}",
                        color="#d62728", fontsize=6, ha="center")
            else:
                ax.text(end / 2, 104, "undecided", color="#555555", fontsize=6, ha="center")
            ax.set_title(label, fontsize=7, pad=10)
            ax.set_ylim(0, 110)
            ax.set_xlabel("paired trials")
            ax.grid(linewidth=0.3, alpha=0.5)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        axes[0].set_ylabel("success rate (%)")
        axes[0].legend(fontsize=5, frameon=False, loc="lower left")
        fig.suptitle(f"{title}\nrunning sim success (95% Wilson band), real rates (bars), "
                     "sequential decision (red)", fontsize=7.5)
        fig.subplots_adjust(left=0.1, right=0.98, top=0.78 if rows == 1 else 0.86,
                            bottom=0.15, wspace=0.1, hspace=0.7)
        return _save(fig, out_stem)
