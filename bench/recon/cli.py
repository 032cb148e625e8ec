"""``bench capture``, ``bench train``, ``bench coverage plan``: from a recording to a background.

Workflow on a real capture (YUBI, ``PAPERS.md``)::

    bench capture select --video left=L.mp4 --video right=R.mp4 --intervals 192 \
        --camera left=left_fisheye.json --camera right=right_fisheye.json --out cap
    bench capture reproject --manifest cap/capture.json --size 2048 --out cap/views.json
    colmap ... on cap/views/*.png  (poses; then a dense seed, e.g. OpenMVS)
    bench capture import-poses --manifest cap/views.json --cameras colmap/sparse/0 \
        --out cap/posed.json
    bench coverage plan --manifest cap/posed.json --mode random --fraction 0.3 --out random.json
    bench train --manifest cap/posed.json --plan random.json --init seed.ply --out scene

Only the standard library is imported at module level; numpy/torch load in the handlers.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench capture``, ``bench train`` and ``bench coverage plan``."""
    _add_capture(subparsers)
    _add_train(subparsers)
    _add_coverage(subparsers)


# --------------------------------------------------------------------------- bench capture
def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    from bench.errors import BenchError

    out: dict[str, str] = {}
    for item in values or []:
        lens, sep, path = item.partition("=")
        if not sep or not lens or not path:
            raise BenchError(f"{what} {item!r} must look like LENS=PATH, e.g. left=left.mp4")
        out[lens] = path
    return out


