"""Read the public YUBI-Real2Sim result data and recompute its tables.

Layout (``results/data/`` of the public repository, copied byte-exact into
``results/yubi/data/``; see its ``SOURCE.md``):

* ``success_rate_overall/{scene}.csv``: ``task,condition,success_rate,num_trials``
  for the clean scene, ``condition`` in ``Real (pi_1)``, ``Real (pi_2)``,
  ``Sim (pi_1)``, ``Sim (pi_2)``;
* ``success_rate_disturbances/{scene}_{task}.csv``:
  ``disturbance,condition,success_rate,num_trials`` per counterfactual condition;
* ``reliability_predictions.csv`` (and ``..._crossscore.csv``):
  ``method,target,heldout_scene,variant,quality,label,prediction,correct,fit_status``;
  only ``quality`` and ``label`` are read for computing, the published
  ``prediction`` and ``fit_status`` are read only to report agreement;
* ``mae.csv``: ``condition,scene,n_policy_cells,mae_pp`` (published, compared).

Success counts are ``success_rate * num_trials`` and must be whole numbers.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from protocols.ranking import PolicyPair
from protocols.reliability import ALL_THREE, reliability_label

CLEAN = "Clean"
CELLS = ("Real (pi_1)", "Real (pi_2)", "Sim (pi_1)", "Sim (pi_2)")
SCENE_ORDER = ("Duo", "Flat", "G2")
RELIABILITY_FILES = ("reliability_predictions.csv", "reliability_predictions_crossscore.csv")

#: Variant names in the reliability files -> condition names in the success-rate files.
VARIANT_TO_CONDITION = {
    "Hole54": "hole_54",
    "Hole90": "hole_90",
    "CentralPinhole": "fov_center",
    "Contiguous30": "pinhole_adjacent_remove_30",
    "Random30": "pinhole_random_remove_30",
}

#: Display names of the conditions (YUBI-Real2Sim Table I).
CONDITION_LABELS = {
    "hole_54": "Hole 54°",
    "hole_90": "Hole 90°",
    "float_low8": "Floater low8",
    "float_mid8": "Floater mid8",
    "float_high8": "Floater high8",
    "tablegeo_s1": "Warping",
    "fov_center": "Central pinhole",
    "pinhole_adjacent_remove_30": "Contiguous 30% removal",
    "pinhole_random_remove_30": "Random 30% removal",
}

#: YUBI-Real2Sim Table I as printed (lost, gained, reversed, tied, agree, total).
PAPER_TABLE1 = {
    "hole_54": (1, 1, 1, 0, 7, 9),
    "hole_90": (4, 0, 1, 0, 7, 9),
    "float_low8": (1, 0, 0, 1, 7, 9),
    "float_mid8": (1, 1, 1, 0, 7, 9),
    "float_high8": (1, 0, 1, 0, 7, 9),
    "tablegeo_s1": (2, 1, 0, 0, 8, 9),
    "fov_center": (5, 0, 0, 0, 8, 9),
    "pinhole_adjacent_remove_30": (3, 0, 1, 0, 7, 9),
    "pinhole_random_remove_30": (3, 0, 2, 0, 6, 9),
}

#: The scene-held-out reliability table as printed (Cup, Tape, Pen, Total, All-three correct);
#: the always-reliable total (35/45) is stated in Sec. V-E, its per-task split is not printed.
PAPER_RELIABILITY = {
    "NVS-SQA Test": (7, 8, 15, 30, 13),
    "NVS-SQA OBS": (12, 2, 15, 29, 7),
    "PSNR Test": (8, 8, 15, 31, 9),
    "SSIM Test": (8, 9, 15, 32, 7),
    "LPIPS Test": (8, 5, 15, 28, 10),
    "Always reliable": (None, None, None, 35, None),
}

#: Clean results stated in the text: 8/9 agreement, MAE 31.3889 percentage points.
PAPER_CLEAN = {"correct": 8, "eligible": 9, "mae_pp": 31.3889}


@dataclass(frozen=True)
class ReliabilityRow:
    """One row of a published reliability-prediction file."""

    method: str
    target: str
    scene: str
    variant: str
    quality: float
    label: int
    published_prediction: int
    published_fit_status: str


@dataclass(frozen=True)
class YubiData:
    """The parsed public data.

    Attributes:
        root: Data directory.
        scenes: Scene names in order.
        tasks: Task names in order.
        conditions: Counterfactual condition names in file order.
        clean: (scene, task) -> clean comparison.
        counterfactual: condition -> (scene, task) -> comparison.
        reliability: File name -> rows (present files only).
        published_mae: (condition, scene) -> (n_policy_cells, mae_pp as text).
        files: Every file read, for the manifest.
    """

    root: Path
    scenes: tuple[str, ...]
    tasks: tuple[str, ...]
    conditions: tuple[str, ...]
    clean: Mapping[tuple[str, str], PolicyPair]
    counterfactual: Mapping[str, Mapping[tuple[str, str], PolicyPair]]
    reliability: Mapping[str, tuple[ReliabilityRow, ...]]
    published_mae: Mapping[tuple[str, str], tuple[int, str]]
    files: tuple[Path, ...]


def _read_rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; point --data at the YUBI results/data directory"
        )
    from bench.tabular import open_csv_text  # UTF-8 with or without a BOM

    with open_csv_text(path) as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path.name}: missing columns {missing}; expected {list(required)}")
        return list(reader)


def _number(path: Path, column: str, text: str | None, kind: type = float) -> float | int:
    """Parse one CSV cell, naming the file, column and value when it is not a number."""
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise ValueError(f"{path.name}: column {column} holds {text!r}, not "
                         f"{'an integer' if kind is int else 'a number'}; fix the file "
                         "(or re-copy the YUBI data)") from None
    if kind is float and not math.isfinite(value):
        raise ValueError(f"{path.name}: column {column} holds {text!r}; fix the file")
    return value


def _count(path: Path, rate: str, trials: str) -> tuple[int, int]:
    n = _number(path, "num_trials", trials, int)
    rate_value = _number(path, "success_rate", rate)
    if n < 1 or not 0.0 <= rate_value <= 1.0:
        raise ValueError(f"{path.name}: success_rate {rate} with num_trials {trials}; a rate "
                         "must lie in [0, 1] over at least one trial (fix the file)")
    k_float = rate_value * n
    k = round(k_float)
    if abs(k - k_float) > 1e-6:
        raise ValueError(
            f"{path.name}: success_rate {rate} x num_trials {trials} is not a whole number of "
            "successes; the data must hold exact rates"
        )
    return k, n


def _pair(label: str, cells: Mapping[str, tuple[int, int]], path: Path) -> PolicyPair:
    missing = [c for c in CELLS if c not in cells]
    if missing:
        raise ValueError(f"{path.name}: {label} lacks rows for {missing}")
    (rk1, rn1), (rk2, rn2), (sk1, sn1), (sk2, sn2) = (cells[c] for c in CELLS)
    return PolicyPair(label, rk1, rn1, rk2, rn2, sk1, sn1, sk2, sn2)


def load_yubi(data_dir: str | Path) -> YubiData:
    """Parse the YUBI data directory (see module docstring)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"YUBI data directory {root} not found; pass --data DIR")
    files: list[Path] = []
    overall_dir = root / "success_rate_overall"
    scenes = tuple(s for s in SCENE_ORDER if (overall_dir / f"{s}.csv").is_file())
    extra = sorted(p.stem for p in overall_dir.glob("*.csv") if p.stem not in SCENE_ORDER)
    scenes = scenes + tuple(extra)
    if not scenes:
        raise FileNotFoundError(
            f"no success_rate_overall/*.csv under {root}; is this the YUBI data?"
        )
    clean: dict[tuple[str, str], PolicyPair] = {}
    tasks: list[str] = []
    for scene in scenes:
        path = overall_dir / f"{scene}.csv"
        files.append(path)
        cells: dict[str, dict[str, tuple[int, int]]] = {}
        for row in _read_rows(path, ("task", "condition", "success_rate", "num_trials")):
            cells.setdefault(row["task"], {})[row["condition"]] = _count(
                path, row["success_rate"], row["num_trials"]
            )
        for task, task_cells in cells.items():
            if task not in tasks:
                tasks.append(task)
            clean[(scene, task)] = _pair(f"{scene}/{task}", task_cells, path)
    counterfactual: dict[str, dict[tuple[str, str], PolicyPair]] = {}
    for scene in scenes:
        for task in tasks:
            path = root / "success_rate_disturbances" / f"{scene}_{task}.csv"
            if not path.is_file():
                continue
            files.append(path)
            cells_by_cond: dict[str, dict[str, tuple[int, int]]] = {}
            for row in _read_rows(path, ("disturbance", "condition", "success_rate", "num_trials")):
                cells_by_cond.setdefault(row["disturbance"], {})[row["condition"]] = _count(
                    path, row["success_rate"], row["num_trials"]
                )
            for condition, cond_cells in cells_by_cond.items():
                pair = _pair(f"{scene}/{task}", cond_cells, path)
                counterfactual.setdefault(condition, {})[(scene, task)] = pair
    reliability: dict[str, tuple[ReliabilityRow, ...]] = {}
    for name in RELIABILITY_FILES:
        path = root / name
        if path.is_file():
            files.append(path)
            reliability[name] = tuple(_reliability_rows(path))
    published_mae: dict[tuple[str, str], tuple[int, str]] = {}
    mae_path = root / "mae.csv"
    if mae_path.is_file():
        files.append(mae_path)
        for row in _read_rows(mae_path, ("condition", "scene", "n_policy_cells", "mae_pp")):
            published_mae[(row["condition"], row["scene"])] = (
                _number(mae_path, "n_policy_cells", row["n_policy_cells"], int),
                row["mae_pp"],
            )
    return YubiData(
        root=root,
        scenes=scenes,
        tasks=tuple(tasks),
        conditions=tuple(counterfactual),
        clean=clean,
        counterfactual=counterfactual,
        reliability=reliability,
        published_mae=published_mae,
        files=tuple(files),
    )


