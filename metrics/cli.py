"""``bench score``: image-quality scores of a scene variant on a view protocol, or of image folders.

Forms::

    bench score --scene SCENE_DIR --views test --gt CAPTURED_DIR --out scores.csv
    bench score --scene SCENE_DIR --views obs-probe [--clean CLEAN_SCENE_DIR] --out scores.csv
    bench score --views obs-policy --frames FRAMES_DIR|ROLLOUT_DIR --out scores.csv
    bench score --pred RENDERS_DIR --gt CAPTURED_DIR --out scores.csv

Writes ``scores.csv`` (long format: scene, variant, view_protocol, metric, frame,
value), ``scores.summary.csv`` (frame means, oriented values and, with
``--clean``, the paired dQ) and ``scores.manifest.json``. Only the standard
library is imported at module level.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_METRICS = {
    "test": "psnr,ssim,lpips,nvs-sqa",
    "obs-probe": "nvs-sqa",
    "obs-policy": "nvs-sqa",
    "images": "psnr,ssim,lpips",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench score``."""
    p = subparsers.add_parser(
        "score",
        help="score a scene variant (or image folders) with PSNR/SSIM/LPIPS/NVS-SQA/pyiqa",
        description="Image-quality scores on Test, OBS-Probe or OBS-Policy views, or on two "
        "image folders (--pred/--gt). Writes a long-format CSV, a summary CSV and a manifest.",
    )
    p.add_argument("--scene", type=Path, help="scene bundle directory (the variant to score)")
    p.add_argument("--views", choices=("test", "obs-probe", "obs-policy"),
                   help="view protocol (required with --scene or --frames)")
    p.add_argument("--gt", type=Path,
                   help="folder of captured/reference images (8-bit PNG/JPG), aligned with the "
                   "test cameras by camera name or order, or with --pred by file name")
    p.add_argument("--pred", type=Path, help="folder of rendered images to score against --gt")
    p.add_argument("--frames", type=Path,
                   help="obs-policy: folder of recorded frames (one episode, file order), a "
                   "GIF/MP4, or a `bench rollout --video` output folder (one sequence per "
                   "videos/episode_XXXX)")
    p.add_argument("--clean", type=Path,
                   help="clean scene bundle: also score it on the same views and report "
                   "dQ = Q_variant - Q_clean in the summary")
    p.add_argument("--variant", help="variant label for the CSV (default: the condition a "
                   "bench perturb bundle records, e.g. hole-54, else the scene name)")
    p.add_argument("--metrics",
                   help="comma-separated scorers: psnr, ssim, lpips, nvs-sqa, pyiqa:<name> "
                   f"(defaults: {'; '.join(f'{k}: {v}' for k, v in DEFAULT_METRICS.items())})")
    p.add_argument("--list-metrics", action="store_true",
                   help="print the built-in scorers with their metadata and exit")
    p.add_argument("--out", type=Path,
                   help="long-format CSV path (required unless --list-metrics); the summary "
                   "(.summary.csv) and manifest (.manifest.json) are written next to it")
    p.add_argument("--device", default="auto", choices=("cpu", "cuda", "auto"),
                   help="torch device for the scorers (auto = cuda when available)")
    p.add_argument("--backend", default="auto",
                   help="rasterizer for rendering views: auto (gsplat with CUDA, else cpu), "
                   "cpu, gsplat, torch, reference")
    p.add_argument("--background", default="0,0,0",
                   help="render background colour R,G,B in [0, 1]")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars (stderr)")
    p.set_defaults(func=run)


def _check_args(args: argparse.Namespace) -> str:
    """Validate the argument combination; return the view protocol."""
    from bench.errors import BenchError

    if args.pred is not None:
        if args.scene is not None or args.views is not None or args.frames is not None:
            raise BenchError("--pred DIR scores image folders; do not combine it with "
                             "--scene/--views/--frames")
        return "images"
    if args.views is None:
        raise BenchError("pass --views test|obs-probe|obs-policy (with --scene or --frames), "
                         "or --pred DIR --gt DIR for image folders")
    if args.views == "obs-policy":
        if args.frames is None:
            raise BenchError("--views obs-policy reads recorded frames: pass --frames DIR")
        if args.gt is not None or args.clean is not None:
            raise BenchError("obs-policy views are no-reference: drop --gt/--clean")
        return "obs-policy"
    if args.scene is None:
        raise BenchError(f"--views {args.views} renders a scene: pass --scene SCENE_DIR")
    if args.views == "test" and args.gt is None:
        raise BenchError("--views test needs the captured images of the test cameras: --gt DIR")
    if args.views == "obs-probe" and args.gt is not None:
        raise BenchError("obs-probe views are no-reference: drop --gt")
    return args.views