def _add_capture(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("capture", help="capture manifests: frame selection, fisheye "
                              "-> nine pinhole views, pose import",
                              description="Build a capture manifest step by step: select the "
                              "sharpest frame per time interval (select), reproject each fisheye "
                              "frame into nine 90-degree pinhole views (reproject), take view "
                              "poses from COLMAP or a camera file (import-poses).")
    inner = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    sel = inner.add_parser(
        "select", help="pick the sharpest frame per equal time interval",
        description="Split the recording into T equal time intervals and keep, per interval, "
        "the frame maximising the minimum Laplacian variance over its lenses (ties: earliest).")
    sel.add_argument("--video", action="append", metavar="LENS=PATH",
                     help="frame-synchronised video per lens (repeat for each lens)")
    sel.add_argument("--images", action="append", metavar="LENS=DIR",
                     help="folder of frames per lens, sorted by file name (repeat per lens)")
    sel.add_argument("--fps", type=float, default=None,
                     help="frame rate of --images sequences in frames/s")
    sel.add_argument("--intervals", type=int, required=True,
                     help="number T of equal time intervals = frames kept")
    sel.add_argument("--camera", action="append", metavar="LENS=FILE",
                     help="calibrated camera file per lens (bench.scene.cameras JSON or "
                     "COLMAP OPENCV_FISHEYE); its first camera is attached to every frame")
    sel.add_argument("--out", type=Path, required=True,
                     help="capture directory to create (capture.json, frames/)")
    sel.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    sel.set_defaults(func=_run_capture_select)

    rep = inner.add_parser(
        "reproject", help="reproject fisheye source frames into nine pinhole views each",
        description="One forward view and eight tilted 55 deg at 45 deg azimuth steps, 90x90 "
        "deg FOV, f = size/2; poses world_from_view = world_from_source @ source_from_view.")
    rep.add_argument("--manifest", type=Path, required=True, help="capture manifest")
    rep.add_argument("--size", type=int, default=2048,
                     help="view width = height in pixels (default 2048, f = size/2)")
    rep.add_argument("--lenses", nargs="+", default=None,
                     help="lens names to reproject (default: every lens of the manifest)")
    rep.add_argument("--views-dir", default="views",
                     help="image folder relative to the manifest directory (default views)")
    rep.add_argument("--out", type=Path, required=True,
                     help="new manifest file, in the same directory as --manifest")
    rep.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    rep.set_defaults(func=_run_capture_reproject)

    imp = inner.add_parser(
        "import-poses", help="take view poses from COLMAP / a camera file, by image name")
    imp.add_argument("--manifest", type=Path, required=True, help="capture manifest")
    imp.add_argument("--cameras", type=Path, required=True,
                     help="COLMAP model dir, transforms.json or camera JSON")
    imp.add_argument("--out", type=Path, required=True,
                     help="new manifest file, in the same directory as --manifest")
    imp.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    imp.set_defaults(func=_run_capture_import)

    from bench.cli_fields import add_dataclass_arguments
    from bench.recon.rgbd import RgbdImportConfig

    rgbd = inner.add_parser(
        "import-rgbd", help="posed RGB-D frames -> capture manifest, real Test split, depth seed",
        description="Import a posed RGB-D sequence (7-Scenes / tsdf-fusion frame files, a TUM "
        "association list, or a folder of colour + depth + 4x4 pose files + intrinsics): write "
        "capture.json (training views and every k-th frame held out as real Test views, pinhole "
        "cameras world_from_camera in the sequence's frame, metres, OpenCV axes), the resized "
        "images, and seed_points.ply back-projected from the training frames' depth with their "
        "colours (invalid depth, depth edges, single-view cells and outliers dropped, counted "
        "in manifest.json).")
    rgbd.add_argument("source", type=Path, metavar="SEQUENCE", help="the sequence's folder")
    rgbd.add_argument("--out", required=True, type=Path, help="capture directory to create")
    rgbd.add_argument("--intrinsics", type=Path, default=None,
                      help="3x3 intrinsics file (default: the layout's camera-intrinsics.txt / "
                      "intrinsics.txt; required for tum)")
    rgbd.add_argument("--associations", type=Path, default=None,
                      help="tum: association list (default SEQUENCE/associations.txt)")
    add_dataclass_arguments(rgbd, RgbdImportConfig)
    rgbd.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    rgbd.add_argument("--quiet", action="store_true", help="no progress bar")
    rgbd.set_defaults(func=_run_capture_import_rgbd)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _check_new_file(out: Path, overwrite: bool, manifest: Path | None = None,
                    inputs: tuple = ()) -> None:
    from bench.errors import BenchError
    from bench.safety import check_output_file

    check_output_file(out, overwrite=overwrite, inputs=(("--manifest", manifest), *inputs))
    if manifest is not None and out.resolve().parent != manifest.resolve().parent:
        raise BenchError(f"--out must be in the directory of --manifest ({manifest.parent}) so "
                         "that image paths stay valid")


def _write_capture_provenance(path: Path, manifest, *, tool: str, params: dict,
                              inputs: dict[str, Path]) -> Path:
    """Side-car ``<name>.manifest.json`` next to a written capture manifest ``path``.

    Besides the hashed inputs and output it holds one sha256 digest over the
    source-frame images and one over the view images, so changed pixels change it.
    """
    from bench.provenance import atomic_write_json, make_manifest, sha256_bytes, sha256_file

    frame_lines = "".join(f"{f.id}/{lens}\t{sha256_file(manifest.root / rel)}\n"
                          for f in manifest.frames for lens, rel in sorted(f.images.items()))
    provenance = make_manifest(
        tool=tool, params=params, seed=None, inputs=inputs, outputs={"capture_manifest": path},
        counts={"frames": len(manifest.frames), "views": len(manifest.views),
                "test_views": len(manifest.test_views)},
        extra={"images_sha256": {  # digests over (id, image sha256) lines, in manifest order
            "frames": sha256_bytes(frame_lines.encode("utf-8")),
            "views": manifest.image_digest(manifest.views),
            "test_views": manifest.image_digest(manifest.test_views)}},
    )
    side_car = path.with_name(f"{path.stem}.manifest.json")
    atomic_write_json(side_car, provenance)
    return side_car


def _run_capture_select(args: argparse.Namespace) -> int:
    from bench.errors import BenchError
    from bench.provenance import staged_output_dir
    from bench.recon.capture import CaptureManifest, select_from_images, select_from_videos
    from bench.scene.camera_files import load_cameras

    videos = _pairs(args.video, "--video")
    images = _pairs(args.images, "--images")
    if bool(videos) == bool(images):
        raise BenchError("give either --video LENS=PATH or --images LENS=DIR (not both)")
    sources = videos or images
    if args.intervals < 1:  # before scanning any video
        raise BenchError(f"--intervals must be >= 1, got {args.intervals}")
    if images and args.fps is None:
        raise BenchError("--images needs --fps, the frame rate of the sequences in frames/s")
    if args.fps is not None and not 0 < args.fps < 1e6:
        raise BenchError(f"--fps must be a positive frame rate in frames/s, got {args.fps}")
    if args.intervals > 1_000_000:
        raise BenchError(f"--intervals {args.intervals:,} is above the limit of 1,000,000")
    from bench.safety import check_name, preflight_output_dir

    for lens in sources:
        check_name(lens, what="lens name")
    preflight_output_dir(args.out, overwrite=args.overwrite,
                         inputs=[*sources.values(), *_pairs(args.camera, "--camera").values()])
    unknown = sorted(set(_pairs(args.camera, "--camera")) - set(sources))
    if unknown:
        raise BenchError(f"--camera names lens {unknown[0]!r}, which has no --video/--images; "
                         f"lenses given: {', '.join(sorted(sources))}")
    cameras = {lens: load_cameras(path)[0] for lens, path in _pairs(args.camera,
                                                                   "--camera").items()}
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=[*sources.values(), *_pairs(args.camera, "--camera").values()]
                           ) as tmp:
        if videos:
            frames = select_from_videos(videos, tmp / "frames", intervals=args.intervals,
                                        root=tmp, cameras=cameras, show_progress=True)
        else:
            lists = {}
            for lens, folder in images.items():
                files = sorted(p for p in Path(folder).glob("*")
                               if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".tif", ".tiff"))
                if not files:
                    raise BenchError(f"no .png/.jpg/.tif images in {folder} (lens {lens!r}); "
                                     "pass the folder of extracted frames")
                lists[lens] = [p.resolve() for p in files]
            frames = select_from_images(lists, intervals=args.intervals, fps=args.fps,
                                        root=args.out.resolve(), cameras=cameras,
                                        show_progress=True)
        import os

        roots = tuple(sorted({os.path.relpath(Path(folder).resolve(), args.out.resolve())
                              for folder in images.values()}))  # the allow-list of --images
        selected = CaptureManifest(tuple(frames), root=tmp, image_roots=roots)
        selected.save(tmp / "capture.json")
        _write_capture_provenance(
            tmp / "capture.json", selected, tool="capture-select/1",
            params={"intervals": args.intervals, "fps": args.fps,
                    "source": "video" if videos else "images",
                    "sources": {lens: str(p) for lens, p in sorted(sources.items())},
                    "cameras": {lens: str(p) for lens, p in
                                sorted(_pairs(args.camera, "--camera").items())}},
            inputs={f"video_{lens}": Path(p) for lens, p in sorted(videos.items())})
    print(f"selected {len(frames)} frames -> {args.out / 'capture.json'}")
    return 0


