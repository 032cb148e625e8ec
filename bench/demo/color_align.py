"""Colour alignment of the demo's simulated backgrounds to the robot's real camera (item 5).

``python -m bench.demo.color_align --out DIR`` fits, per room, real2sim-eval's per-channel
polynomial (:func:`bench.align.color.fit_color_polynomial`, IRLS / Tukey) from the clean
simulated wrist views to the "real" ones at the reset pose of training states (the
demonstrations' starts 5000+, a few per task; never a study, screen or evaluation start), and
measures the wrist-view PSNR of :func:`bench.demo.build_report.wrist_view_psnr` on its
held-out starts 7000+ before and after, with the fit applied the way a study applies it (the
spec's ``real_world.background_color``: :mod:`bench.study.world_domain`). Writes
``DIR/background_color.json`` (scene -> fit: what a spec's ``real_world.background_color``
takes), ``DIR/wrist_psnr.{csv,md}`` and ``DIR/manifest.json``. Computes with the reference
numerics (:mod:`bench.numerics`), as ``bench demo`` does. The shipped fit
(``bench/demo/assets/background_color.json``, a copy of ``DIR/background_color.json``,
read by :func:`bench.demo.appearance_assets.load_background_color`) is what
a demo profile with ``background_color="shipped"`` (``bench demo --background-color shipped``)
aligns with (docs/demo-build.md, "Colour alignment on top of the fitted lights").
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOL = "demo-color-align/1"


@dataclass(frozen=True)
class ColorAlignConfig:
    """What the fit and its measurement run (the single source of their defaults).

    Attributes:
        worlds: Ground-truth rooms fitted, one fit each.
        tasks: Tasks whose training states the fit pools and whose wrist views are measured.
        fit_offset: First training start (the demonstrations' block, 5000+).
        fit_starts: Training starts per task the fit uses (reset pose, both lenses).
        eval_starts: Held-out starts of the measurement (the time limits' block).
        degree: Polynomial degree per channel (real2sim-eval: 2).
    """

    worlds: tuple[str, ...] = ("gt-duo", "gt-flat", "gt-g2")
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    fit_offset: int = 5000
    fit_starts: int = 4
    eval_starts: tuple[int, ...] = (7000, 7001, 7002)
    degree: int = 2


def fit_room(world: str, config: ColorAlignConfig) -> Any:
    """The room's :class:`~bench.align.color.ColorFit`, simulated -> real wrist pixels."""
    import numpy as np

    from bench.align.color import fit_color_polynomial
    from bench.demo.build_report import wrist_pixel_pairs

    starts = tuple(range(config.fit_offset, config.fit_offset + config.fit_starts))
    pairs = [p for task in config.tasks
             for p in wrist_pixel_pairs(world, task=task, starts=starts)]
    real = np.concatenate([a for a, _ in pairs])
    sim = np.concatenate([b for _, b in pairs])
    return fit_color_polynomial(sim, real, degree=config.degree)


def measure(config: ColorAlignConfig) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Per room its fit; per (room, task) the held-out wrist PSNR before and after."""
    from bench.demo.build_report import wrist_view_psnr
    from bench.demo.run import WORLDS

    scene_of = {w: s for s, w in WORLDS.items()}
    fits, rows = {}, []
    for world in config.worlds:
        fit = fit_room(world, config)
        fits[scene_of[world]] = fit
        for task in config.tasks:
            before = wrist_view_psnr(world, task=task, starts=config.eval_starts)
            after = wrist_view_psnr(world, task=task, starts=config.eval_starts,
                                    background_color=fit)
            rows.append({"world": world, "task": task, "psnr_before": round(before, 4),
                         "psnr_after": round(after, 4), "reaches_22_db": after >= 22.0})
            print(f"[color align] {world} {task}: {before:.2f} -> {after:.2f} dB",
                  file=sys.stderr, flush=True)
    return fits, rows


def write(out: Path, config: ColorAlignConfig, fits: dict[str, Any],
          rows: list[dict[str, Any]]) -> None:
    """``background_color.json``, ``wrist_psnr.{csv,md}`` and ``manifest.json`` in ``out``."""
    import dataclasses

    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from protocols.tablefmt import write_table

    with staged_output_dir(out, overwrite=True) as tmp:
        atomic_write_json(tmp / "background_color.json",
                          {scene: fit.to_dict() for scene, fit in fits.items()})
        header = list(rows[0])
        paths = write_table(
            tmp, "wrist_psnr", header, [list(r.values()) for r in rows],
            title="Wrist-view PSNR, real vs clean simulated, before / after colour alignment",
            notes=[f"Fit per room on training starts {config.fit_offset}+ "
                   f"({config.fit_starts} per task, reset pose); measured on held-out starts "
                   f"{', '.join(map(str, config.eval_starts))}; degree {config.degree}."])
        paths.append(tmp / "background_color.json")
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL, params=dataclasses.asdict(config), seed=0,
            outputs={p.name: p for p in paths},
            counts={"rooms": len(fits), "task_rooms": len(rows),
                    "reaching_22_db": sum(r["reaches_22_db"] for r in rows)}))


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.demo.color_align --out DIR [--worlds ...] [--tasks ...]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.demo.color_align",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--worlds", default=",".join(ColorAlignConfig.worlds),
                        help="comma-separated ground-truth rooms")
    parser.add_argument("--tasks", default=",".join(ColorAlignConfig.tasks),
                        help="comma-separated tasks")
    parser.add_argument("--fit-starts", type=int, default=ColorAlignConfig.fit_starts,
                        help="training starts per task for the fit (count)")
    args = parser.parse_args(argv)

    from bench.errors import BenchError
    from bench.numerics import apply_reference_numerics, require_reference_numerics

    apply_reference_numerics()  # before numpy loads: the tables of every x86-64-v3 CPU
    try:
        require_reference_numerics(allow_native=False)
    except BenchError as exc:
        print(f"color_align: error: {exc}", file=sys.stderr)
        return 2
    from bench.demo.run import TASKS, WORLDS

    worlds, tasks = tuple(args.worlds.split(",")), tuple(args.tasks.split(","))
    bad = [w for w in worlds if w not in WORLDS.values()] + [t for t in tasks if t not in TASKS]
    if bad or args.fit_starts < 1:
        parser.error(f"unknown rooms or tasks {bad} (rooms: {list(WORLDS.values())}, tasks: "
                     f"{list(TASKS)}) or --fit-starts < 1")
    config = ColorAlignConfig(worlds=worlds, tasks=tasks, fit_starts=args.fit_starts)
    fits, rows = measure(config)
    write(args.out, config, fits, rows)
    print(f"wrote {args.out}: {sum(r['reaches_22_db'] for r in rows)} of {len(rows)} "
          "task-rooms >= 22 dB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