def _outputs(out: Path) -> tuple[Path, Path, Path]:
    stem = out.name[: -len(".csv")] if out.name.endswith(".csv") else out.name
    return out, out.with_name(f"{stem}.summary.csv"), out.with_name(f"{stem}.manifest.json")


def _csv_bytes(header, rows) -> bytes:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([repr(v) if isinstance(v, float) else v for v in row])
    return buf.getvalue().encode("utf-8")


def _folder_digest(source: Path) -> dict:
    """File count and one sha256 over (relative name, sha256) of the image/video inputs."""
    from bench.provenance import sha256_bytes, sha256_file
    from metrics.images import IMAGE_SUFFIXES, natural_key
    from metrics.views import VIDEO_SUFFIXES

    suffixes = IMAGE_SUFFIXES + VIDEO_SUFFIXES
    if source.is_file():
        files, base = [source], source.parent
    else:
        base = source
        files = [p for folder in (source, source / "videos") if folder.is_dir()
                 for p in folder.iterdir() if p.is_file() and p.suffix.lower() in suffixes]
    files.sort(key=lambda p: natural_key(str(p.relative_to(base))))
    listing = "".join(f"{p.relative_to(base)}\t{sha256_file(p)}\n" for p in files)
    return {"files": len(files), "sha256": sha256_bytes(listing.encode("utf-8"))}


def run(args: argparse.Namespace) -> int:
    """Handler of ``bench score``."""
    from bench.errors import BenchError
    from metrics import views as V
    from metrics.registry import get_scorer, scorer_info

    if args.list_metrics:
        return _list_metrics()
    if args.out is None:
        raise BenchError("pass --out scores.csv (the long-format CSV to write)")
    protocol = _check_args(args)
    outputs = _outputs(args.out)
    folders = [p for p in outputs if p.is_dir()]
    if folders:  # even --overwrite cannot replace a directory with a file
        raise BenchError(f"--out {args.out}: {folders[0]} is a directory; pass a file path "
                         "such as scores.csv (the summary and manifest are written beside it)")
    existing = [p for p in outputs if p.exists()]
    if existing and not args.overwrite:
        raise BenchError(f"{existing[0]} exists; pass --overwrite or choose another --out")
    from bench.safety import check_output_file

    inputs = [args.scene, args.gt, args.pred, args.frames, args.clean]
    for path in outputs:  # no output file may be, or lie inside, an input
        check_output_file(path, overwrite=True, inputs=inputs)
    names = [m.strip() for m in (args.metrics or DEFAULT_METRICS[protocol]).split(",") if m.strip()]
    if not names or len(set(names)) != len(names):
        raise BenchError(f"--metrics {args.metrics!r} must list distinct scorer names")
    infos = [scorer_info(n) for n in names]  # unknown names fail here, before any work
    if protocol in ("obs-probe", "obs-policy"):
        fr = [i.name for i in infos if i.mode == "FR"]
        if fr:
            raise BenchError(f"{protocol} views are no-reference; drop {', '.join(fr)} "
                             "(use nvs-sqa or a pyiqa NR metric)")
    progress = not args.no_progress
    if args.variant is None and args.scene is not None and protocol != "images":
        from perturbations.apply import condition_label

        args.variant = condition_label(args.scene)  # a perturbed bundle names its condition
    episodes, clean_views = _collect_views(args, protocol, progress=progress)
    for view_set in episodes:
        V.validate_views_for_scoring(view_set)

    scorers = [get_scorer(n, device=args.device) for n in names]
    rows = [row for view_set in episodes
            for row in V.score_views(view_set, scorers, progress=progress)]
    n_frames = sum(len(view_set.frames) for view_set in episodes)
    summary = V.summarize(rows, n_frames=n_frames)
    if clean_views is not None:
        clean_rows = V.score_views(clean_views, scorers, progress=progress)
        summary = V.attach_delta(summary, V.paired_delta(rows, clean_rows))
        rows = clean_rows + rows
    counts = {"frames": n_frames, "sequences": len(episodes), "rows": len(rows),
              "metrics": len(names)}
    _write_outputs(args, outputs, rows, summary, scorers, counts, protocol=protocol)
    for row in summary:
        delta = "" if row.delta != row.delta else f"  dQ {row.delta:+.4f}"
        print(f"{row.variant} {row.view_protocol} {row.metric}: {row.mean:.4f} "
              f"({row.n_frames} frames){delta}")
    return 0