def _run_capture_reproject(args: argparse.Namespace) -> int:
    from bench.provenance import staged_output_dir
    from bench.recon.capture import CaptureManifest
    from bench.recon.reproject import reproject_capture
    from bench.safety import check_image_size, resolve_inside

    check_image_size(args.size, args.size, what="--size")
    _check_new_file(args.out, args.overwrite, args.manifest)
    manifest = CaptureManifest.load(args.manifest, require_views=False)
    target = resolve_inside(manifest.root, args.views_dir, what="--views-dir",
                            fix="name a folder inside the capture directory")
    sources = {(manifest.root / rel).parent for f in manifest.frames for rel in f.images.values()}
    with staged_output_dir(target, overwrite=args.overwrite, flag="--views-dir",
                           inputs=[args.manifest, *sorted(sources)]) as tmp:
        result = reproject_capture(manifest, views_dir=args.views_dir, image_dir=tmp,
                                   size=args.size, lenses=args.lenses, show_progress=True)
    result.save(args.out)
    _write_capture_provenance(args.out, result, tool="reproject/1",
                              params={"size": args.size, "focal_px": args.size / 2,
                                      "lenses": args.lenses, "views_dir": args.views_dir},
                              inputs={"capture_manifest": args.manifest})
    print(f"wrote {len(result.views)} views ({args.size}x{args.size}) -> {args.out}")
    return 0


