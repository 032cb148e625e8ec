"""OBS-Policy inside a study: the wrist frames the policies saw, scored per condition.

Each simulated rollout keeps the wrist image of every ``obs_policy_every``-th
policy query (query 0 is the first observation after reset) in
``obs_policy/<scene>/<condition>/<task>/<policy>/trial_XXXX.npz`` (``frames``:
``[F, H, W, 3]`` uint8). The file is written before the rollout's row is
committed, so every stored rollout has its frames and a resumed study rewrites
identical ones for the rollouts it reruns. After the rollouts, every (scene,
condition) is scored with the study's no-reference metrics: per-image scorers
give one row per frame (``<task>/<policy>/<trial>/<index>``), per-sequence
scorers (NVS-SQA) one row per rollout; the reliability classifier sees the
mean as method ``obs-policy:<metric>``, beside ``test:*`` and ``obs-probe:*``.
Frames of the ``simulated-real`` stand-in are not kept (they are not a
simulated condition).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import numpy as np

PROTOCOL = "obs-policy"


def obs_policy_enabled(spec: Any) -> bool:
    """OBS-Policy runs when ``obs_policy_every > 0`` and the study has an NR metric."""
    from metrics.registry import scorer_info

    return spec.obs_policy_every > 0 and any(scorer_info(m).mode == "NR" for m in spec.metrics)


def frames_path(out: Path, scene: str, condition: str, task: str, policy: str, trial: int
                ) -> Path:
    """Where a trial's kept OBS-Policy frames go: ``obs_policy/<scene>/.../trial_XXXX.npz``."""
    return out / "obs_policy" / scene / condition / task / policy / f"trial_{trial:04d}.npz"


def save_policy_frames(out: Path, scene: str, condition: str, task: str, policy: str,
                       trial: int, frames: list[np.ndarray]) -> Path:
    """Write one rollout's kept wrist frames (``[F, H, W, 3]`` uint8) atomically."""
    from bench.provenance import atomic_write_bytes

    path = frames_path(out, scene, condition, task, policy, trial)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, frames=np.stack(frames).astype(np.uint8))
    atomic_write_bytes(path, buffer.getvalue())
    return path


def condition_view_sets(spec: Any, out: Path, scene: str, condition: str) -> list[Any]:
    """One OBS-Policy :class:`metrics.views.ViewSet` per simulated rollout of the plan.

    Ordered by task, policy, trial (the cells of :func:`bench.study.plan.rollout_cells`).
    """
    from bench.errors import BenchError
    from bench.study.plan import rollout_cells
    from metrics.views import ViewSet

    sets = []
    cells = [c for c in rollout_cells(spec)
             if (c.domain, c.scene, c.condition) == ("sim", scene, condition)]
    for cell in cells:
        for policy in cell.policies:
            for trial in range(cell.trials):
                path = frames_path(out, scene, condition, cell.task, policy, trial)
                if not path.is_file():
                    raise BenchError(f"OBS-Policy frames {path} are missing; rerun the study "
                                     "with --resume after deleting its rollout rows, or a new "
                                     "--out")
                with np.load(path) as data:
                    frames = data["frames"]
                label = f"{cell.task}/{policy}/{trial:04d}"
                names = tuple(f"{label}/{i:05d}" for i in range(len(frames)))
                sets.append(ViewSet(PROTOCOL, scene, condition, names, frames, sequence=label))
    return sets


def score_obs_policy(spec: Any, out: Path, store: Any, *, progress: bool = True) -> None:
    """NR scores of every (scene, condition)'s OBS-Policy frames into the store (once)."""
    from bench.progress import progress as progress_bar
    from metrics.registry import get_scorer
    from metrics.views import score_views

    if not obs_policy_enabled(spec):
        return
    scorers = [s for s in (get_scorer(m) for m in spec.metrics) if s.info.mode == "NR"]
    todo = [(s, c) for s in spec.scene_names for c in spec.all_conditions
            if not store.has_quality(spec.name, s, c, PROTOCOL)]
    for scene, cond in progress_bar(todo, desc="obs-policy", unit="condition", file=sys.stderr,
                                    disable=not progress):
        rows = []
        for views in condition_view_sets(spec, out, scene, cond):
            rows += score_views(views, scorers, progress=False)
        store.add_quality(spec.name, rows)