def _list_metrics() -> int:
    from metrics.registry import available, scorer_info

    print("name      mode  better  unit      version")
    for name in available():
        info = scorer_info(name)
        better = "lower" if info.lower_better else "higher"
        print(f"{name:9s} {info.mode:5s} {better:7s} {info.unit:9s} {info.version}")
    print("pyiqa:<name>  any per-image pyiqa metric (mode/direction from pyiqa)")
    return 0


def _collect_views(args: argparse.Namespace, protocol: str, *, progress: bool):
    """The view sets to score (one per OBS-Policy episode) and the clean scene's, if paired."""
    from metrics import views as V

    if protocol == "images":
        return [V.folder_views(args.pred, protocol="images", gt_dir=args.gt,
                               variant=args.variant or "")], None
    if protocol == "obs-policy":
        return V.policy_views(args.frames, scene=args.scene.name if args.scene else "",
                              variant=args.variant or ""), None
    from bench.render.cli import parse_background
    from bench.scene.bundle import load_scene

    background = parse_background(args.background)  # before the slow scene load
    bundle = load_scene(args.scene)
    clean = load_scene(args.clean) if args.clean is not None else None
    # the clean scene's cameras define the views when pairing, so both see the same frames
    cams = V.scene_cameras(clean if clean is not None else bundle, V.CAMERA_ROLES[protocol])
    common = dict(cameras=cams, backend=args.backend,
                  background=background, progress=progress)
    if protocol == "test":
        views = V.test_views(bundle, args.gt, variant=args.variant, **common)
        clean_views = (None if clean is None
                       else V.test_views(clean, args.gt, variant="clean", **common))
    else:
        views = V.obs_probe_views(bundle, variant=args.variant, **common)
        clean_views = (None if clean is None
                       else V.obs_probe_views(clean, variant="clean", **common))
    return [views], clean_views


def _write_outputs(args, outputs, rows, summary, scorers, counts, *, protocol: str) -> None:
    """Long CSV, summary CSV and manifest (scorer metadata, input digests, weight source)."""
    import dataclasses

    from bench.provenance import atomic_write_bytes, atomic_write_json, make_manifest
    from metrics import views as V

    out_csv, out_summary, out_manifest = outputs
    atomic_write_bytes(out_csv, _csv_bytes(
        V.LONG_COLUMNS, [dataclasses.astuple(r) for r in rows]))
    summary_fields = [f.name for f in dataclasses.fields(V.SummaryRow)]
    atomic_write_bytes(out_summary, _csv_bytes(
        summary_fields, [dataclasses.astuple(r) for r in summary]))
    inputs = {}
    if args.scene is not None and (args.scene / "background.ply").is_file():
        inputs["scene_background"] = args.scene / "background.ply"
    if args.clean is not None and (args.clean / "background.ply").is_file():
        inputs["clean_background"] = args.clean / "background.ply"
    extra = {"scorers": {s.info.name: dataclasses.asdict(s.info) for s in scorers},
             "image_folders": {flag: _folder_digest(folder) for flag, folder in
                               (("gt", args.gt), ("pred", args.pred), ("frames", args.frames))
                               if folder is not None}}
    lpips_scorer = next((s for s in scorers if s.info.name == "lpips"), None)
    if lpips_scorer is not None:
        extra["lpips_backbone_weights"] = lpips_scorer.weights_source
    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
              if k not in ("func", "overwrite", "no_progress")}  # these do not change results
    params["metrics"] = [s.info.name for s in scorers]
    params["view_protocol"] = protocol
    manifest = make_manifest(
        tool="score/1", params=params, seed=None, inputs=inputs,
        outputs={"scores": out_csv, "summary": out_summary}, counts=counts, extra=extra,
    )
    atomic_write_json(out_manifest, manifest)
