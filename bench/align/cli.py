"""``bench align color|pose``: make a reconstruction match the camera's colours / the robot model.

``bench align color --scene DIR --cameras CAMS --captures DIR --out DIR``
    renders the scene's background at each camera, pairs every rendered pixel with the
    captured image ``<captures>/<camera name>.png`` (same size), fits the degree-2 per-channel
    polynomial by IRLS/Tukey (:mod:`bench.align.color`), applies it to the splats' SH DC and
    writes ``scene/`` (the aligned bundle), ``color_fit.json`` (coefficients, residuals,
    inlier share per channel) and ``manifest.json``.

``bench align pose --splats PLY --links LINKS.json --out DIR``
    aligns the Gaussian centres to points sampled from the link meshes (RANSAC + ICP,
    :mod:`bench.align.pose`) and writes ``aligned.ply`` (the Gaussians in the model frame),
    ``labels.csv`` (Gaussian index, link), ``alignment.json`` (transform, RMSE, per-link counts)
    and ``manifest.json``. ``LINKS.json``: ``{"links": {"<name>": "<mesh file>", ...}}`` with
    mesh paths relative to the JSON file (any format trimesh reads); ``--mesh FILE`` aligns to
    one mesh.

Stdlib-only imports at module level.
"""

from __future__ import annotations

import argparse