def _run_capture_import(args: argparse.Namespace) -> int:
    from bench.recon.capture import CaptureManifest, import_poses
    from bench.scene.camera_files import load_cameras

    _check_new_file(args.out, args.overwrite, args.manifest, inputs=(("--cameras", args.cameras),))
    manifest = CaptureManifest.load(args.manifest)
    posed = import_poses(manifest, load_cameras(args.cameras))
    posed.validate()
    posed.save(args.out)
    camera_inputs = {"cameras": Path(args.cameras)} if Path(args.cameras).is_file() else {}
    _write_capture_provenance(args.out, posed, tool="import-poses/1",
                              params={"cameras": str(args.cameras)},
                              inputs={"capture_manifest": args.manifest, **camera_inputs})
    print(f"posed {len(posed.views)} views and {len(posed.test_views)} test views -> {args.out}")
    return 0


def _run_capture_import_rgbd(args: argparse.Namespace) -> int:
    from bench.recon.rgbd import RgbdImportConfig, import_rgbd_to

    fields = RgbdImportConfig.__dataclass_fields__
    config = RgbdImportConfig(**{f: getattr(args, f) for f in fields})
    info = import_rgbd_to(args.source, args.out, config=config, intrinsics=args.intrinsics,
                          associations=args.associations, overwrite=args.overwrite,
                          show_progress=not args.quiet)
    c = info["counts"]
    print(f"imported {c['frames']} frames ({c['train_frames']} training, {c['test_frames']} "
          f"held-out Test), {c['seed_points']:,} seed points ({c['invalid_depth']:,} invalid, "
          f"{c['misregistered']:,} misregistered depth pixels, {c['sparse_cells']:,} single-view "
          f"and {c['outlier_cells']:,} outlier cells dropped) -> {args.out / 'capture.json'}")
    return 0


# --------------------------------------------------------------------------- bench train
#: TrainConfig fields exposed as ``bench train`` flags; their help (TrainConfig lives in
#: bench/recon/train.py; the help moves into its field metadata once it has its own module).
TRAIN_FLAGS = ("iters", "seed", "backend", "sh_degree", "eval_every", "max_gaussians",
               "random_init_points", "threads", "raster")
TRAIN_FLAG_HELP = {
    "iters": {"help": "optimisation steps (30000 is the paper's count)"},
    "seed": {"help": "random seed"},
    "backend": {"help": "auto = gsplat when CUDA is available, else the CPU trainer "
                "(see --raster)", "choices": ("auto", "cpu", "gsplat")},
    "sh_degree": {"help": "maximum SH degree 0-3"},
    "eval_every": {"help": "steps between held-out evaluations in the log"},
    "max_gaussians": {"help": "CPU backend: stop growing at this many Gaussians"},
    "random_init_points": {"help": "points of the random init used without --init (sized for "
                           "the CPU trainer; gsplat's simple_trainer uses 100000)",
                           "unit": "count"},
    "threads": {"help": "torch CPU threads (fix it for bit-exact reruns)",
                "default_help": "torch's choice"},
    "raster": {"help": "CPU rasterizer: warp (Warp tile kernels with a backward pass) or torch "
               "(the pure-torch reference, ~10x slower)"},
}


