"""The main job (``bench demo``): the whole study end to end on a bundled synthetic world.

A clear sequence of stage functions; each takes the run context and returns
nothing, recording what it made in ``context.records`` / ``context.outputs``.
The whole run is written into a staged directory that is renamed into place
only when every stage succeeded.

Stages:

1. ``study`` - :func:`bench.study.runner.run_study` on three generated sample
   rooms (seeds 0, 1, 2: stand-ins for Duo, Flat and G2) under clean + the six
   artifact presets: condition bundles + manifests (``scenes/``), synthetic
   captures (``captures/``), quality scores, paired rollouts of
   ``visual-servo`` vs ``visual-glance`` per task, verdict tables
   (``tables/``) and figures (``figures/``), all rows in ``results.sqlite``
2. ``yubi`` - the YUBI-Real2Sim tables regenerated from the shipped public data
   (``yubi/``)
3. ``summary`` - ``summary.csv`` / ``summary.md`` (conditions, ranking agreement,
   reliability) and the same on stdout

Same seed and options -> the same tables (rollouts, scores and manifests are
deterministic; figures are byte-stable on one matplotlib build).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest, staged_output_dir

VERSION = 2
PRESETS = ("hole-54", "hole-90", "floaters-low", "floaters-mid", "floaters-high", "warp")
SCENES = (("duo", 0), ("flat", 1), ("g2", 2))


@dataclass(frozen=True)
class DemoConfig:
    """Resolved configuration of a demo run (written to ``config.json``).

    Attributes:
        out: Output directory.
        seed: Seed of every editor and of the capture noise (scene seeds are in ``scenes``).
        n_gaussians: Background Gaussians of each sample room (count).
        presets: Perturbation presets (registry names), run besides clean.
        scenes: (name, sample-room seed) of each scene.
        tasks: Tasks to evaluate.
        trials: Simulated rollouts per (scene, condition, task, policy) cell.
        real_trials: "Real"-domain rollouts per (scene, task, policy) (the ``simulated-real``
            stand-in: the clean world on other starts; YUBI's real count, 20).
        max_frames: Rollout time limit, 10 Hz frames.
        metrics: Quality scorers.
        obs_policy_every: Keep every k-th policy query's wrist frame for OBS-Policy.
        overwrite: Replace an existing output directory.
    """

    out: Path
    seed: int = 0
    n_gaussians: int = 20000
    presets: tuple[str, ...] = PRESETS
    scenes: tuple[tuple[str, int], ...] = SCENES
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    trials: int = 3
    real_trials: int = 20
    max_frames: int = 200
    metrics: tuple[str, ...] = ("psnr", "ssim", "lpips", "nvs-sqa")
    obs_policy_every: int = 4
    overwrite: bool = False

    def study_spec(self):
        """The :class:`~bench.study.spec.StudySpec` this demo runs."""
        from bench.study.spec import StudySpec

        return StudySpec(name="demo", sample_scenes=dict(self.scenes),
                         sample_gaussians=self.n_gaussians,
                         conditions=("clean", *self.presets), seed=self.seed, tasks=self.tasks,
                         trials=self.trials, real_trials=self.real_trials,
                         max_frames=self.max_frames, metrics=self.metrics,
                         real_domain="simulated", obs_policy_every=self.obs_policy_every)


@dataclass
class DemoContext:
    """Mutable state handed from stage to stage."""

    config: DemoConfig
    root: Path  # the staged output directory (renamed to config.out at the end)
    records: list[dict[str, Any]] = field(default_factory=list)  # one row per condition
    outputs: dict[str, Path] = field(default_factory=dict)  # name -> file, hashed in manifest
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    study: dict[str, Any] = field(default_factory=dict)  # the study's summary
    yubi: dict[str, Any] = field(default_factory=dict)


def stage_study(ctx: DemoContext) -> None:
    """Run the paired study on the three sample rooms into the output root."""
    from bench.study.runner import run_study

    result = run_study(ctx.config.study_spec(), ctx.root, overwrite=False)
    ctx.study = result.tables
    for rel in result.tables["files"]:
        ctx.outputs[rel] = ctx.root / rel
    sizes = {}  # scene -> clean background size
    for (scene, cond), bundle in sorted(result.bundles.items(), key=lambda kv: kv[0][1] != "clean"):
        manifest = json.loads(bundle.manifest.read_text())
        counts = manifest.get("counts", {})
        if cond == "clean":
            sizes[scene] = counts["gaussians"]
        ctx.records.append({
            "scene": scene, "condition": cond, "tool": manifest["tool"],
            "gaussians": sizes[scene] - counts.get("removed", 0) + counts.get("added", 0),
            "removed": counts.get("removed", 0), "added": counts.get("added", 0),
            "moved": counts.get("moved", 0),
            "path": str(bundle.path.relative_to(ctx.root)),
            "manifest_sha256": bundle.manifest_sha256[:12]})


def stage_yubi(ctx: DemoContext) -> None:
    """Regenerate the YUBI-Real2Sim tables and figures from the shipped public data."""
    from protocols.cli import DEFAULT_YUBI_DATA
    from protocols.yubi import load_yubi
    from protocols.yubi_report import regenerate

    target = ctx.root / "yubi"
    target.mkdir()
    checks = regenerate(load_yubi(DEFAULT_YUBI_DATA), target)
    table1 = checks["table1"]
    ctx.yubi = {"table1_rows_matching": sum(c["match"] for c in table1),
                "table1_rows": len(table1)}
    ctx.outputs["yubi/manifest.json"] = target / "manifest.json"


def stage_summary(ctx: DemoContext) -> None:
    """Write the condition + verdict summary as CSV + Markdown and print it."""
    from protocols.tablefmt import csv_text, markdown_text

    ctx.records.sort(key=lambda r: (r["scene"], r["condition"]))
    columns = ["scene", "condition", "tool", "gaussians", "removed", "added", "moved", "path",
               "manifest_sha256"]
    rows = [[r[c] for c in columns] for r in ctx.records]
    atomic_write_bytes(ctx.root / "summary.csv", csv_text(columns, rows).encode())
    ranking = [[r["condition"], f"{r['correct']}/{r['eligible']}", r["accuracy"], r["mae"],
                r["mmrv"], r["pearson"]] for r in ctx.study["ranking"]]
    text = markdown_text(columns, rows, title="Conditions")
    text += "\n" + markdown_text(
        ["condition", "agree/eligible", "Acc_rank", "MAE (pp)", "MMRV", "Pearson"], ranking,
        title=f"Ranking agreement with the real domain ({ctx.study['real_source']})",
        notes=["simulated-real: the clean world on other starts, a stand-in (no robot)."])
    rel = ctx.study["reliability"]
    if "methods" in rel:
        targets = list(next(iter(rel["methods"].values())))
        rel_rows = [[m, *[f"{v[t][0]}/{v[t][1]}" for t in targets]]
                    for m, v in rel["methods"].items()]
        text += "\n" + markdown_text(["method", *targets], rel_rows,
                                     title="Scene-held-out reliability classifier")
    else:
        text += f"\nReliability classifier skipped: {rel.get('skipped')}\n"
    if ctx.yubi:
        text += (f"\nYUBI tables regenerated: Table I rows matching the paper "
                 f"{ctx.yubi['table1_rows_matching']}/{ctx.yubi['table1_rows']} (yubi/)\n")
    atomic_write_bytes(ctx.root / "summary.md", text.encode())
    ctx.outputs["summary.csv"] = ctx.root / "summary.csv"
    ctx.outputs["summary.md"] = ctx.root / "summary.md"
    print(text, end="")


STAGES: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("study", stage_study),
    ("yubi", stage_yubi),
    ("summary", stage_summary),
]


def run_demo(config: DemoConfig) -> Path:
    """Run every stage into a staged directory, then move it to ``config.out``.

    Returns:
        The output directory (with ``config.json`` and ``manifest.json``).
    """
    with staged_output_dir(config.out, overwrite=config.overwrite) as tmp:
        ctx = DemoContext(config=config, root=tmp)
        for name, stage in STAGES:
            started = time.perf_counter()
            print(f"[bench demo] stage {name} ...", file=sys.stderr)
            stage(ctx)
            ctx.timings[name] = round(time.perf_counter() - started, 3)
            print(f"[bench demo] stage {name} done in {ctx.timings[name]:.1f}s", file=sys.stderr)
        atomic_write_json(tmp / "config.json", config)
        manifest = make_manifest(tool=f"demo/{VERSION}", params=config, seed=config.seed,
                                 outputs=ctx.outputs,
                                 counts={"conditions": len(ctx.records)},
                                 extra={"stages": [n for n, _ in STAGES]})
        atomic_write_json(tmp / "manifest.json", manifest)
        print(f"[bench demo] wall time by stage (s): {ctx.timings}", file=sys.stderr)
    return config.out