TOOL_COLOR = "align-color/1"
TOOL_POSE = "align-pose/1"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench align``."""
    p = subparsers.add_parser("align", help="colour and positional alignment of a reconstruction")
    sub = p.add_subparsers(dest="align_command", required=True)
    c = sub.add_parser("color", help="fit splat colours to captured camera colours (SH DC)",
                       description="Degree-2 per-channel polynomial, IRLS with Tukey bi-weight, "
                       "pixels weighted by their captured RGB norm (real2sim-eval III-C3).")
    c.add_argument("--scene", required=True, help="scene bundle directory")
    c.add_argument("--cameras", required=True, help="camera file of the capture viewpoints")
    c.add_argument("--captures", required=True,
                   help="folder with <camera name>.png per camera (8-bit RGB, camera size)")
    c.add_argument("--degree", type=int, default=2, help="polynomial degree")
    c.add_argument("--iterations", type=int, default=50, help="IRLS iterations")
    c.add_argument("--backend", default="auto", help="render backend")
    c.add_argument("--out", required=True, help="output directory")
    c.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    c.set_defaults(func=run_color)
    q = sub.add_parser("pose", help="ICP + RANSAC alignment of Gaussians to a robot/object model",
                       description="Gaussian centres vs points sampled from each link mesh "
                       "(--per-link each), per-link segmentation (real2sim-eval III-C2).")
    q.add_argument("--splats", required=True, help="PLY of the robot/object Gaussians")
    group = q.add_mutually_exclusive_group(required=True)
    group.add_argument("--links", help='JSON {"links": {name: mesh path}}')
    group.add_argument("--mesh", help="one mesh file (a single-link model)")
    q.add_argument("--per-link", type=int, default=2000,
                   help="points sampled per link (count)")
    q.add_argument("--seed", type=int, default=0, help="sampling and RANSAC seed")
    q.add_argument("--inlier-distance", type=float, default=0.01,
                   help="RANSAC inlier distance, metres")
    q.add_argument("--out", required=True, help="output directory")
    q.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    q.set_defaults(func=run_pose)


def _read_png(path) -> object:  # -> [H, W, 3] float64 in [0, 1]
    import cv2
    import numpy as np

    from bench.errors import BenchError

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise BenchError(f"cannot read captured image {path}; give an 8-bit RGB PNG per camera")
    return image[..., ::-1].astype(np.float64) / 255.0


def run_color(args: argparse.Namespace) -> int:
    """Handler of ``bench align color``."""
    from bench.safety import preflight_output_dir

    inputs = [("--scene", args.scene), ("--cameras", args.cameras),
              ("--captures", args.captures)]
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)  # before work
    from pathlib import Path

    import numpy as np

    from bench.align.color import align_splat_colors, fit_color_polynomial
    from bench.errors import BenchError
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.render import render
    from bench.scene.bundle import SCENE_FILE, load_scene, write_scene_files
    from bench.scene.camera_files import WORLD, load_camera_file

    if args.degree < 1 or args.iterations < 1:
        raise BenchError("--degree and --iterations must be >= 1")
    scene = load_scene(args.scene)
    # rendered from the world-frame background: a file without "frame" is world
    cameras = load_camera_file(args.cameras, default_frame=WORLD).in_frame(
        WORLD, scene.world_from_splat)
    captures = Path(args.captures)
    rendered, captured, inputs = [], [], {SCENE_FILE: Path(args.scene) / SCENE_FILE}
    for camera in cameras:
        path = captures / f"{camera.name}.png"
        if not path.is_file():
            raise BenchError(f"no capture {path} for camera {camera.name!r}; "
                             "name each capture <camera name>.png")
        image = _read_png(path)
        if image.shape[:2] != (camera.height, camera.width):
            raise BenchError(f"capture {path} is {image.shape[1]}x{image.shape[0]}, camera "
                             f"{camera.name!r} is {camera.width}x{camera.height}; resize it")
        out = render(scene.background, camera, backend=args.backend)
        covered = out.alpha > 0.5
        rendered.append(np.clip(out.rgb, 0, 1)[covered])
        captured.append(image[covered])
        inputs[f"captures/{path.name}"] = path
    try:
        fit = fit_color_polynomial(np.concatenate(rendered), np.concatenate(captured),
                                   degree=args.degree, iterations=args.iterations)
    except ValueError as exc:
        raise BenchError(f"{exc}; check that the cameras see the scene") from None
    aligned = scene.replace(background=align_splat_colors(scene.background, fit), stored=None)
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=inputs) as tmp:
        written = write_scene_files(aligned, tmp / "scene")
        atomic_write_json(tmp / "color_fit.json", fit.to_dict())
        outputs = {f"scene/{p.relative_to(tmp / 'scene')}": p for p in written.values()}
        outputs["color_fit.json"] = tmp / "color_fit.json"
        manifest = make_manifest(
            tool=TOOL_COLOR, params={"degree": args.degree, "iterations": args.iterations,
                                     "backend": args.backend, "cameras": len(cameras)},
            seed=None, inputs=inputs, outputs=outputs,
            counts={"pixels": int(sum(len(r) for r in rendered)),
                    "gaussians": len(scene.background)},
            extra={"fit": fit.to_dict()})
        atomic_write_json(tmp / "manifest.json", manifest)
    rms = ", ".join(f"{v:.4f}" for v in fit.residual_rms)
    print(f"colour fit on {sum(len(r) for r in rendered)} pixels, residual RMS (R, G, B) {rms} "
          f"-> {args.out}")
    return 0


def _load_meshes(args: argparse.Namespace) -> tuple[dict, dict]:
    import json
    from pathlib import Path

    import trimesh

    from bench.errors import BenchError

    def load(path: Path):
        if not path.is_file():
            raise BenchError(f"mesh file {path} not found; fix the path")
        try:
            mesh = trimesh.load(path, force="mesh")
        except Exception as exc:  # trimesh raises many types for unreadable files
            raise BenchError(f"cannot read mesh {path} ({exc}); give an OBJ/STL/PLY") from None
        if len(mesh.faces) == 0:
            raise BenchError(f"mesh {path} has no faces; give a surface mesh")
        return mesh

    if args.mesh:
        path = Path(args.mesh)
        return {path.stem: load(path)}, {path.name: path}
    spec_path = Path(args.links)
    try:
        links = json.loads(spec_path.read_text())["links"]
        assert isinstance(links, dict) and links
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise BenchError(f'{spec_path} must be JSON {{"links": {{name: mesh path}}}}') from None
    meshes = {name: load(spec_path.parent / rel) for name, rel in links.items()}
    inputs = {spec_path.name: spec_path}
    inputs.update({f"links/{name}": spec_path.parent / rel for name, rel in links.items()})
    return meshes, inputs


def run_pose(args: argparse.Namespace) -> int:
    """Handler of ``bench align pose``."""
    from bench.safety import check_count, check_real, preflight_output_dir

    check_count(args.per_link, what="--per-link", low=10, high=1_000_000,
                fix="sample 10 to 1,000,000 points per link (default 2000)")
    check_real(args.inlier_distance, what="--inlier-distance", low=0.0, low_open=True,
               fix="give the RANSAC inlier distance in metres (default 0.01)")
    inputs = [("--splats", args.splats), ("--mesh", args.mesh), ("--links", args.links)]
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)  # before work
    import csv
    import io
    from pathlib import Path

    from bench.align.pose import align_pose
    from bench.errors import BenchError
    from bench.provenance import (
        atomic_write_bytes,
        atomic_write_json,
        make_manifest,
        staged_output_dir,
    )
    from bench.scene.ply import read_gaussians, write_ply
    from bench.scene.transforms import transform_splats

    splats = read_gaussians(args.splats)
    meshes, inputs = _load_meshes(args)
    inputs[Path(args.splats).name] = Path(args.splats)
    try:
        result = align_pose(splats.means, meshes, per_link=args.per_link, seed=args.seed,
                            inlier_distance=args.inlier_distance)
    except ValueError as exc:
        raise BenchError(f"{exc}; give the robot/object Gaussians (crop the scene first)") from None
    aligned = transform_splats(splats, result.transform)
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=inputs) as tmp:
        write_ply(tmp / "aligned.ply", aligned)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["gaussian", "link"])
        writer.writerows((i, result.link_names[k]) for i, k in enumerate(result.labels))
        atomic_write_bytes(tmp / "labels.csv", buffer.getvalue().encode("utf-8"))
        atomic_write_json(tmp / "alignment.json", result.to_dict())
        outputs = {name: tmp / name for name in ("aligned.ply", "labels.csv", "alignment.json")}
        manifest = make_manifest(
            tool=TOOL_POSE, params={"per_link": args.per_link, "seed": args.seed,
                                    "inlier_distance": args.inlier_distance,
                                    "links": result.link_names},
            seed=args.seed, inputs=inputs, outputs=outputs,
            counts={"gaussians": len(splats), "links": len(result.link_names)},
            extra={"alignment": result.to_dict()})
        atomic_write_json(tmp / "manifest.json", manifest)
    print(f"aligned {len(splats)} Gaussians to {len(meshes)} link(s), ICP RMSE "
          f"{result.icp.rmse * 1000:.2f} mm -> {args.out}")
    return 0