def _add_train(subparsers: argparse._SubParsersAction) -> None:
    from bench.cli_fields import add_dataclass_arguments
    from bench.recon.train import TrainConfig

    p = subparsers.add_parser(
        "train",
        help="train a 3DGS background from a capture manifest (gsplat on CUDA, Warp on CPU)",
        description="Train 3D Gaussians on the training views of a capture manifest, optionally "
        "restricted by a coverage plan, and write a scene bundle (background.ply + scene.json), "
        "a training log with held-out PSNR, the resolved config and a provenance manifest.",
    )
    p.add_argument("--manifest", required=True, type=Path,
                   help="capture manifest (capture.json) with training and held-out test views")
    p.add_argument("--plan", type=Path, default=None,
                   help="coverage plan JSON from `bench coverage plan` (default: all views)")
    p.add_argument("--out", required=True, type=Path, help="output scene bundle directory")
    p.add_argument("--init", type=Path, default=None,
                   help="seed PLY: point cloud (x y z [red green blue]) or a 3DGS PLY; "
                   "default: gsplat's random init")
    p.add_argument("--scene", type=Path, default=None,
                   help="existing scene bundle whose registration (world_from_splat), table, "
                   "keepouts and cameras are carried over to the output")
    p.add_argument("--name", default=None, help="scene name (default: the --out folder name)")
    p.add_argument("--no-densify", action="store_true",
                   help="keep the number of Gaussians fixed (no grow / prune / opacity reset)")
    add_dataclass_arguments(p, TrainConfig, only=TRAIN_FLAGS, metadata=TRAIN_FLAG_HELP)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    from bench.errors import BenchError
    from bench.recon.capture import CaptureManifest
    from bench.recon.train import TrainConfig, load_seed, train
    from bench.scene.bundle import read_scene_spec
    from perturbations.coverage import CoveragePlan

    config = TrainConfig(
        iters=args.iters, seed=args.seed, backend=args.backend, sh_degree=args.sh_degree,
        eval_every=args.eval_every, densify=not args.no_densify,
        max_gaussians=args.max_gaussians, random_init_points=args.random_init_points,
        threads=args.threads, raster=args.raster,
    )
    config.validate()
    if args.max_gaussians < 1 or args.random_init_points < 2:
        raise BenchError("--max-gaussians must be >= 1 and --random-init-points >= 2")
    from bench.safety import preflight_output_dir

    inputs = [("--manifest", args.manifest), ("--plan", args.plan), ("--scene", args.scene),
              ("--init", args.init)]
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)
    manifest = CaptureManifest.load(args.manifest)
    preflight_output_dir(args.out, overwrite=args.overwrite,
                         inputs=[("capture root", manifest.root)])
    plan = CoveragePlan.load(args.plan) if args.plan is not None else None
    if plan is not None:
        plan.check_against(manifest.frame_ids, source=f"coverage plan {args.plan}")
    if args.scene is not None:  # fail early, before training, on a bad reference
        reference, _ = read_scene_spec(args.scene)
        if reference.root.resolve() == args.out.resolve():
            raise BenchError("--out must differ from --scene (the reference bundle would be "
                             "replaced); write the trained scene to a new directory")
    init = load_seed(args.init, config=config) if args.init is not None else None
    result = train(manifest, config=config, plan=plan, init=init, show_progress=not args.quiet)
    _write_outputs(args, config, manifest, plan, result)
    last = result.log[-1]
    psnr = "n/a" if last["test_psnr"] is None else f"{last['test_psnr']:.2f} dB"
    print(f"trained {len(result.train_view_ids)} views, {last['num_gaussians']} Gaussians, "
          f"held-out PSNR {psnr} -> {args.out}")
    return 0


def _write_outputs(args, config, manifest, plan, result) -> None:
    import csv
    import io

    from bench.provenance import (
        atomic_write_bytes,
        atomic_write_json,
        make_manifest,
        staged_output_dir,
    )
    from bench.recon.train import config_dict, registered_bundle
    from bench.scene.bundle import write_scene_files

    bundle = registered_bundle(result.splats, name=args.name or args.out.name,
                               reference=args.scene)
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=[("--manifest", args.manifest), ("--plan", args.plan),
                                   ("--scene", args.scene), ("--init", args.init),
                                   ("capture root", manifest.root)]) as tmp:
        written = write_scene_files(bundle, tmp)
        columns = ["step", "train_loss", "test_l1", "test_psnr", "num_gaussians"]
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(columns)
        for row in result.log:
            writer.writerow(["" if row[c] is None else repr(row[c]) for c in columns])
        atomic_write_bytes(tmp / "train_log.csv", text.getvalue().encode())
        atomic_write_json(tmp / "train_log.json", result.log)
        resolved = dict(config_dict(config), backend_used=result.backend,
                        scene_scale=result.scene_scale)
        atomic_write_json(tmp / "train_config.json", resolved)
        inputs = {"capture_manifest": args.manifest}
        if args.plan is not None:
            inputs["coverage_plan"] = args.plan
        if args.init is not None:
            inputs["init"] = args.init
        if args.scene is not None:
            inputs["reference_scene"] = bundle.root / "scene.json"
        outputs = {"background": written["background"], "scene": written["scene"],
                   "train_log": tmp / "train_log.csv", "train_config": tmp / "train_config.json"}
        views_by_id = {v.id: v for v in manifest.views}
        gravity = _capture_gravity(manifest.root)
        if gravity is not None:  # the splats are in the capture's frame: scene init reads it
            inputs["capture_import_manifest"] = manifest.root / "manifest.json"
        provenance = make_manifest(
            tool="train/1",
            params=resolved,
            seed=config.seed,
            inputs=inputs,
            outputs=outputs,
            counts={
                "train_views": len(result.train_view_ids),
                "test_views": len(manifest.test_views),
                "gaussians_initial": result.initial_gaussians,
                "gaussians_final": len(result.splats),
                "iterations": config.iters,
            },
            extra={
                "coverage_mode": None if plan is None else plan.mode,
                "train_view_ids": result.train_view_ids,
                "test_view_ids": [v.id for v in manifest.test_views],
                "final_test_psnr": result.log[-1]["test_psnr"],
                "gravity_down": gravity,  # the capture's sensor gravity, splat frame (or None)
                "images_sha256": {  # digests over (view id, image sha256), in view order
                    "train": manifest.image_digest(
                        [views_by_id[i] for i in result.train_view_ids]),
                    "test": manifest.image_digest(manifest.test_views),
                },
            },
        )
        atomic_write_json(tmp / "train_manifest.json", provenance)


