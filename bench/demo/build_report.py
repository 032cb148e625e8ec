"""The build's report: Test scores of every shipped background, the dose and the wrist views.

``python -m bench.demo.build_report ROOT OUT`` (ROOT: a build directory or
``bench/demo/assets``) writes ``OUT/scores.{csv,md}`` and ``OUT/summary.json``, the tables of
docs/demo-build.md. Kept apart from :mod:`bench.demo.build` because the wrist views are
measured in the study's own envs (:mod:`bench.demo.run`), which build the demo's assets
from :mod:`bench.demo.build`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.demo.build import (
    DEMO_CONDITIONS,
    DEMO_WORLDS,
    near_removed_views,
    score_test_views,
    shipped_bundle,
    shipped_capture,
)


def wrist_view_psnr(world: str, *, condition: str = "clean", task: str = "cup",
                    starts: tuple[int, ...] = (7000, 7001, 7002),
                    root: Path | None = None, lights: Any = "study",
                    background_color: Any = None) -> float:
    """Mean PSNR (dB) of the "real" wrist views against the reconstruction's, same states.

    Both envs are the ones the demo study itself builds
    (:func:`bench.study.work_unit.make_study_env` on the default profile's spec): the
    ground-truth world at the real domain's settings (:data:`bench.worlds.real.REAL_DOMAIN`:
    shadows off, sensor model) and the simulated env on the reconstructed background (the
    same tilted ``yubi-dual`` rig, Gaussians composited behind the MuJoCo robot and
    objects), each reset to every start of ``starts`` (held out: the time limits' block, no
    study start); both fisheyes are compared inside their image circle. (Until 2026-12-05
    this used the ground-truth renderer's defaults, shadows on, which the study never
    renders: 18.0-19.8 dB instead of the study's 16.4-20.3 dB.) ``lights``: how the
    simulator's meshes are lit: ``"study"`` (the study's: the shipped fitted lights),
    ``"default"`` (the task world's own headlight and sun) or a
    :class:`bench.sim.lighting.MeshLights` (:mod:`bench.demo.mesh_lights`).
    ``background_color``: a :class:`bench.align.color.ColorFit` for the simulated
    background (the spec's ``real_world.background_color``), or None: unaligned (whatever
    the profile does).
    """
    import numpy as np

    from metrics.psnr import psnr

    pairs = wrist_pixel_pairs(world, condition=condition, task=task, starts=starts, root=root,
                              lights=lights, background_color=background_color)
    return float(np.mean([psnr(a[None, :, None], b[None, :, None])[0] for a, b in pairs]))


def wrist_pixel_pairs(world: str, *, task: str, starts: tuple[int, ...],
                      condition: str = "clean", root: Path | None = None,
                      lights: Any = "study", background_color: Any = None
                      ) -> list[tuple[Any, Any]]:
    """Per start and camera, the real and simulated wrist pixels inside the image circle.

    Float ``[M, 3]`` arrays in [0, 1], from the envs :func:`wrist_view_psnr` describes.
    """
    import numpy as np

    from bench.demo.run import DemoConfig
    from bench.scene.bundle import load_scene
    from bench.study.work_unit import make_study_env

    spec = DemoConfig(out=Path("."), tasks=(task,)).study_spec()
    scene = {w: s for s, w in spec.real_world["worlds"].items()}[world]
    if lights != "study":  # the spec's own mechanism: no entry keeps the task world's lights
        spec = spec.replace(real_world={**spec.real_world, "mesh_lights": {} if lights ==
                                        "default" else {scene: lights.to_json()}})
    # None: unaligned whatever the profile does (the colour fit is made from these pixels)
    spec = spec.replace(real_world={**spec.real_world, "background_color": {} if
                                    background_color is None else
                                    {scene: background_color.to_dict()}})
    real = make_study_env(spec, scene=scene, task=task, domain="real", bundle=None)
    sim = make_study_env(spec, scene=scene, task=task, domain="sim",
                         bundle=load_scene(shipped_bundle(world, condition, root=root)))
    pairs = []
    try:
        for start in starts:
            obs_real, _ = real.reset(seed=start)
            obs_sim, _ = sim.reset(seed=start)
            for cam in sim.unwrapped.rig:
                valid = cam.intrinsics.pixel_rays()[1]
                pairs.append((obs_real[cam.key][valid].astype(np.float64) / 255,
                              obs_sim[cam.key][valid].astype(np.float64) / 255))
    finally:
        real.close()
        sim.close()
    return pairs


REPORT_PRESETS = ("hole-54",)  # artifact presets scored beside the coverage conditions


def report(root: Path, out: Path) -> list[dict[str, Any]]:
    """Per world and condition: Test PSNR / SSIM, Gaussians, sizes, train time (CSV + Markdown).

    Written to ``out/scores.csv``, ``out/scores.md`` and ``out/summary.json`` (the numbers of
    docs/demo-build.md).
    """
    import csv

    import numpy as np

    from bench.provenance import atomic_write_bytes, atomic_write_json, sha256_file
    from bench.recon.capture import CaptureManifest
    from bench.recon.train import load_image
    from bench.scene.bundle import load_scene
    from metrics.psnr import psnr
    from perturbations import apply_perturbation

    # train times are measured by the build (root/timings); a report on the shipped assets
    # keeps those of the previous report, which the build that trained them wrote
    earlier = {}
    if (out / "summary.json").is_file():
        earlier = {(r["world"], r["condition"]): r.get("train_s")
                   for r in json.loads((out / "summary.json").read_text())["rows"]}
    rows, per_view = [], {}
    for world in DEMO_WORLDS:
        near = near_removed_views(world, root=root)
        capture = shipped_capture(world, root=root)
        for condition in (*DEMO_CONDITIONS, *REPORT_PRESETS):
            source = shipped_bundle(world, "clean" if condition in REPORT_PRESETS else condition,
                                    root=root)
            bundle = source
            if condition in REPORT_PRESETS:  # the study's edit of the clean background
                bundle = apply_perturbation(load_scene(source), condition, seed=0).bundle
            scores = score_test_views(bundle, capture)
            per_view[f"{world}/{condition}"] = scores
            manifest = json.loads((source / "manifest.json").read_text())
            timing = root / "timings" / f"{world}__{condition}.json"
            train_s = (json.loads(timing.read_text())["seconds"] if timing.is_file()
                       else earlier.get((world, condition)))
            rows.append({
                "world": world, "condition": condition,
                "train_views": manifest["counts"]["train_views"],
                "gaussians": (len(bundle.background) if condition in REPORT_PRESETS
                              else manifest["counts"]["gaussians"]),
                "test_psnr": round(float(np.mean([s["psnr"] for s in scores])), 2),
                "test_ssim": round(float(np.mean([s["ssim"] for s in scores])), 4),
                "near_removed_psnr": round(float(np.mean([scores[k]["psnr"] for k in near])), 2),
                "background_mb": (None if condition in REPORT_PRESETS else
                                  round((source / "background.ply").stat().st_size / 1e6, 2)),
                "train_s": None if condition in REPORT_PRESETS else train_s,
            })
    cross = {}
    images = {w: np.stack([load_image(v_root / v.image) for v in m.test_views])
              for w in DEMO_WORLDS
              for m in [CaptureManifest.load(shipped_capture(w, root=root), require_views=False)]
              for v_root in [m.root]}
    for i, a in enumerate(DEMO_WORLDS):
        for b in DEMO_WORLDS[i + 1:]:
            cross[f"{a} vs {b}"] = round(float(np.mean(psnr(images[a], images[b]))), 2)
    wrist = {w: round(wrist_view_psnr(w, root=root), 2) for w in DEMO_WORLDS}
    # the dose (issue 33 item 3): mean over the worlds of clean - condition, per view set
    clean = {r["world"]: r["test_psnr"] for r in rows if r["condition"] == "clean"}
    drops = {c: round(float(np.mean([clean[r["world"]] - r["test_psnr"] for r in rows
                                     if r["condition"] == c])), 2)
             for c in (*DEMO_CONDITIONS[1:], *REPORT_PRESETS)}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "scores.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    atomic_write_bytes(out / "scores.md", ("\n".join(lines) + "\n").encode())
    atomic_write_json(out / "summary.json", {
        "rows": rows, "mean_test_psnr_drop_db": drops,
        "inputs_sha256": {  # what was scored: the dose test checks them against the assets
            **{f"captures/{w}/capture.json": sha256_file(shipped_capture(w, root=root))
               for w in DEMO_WORLDS},
            **{f"scenes/{w}/{c}/background.ply":
               sha256_file(shipped_bundle(w, c, root=root) / "background.ply")
               for w in DEMO_WORLDS for c in DEMO_CONDITIONS}},
        "per_view": per_view,
        "test_view_psnr_between_worlds": cross,
        "wrist_view_psnr_real_vs_clean": wrist,
        "near_removed_views": {w: near_removed_views(w, root=root) for w in DEMO_WORLDS}})
    return rows


if __name__ == "__main__":  # the tables of docs/demo-build.md
    for row in report(Path(sys.argv[1]), Path(sys.argv[2])):
        print(row)