def _reliability_rows(path: Path) -> list[ReliabilityRow]:
    columns = ("method", "target", "heldout_scene", "variant", "quality", "label")
    rows = []
    for row in _read_rows(path, columns):
        rows.append(
            ReliabilityRow(
                method=row["method"],
                target=row["target"],
                scene=row["heldout_scene"],
                variant=row["variant"],
                quality=_number(path, "quality", row["quality"]),
                label=_number(path, "label", row["label"], int),
                published_prediction=int(row.get("prediction") or -1),
                published_fit_status=row.get("fit_status") or "",
            )
        )
    return rows


def labels_from_success_rates(
    data: YubiData, variants: tuple[str, ...]
) -> dict[str, dict[tuple[str, str], int]]:
    """Reliability labels ``H`` recomputed from the success counts.

    Args:
        data: Parsed data.
        variants: Variant names as in the reliability files (mapped with
            :data:`VARIANT_TO_CONDITION`; ``"Clean"`` maps to the clean scene).

    Returns:
        Target (each task and ``"All-three"``) -> {(scene, variant): H}.
    """
    labels: dict[str, dict[tuple[str, str], int]] = {t: {} for t in (*data.tasks, ALL_THREE)}
    for variant in variants:
        condition = VARIANT_TO_CONDITION.get(variant, variant)
        for scene in data.scenes:
            pairs = data.clean if condition == CLEAN else data.counterfactual.get(condition, {})
            task_labels = [
                reliability_label(pairs[(scene, t)]) for t in data.tasks if (scene, t) in pairs
            ]
            if len(task_labels) != len(data.tasks):
                continue
            for task, value in zip(data.tasks, task_labels, strict=True):
                labels[task][(scene, variant)] = value
            labels[ALL_THREE][(scene, variant)] = int(any(task_labels))
    return labels


__all__ = [
    "CLEAN",
    "CONDITION_LABELS",
    "PAPER_CLEAN",
    "PAPER_RELIABILITY",
    "PAPER_TABLE1",
    "VARIANT_TO_CONDITION",
    "ReliabilityRow",
    "YubiData",
    "labels_from_success_rates",
    "load_yubi",
]