def _capture_gravity(root) -> list[float] | None:
    """The gravity direction an import recorded beside the capture (``manifest.json``).

    ``bench capture import-rgbd`` stores the sensor's gravity (``gravity_down``, unit, in the
    capture's world frame = the trained splats' frame); anything else there yields None.
    """
    import json
    import math

    path = root / "manifest.json"
    try:
        value = json.loads(path.read_text()).get("gravity_down")
    except (OSError, ValueError, AttributeError):
        return None
    if not (isinstance(value, list) and len(value) == 3
            and all(isinstance(v, int | float) and math.isfinite(v) for v in value)):
        return None
    norm = math.sqrt(sum(v * v for v in value))
    return [v / norm for v in value] if norm > 0 else None


def _add_coverage(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "coverage",
        help="coverage-ablation plans: which capture frames a retraining keeps",
        description="Coverage ablations of the YUBI study: full, central-pinhole, contiguous, "
        "random. n_remove = round_half_up(fraction * N) (half-way cases round up, unlike "
        "Python's round()).",
    )
    inner = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    plan = inner.add_parser("plan", help="write a coverage plan JSON for a capture manifest",
                            description="Write a deterministic coverage plan (kept / removed "
                            "frame ids in time order, with a provenance manifest).")
    plan.add_argument("--manifest", required=True, type=Path,
                      help="capture manifest (capture.json)")
    plan.add_argument("--mode", required=True,
                      help="plan: full | central-pinhole | contiguous | random")
    plan.add_argument("--fraction", type=float, default=0.3,
                      help="fraction of frames removed by contiguous/random, in [0, 1) "
                      "(default 0.3)")
    plan.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    plan.add_argument("--out", required=True, type=Path, help="output plan JSON file")
    plan.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    plan.set_defaults(func=_run_coverage_plan)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _run_coverage_plan(args: argparse.Namespace) -> int:
    from bench.errors import BenchError
    from bench.provenance import atomic_write_json, sha256_file
    from bench.recon.capture import CaptureManifest
    from bench.safety import check_output_file
    from perturbations.coverage import make_plan

    if args.seed < 0:
        raise BenchError(f"--seed must be a non-negative integer, got {args.seed}")
    check_output_file(args.out, overwrite=args.overwrite, inputs=[("--manifest", args.manifest)])
    manifest = CaptureManifest.load(args.manifest)
    plan = make_plan(manifest.frames, args.mode, fraction=args.fraction, seed=args.seed)
    data = plan.to_dict()
    data["inputs"] = {"capture_manifest": {"path": args.manifest.name,
                                           "sha256": sha256_file(args.manifest)}}
    atomic_write_json(args.out, data)
    print(f"{plan.mode}: kept {len(plan.kept)} of {len(plan.frames)} frames "
          f"({plan.views} views) -> {args.out}")
    return 0
