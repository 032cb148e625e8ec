"""The main job (``bench demo``): the bench end to end on data it generates itself.

A clear sequence of stage functions; each takes the run context and returns
nothing, recording what it made in ``context.records`` / ``context.outputs``.
Later stages (rendering, scoring, rollouts, tables) are appended to
:data:`STAGES`. The whole run is written into a staged directory that is
renamed into place only when every stage succeeded.

Current stages:

1. ``sample_scene`` - the procedural sample room -> ``scenes/clean/``
2. ``perturbations`` - every study preset (hole-54, hole-90, floaters-low/mid/high,
   warp) applied to it -> ``scenes/<preset>/`` (bundle + manifest.json)
3. ``summary`` - ``summary.csv`` / ``summary.md`` and a table on stdout
"""

from __future__ import annotations

import csv
import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest, staged_output_dir

VERSION = 1


@dataclass(frozen=True)
class DemoConfig:
    """Resolved configuration of a demo run (written to ``config.json``).

    Attributes:
        out: Output directory.
        seed: Seed of the sample scene and of every editor.
        n_gaussians: Background Gaussians of the sample room (count).
        presets: Perturbation presets to apply (registry names).
        overwrite: Replace an existing output directory.
    """

    out: Path
    seed: int = 0
    n_gaussians: int = 40000
    presets: tuple[str, ...] = ("hole-54", "hole-90", "floaters-low", "floaters-mid",
                                "floaters-high", "warp")
    overwrite: bool = False


@dataclass
class DemoContext:
    """Mutable state handed from stage to stage."""

    config: DemoConfig
    root: Path  # the staged output directory (renamed to config.out at the end)
    records: list[dict[str, Any]] = field(default_factory=list)  # one row per condition
    outputs: dict[str, Path] = field(default_factory=dict)  # name -> file, hashed in manifest
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds


def stage_sample_scene(ctx: DemoContext) -> None:
    """Generate the sample room and save it as the clean condition."""
    from bench.scene.bundle import write_scene_files
    from bench.scene.sample import make_sample_scene

    bundle = make_sample_scene(seed=ctx.config.seed, n_gaussians=ctx.config.n_gaussians)
    clean = ctx.root / "scenes" / "clean"
    clean.mkdir(parents=True)
    paths = write_scene_files(bundle, clean)
    ctx.outputs["clean/background"] = paths["background"]
    ctx.records.append({"condition": "clean", "tool": "sample-room/1",
                        "gaussians": len(bundle.background), "removed": 0, "added": 0,
                        "moved": 0, "path": "scenes/clean"})


def stage_perturbations(ctx: DemoContext) -> None:
    """Apply every preset to the clean bundle; one bundle + manifest per preset."""
    from bench.scene.bundle import load_scene
    from perturbations.apply import apply_perturbation, save_perturbed

    clean = load_scene(ctx.root / "scenes" / "clean")
    for name in ctx.config.presets:
        result = apply_perturbation(clean, name, seed=ctx.config.seed)
        target = save_perturbed(result, ctx.root / "scenes" / name)
        ctx.outputs[f"{name}/background"] = target / "background.ply"
        ctx.records.append({"condition": name, "tool": result.tool,
                            "gaussians": len(result.bundle.background), **result.stats.counts(),
                            "path": f"scenes/{name}"})


def stage_summary(ctx: DemoContext) -> None:
    """Write the condition table as CSV + Markdown and print it."""
    columns = ["condition", "tool", "gaussians", "removed", "added", "moved", "path"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(ctx.records)
    atomic_write_bytes(ctx.root / "summary.csv", buffer.getvalue().encode())
    markdown = markdown_table(ctx.records, columns)
    atomic_write_bytes(ctx.root / "summary.md", markdown.encode())
    ctx.outputs["summary.csv"] = ctx.root / "summary.csv"
    print(markdown, end="")


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


STAGES: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("sample_scene", stage_sample_scene),
    ("perturbations", stage_perturbations),
    ("summary", stage_summary),
]


def run_demo(config: DemoConfig) -> Path:
    """Run every stage into a staged directory, then move it to ``config.out``.

    Returns:
        The output directory (with ``config.json`` and ``manifest.json``).
    """
    with staged_output_dir(config.out, overwrite=config.overwrite) as tmp:
        ctx = DemoContext(config=config, root=tmp)
        atomic_write_json(tmp / "config.json", config)
        for name, stage in STAGES:
            started = time.perf_counter()
            print(f"[bench demo] stage {name} ...", file=sys.stderr)
            stage(ctx)
            ctx.timings[name] = round(time.perf_counter() - started, 3)
            print(f"[bench demo] stage {name} done in {ctx.timings[name]:.1f}s", file=sys.stderr)
        manifest = make_manifest(tool=f"demo/{VERSION}", params=config, seed=config.seed,
                                 outputs=ctx.outputs,
                                 counts={"conditions": len(ctx.records)},
                                 extra={"stages": [n for n, _ in STAGES]})
        atomic_write_json(tmp / "manifest.json", manifest)
    return config.out
