"""Success frames of a demo run beside its time limits: did the limits cut successes off?

The paper profile's limits were chosen on held-out starts (:mod:`bench.demo.time_limits`);
every ``bench demo`` run then writes ``tables/success_frames.{csv,md}`` from its own
``rollouts.csv``: per task, policy and domain the success frames' distribution beside the
limit the rollouts ran under, and how many successes ended in the limit's last 10 %
(``late``). A limit that cuts successes off shows them there; a success it cut off entirely
shows only in a run with a longer limit on the same starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

#: A success at or after this share of its limit is "late" (in the held-out measurement of
#: bench.demo.time_limits: censored, measure longer).
LATE = 0.9


def frame_stats(frames: Any, *, ndigits: int | None = None) -> dict[str, Any]:
    """Min / median / p90 / max of success frames (numpy's median and linear p90).

    Args:
        frames: The successes' frames (any sequence of numbers; may be empty).
        ndigits: Round median and p90 to this many decimals (``None``: unrounded).

    Returns:
        ``{"min", "median", "p90", "max"}``; blank strings where there is no success.
    """
    import numpy as np

    values = np.asarray(frames, dtype=np.float64)
    if not values.size:
        return {"min": "", "median": "", "p90": "", "max": ""}
    median, p90 = float(np.median(values)), float(np.percentile(values, 90))
    if ndigits is not None:
        median, p90 = round(median, ndigits), round(p90, ndigits)
    return {"min": int(values.min()), "median": median, "p90": p90, "max": int(values.max())}


def study_success_frames(rows: list[dict[str, Any]], limit: Callable[[str, str], int]
                         ) -> list[dict[str, Any]]:
    """Per (task, policy, domain) of a study's rollouts: success frames beside the limits.

    Args:
        rows: The study's rollouts (``tables/rollouts.csv`` rows: ``scene``, ``task``,
            ``policy``, ``domain``, ``success``, ``frames``; text or numbers).
        limit: ``(scene, task) -> frames``, the time limit each rollout ran under.

    Returns:
        One row per (task, policy, domain), every scene and condition pooled: successes,
        rollouts, the success frames' min / median / p90 / max (blank without a success),
        the limit (``a/b`` where scenes differ) and ``late``, the successes that ended at or
        after :data:`LATE` of their rollout's limit.
    """
    groups: dict[tuple[str, str, str], list[tuple[int, int, int]]] = {}
    for r in rows:
        key = (r["task"], r["policy"], r["domain"])
        groups.setdefault(key, []).append(
            (int(r["success"]), int(r["frames"]), int(limit(r["scene"], r["task"]))))
    out = []
    for (task, policy, domain), items in sorted(groups.items()):
        frames = [f for ok, f, _ in items if ok]
        limits = sorted({lim for _, _, lim in items})
        out.append({"task": task, "policy": policy, "domain": domain,
                    "successes": len(frames), "rollouts": len(items),
                    **frame_stats(frames, ndigits=1),
                    "limit": "/".join(str(v) for v in limits),
                    "late": sum(1 for ok, f, lim in items if ok and f >= LATE * lim)})
    return out


def write_study_success_frames(tables: Path, spec: Any) -> list[Path]:
    """``success_frames.{csv,md}`` in a study's ``tables/`` from its ``rollouts.csv``.

    ``spec``: the study's :class:`~bench.study.spec.StudySpec` (its time limits; a (scene,
    task) without one ran under the task's own limit).
    """
    import csv

    from protocols.tablefmt import write_table

    def limit(scene: str, task: str) -> int:
        value = spec.frames_limit(scene, task)
        if value is None:
            from bench.sim.tasks import get_task

            value = get_task(task).max_frames
        return int(value)

    with (tables / "rollouts.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    summary = study_success_frames(rows, limit)
    header = ["task", "policy", "domain", "successes", "rollouts", "min", "median", "p90",
              "max", "limit", "late"]
    return write_table(
        tables, "success_frames", header, [[s[h] for h in header] for s in summary],
        title="Success frames on the study's starts (every scene and condition)",
        notes=[f"frames: the 10 Hz frame a successful rollout ended at; limit: the time limit "
               f"the rollouts ran under; late: successes at or after {LATE:.0%} of it (a "
               "limit that cuts successes off shows them here). The limits were chosen on "
               "held-out starts (python -m bench.demo.time_limits)."])
