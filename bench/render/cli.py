"""``bench render`` and ``bench cameras convert`` (stdlib-only imports at module level).

``bench render --scene SCENE_DIR --cameras CAMS --out DIR`` writes, per view ``i``:

- ``rgb/{i:04d}_{name}.png``: 8-bit sRGB-agnostic colour (values clipped to [0, 1]);
- ``depth/{i:04d}_{name}.npy``: float32 expected depth in metres (inf where empty;
  pinhole: camera z, fisheye: distance along the ray);
- ``depth/{i:04d}_{name}.png``: 16-bit depth in millimetres (0 = no depth,
  saturates at 65535 mm);
- ``alpha/{i:04d}_{name}.png``: 8-bit accumulated opacity (0 outside a fisheye's
  image circle);

plus ``cameras.json`` (the cameras as rendered, after any size override, in the
world frame and saying so: ``"frame": "world"``; a camera file that declares
``"splat"`` is moved into the world frame with the bundle's ``world_from_splat``, and
one without the key is read as world) and
``manifest.json`` (tool ``render/1``, parameters, input/output sha256). The
output directory is staged and renamed into place, so a failure leaves nothing.
"""

from __future__ import annotations

import argparse
import re
import sys

TOOL = "render/1"
DEPTH_PNG_SCALE = 1000.0  # 16-bit depth PNG units per metre (millimetres)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench render`` and ``bench cameras``."""
    from bench.render import BACKENDS, FISHEYE_MODES  # choices from the backend registry
    p = subparsers.add_parser(
        "render", help="render a scene's Gaussians from cameras to PNG + depth",
        description="Render the background Gaussians of a scene bundle from a camera file "
        "(JSON list, COLMAP model dir, or nerfstudio transforms.json).")
    p.add_argument("--scene", required=True, metavar="SCENE_DIR", help="scene bundle directory")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--cameras", metavar="CAMS",
                     help="camera file: .json list, COLMAP model directory, or transforms.json")
    src.add_argument("--role", help="camera role of the scene bundle (e.g. test, obs_probe)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    p.add_argument("--backend", default="auto", choices=["auto", *BACKENDS.names()],
                   help="rasterizer (auto = gsplat with CUDA, else cpu)")
    p.add_argument("--fisheye-mode", default="direct", choices=FISHEYE_MODES,
                   help="how fisheye cameras are rendered")
    p.add_argument("--width", type=int, help="override image width in pixels (intrinsics scaled)")
    p.add_argument("--height", type=int,
                   help="override image height in pixels (intrinsics scaled); with only one of "
                   "--width/--height the other keeps the aspect ratio")
    p.add_argument("--background", default="0,0,0", metavar="R,G,B",
                   help="background colour, three values in [0, 1]")
    p.add_argument("--sh-degree", type=int,
                   help="active SH degree, 0-3 [default: every stored band]")
    p.add_argument("--lod-pixels", type=float, metavar="PX",
                   help="opt-in level of detail (cpu backend, approximate): Gaussians merged "
                        "into tree nodes whose standard deviation projects to at most PX "
                        "pixels; recorded in the manifest (default: off, exact)")
    p.add_argument("--lod-colour-tolerance", type=float, metavar="STD",
                   help="with --lod-pixels: rgb std of a node's members beyond which it "
                        "counts as bigger [default: 0.05]")
    p.add_argument("--lod-merged-sh-degree", type=int, metavar="D",
                   help="with --lod-pixels: SH degree of merged nodes' colour (0 = their "
                        "mean colour) [default: the originals' bands]")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=run_render)

    cams = subparsers.add_parser("cameras", help="camera file utilities",
                                 description="Camera file utilities.")
    inner = cams.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    conv = inner.add_parser(
        "convert", help="convert between JSON, COLMAP (text/binary) and transforms.json",
        description="Read a camera file in any supported format and write it in another. "
        "Lens distortion is kept: COLMAP SIMPLE_RADIAL / RADIAL / OPENCV / FULL_OPENCV / "
        "OPENCV_FISHEYE (+ SIMPLE_RADIAL_FISHEYE / RADIAL_FISHEYE, written as OPENCV_FISHEYE) "
        "and transforms.json k1 k2 k3 p1 p2 (OPENCV) or k1..k4 (OPENCV_FISHEYE); a target "
        "that cannot hold a camera's model (transforms.json for FULL_OPENCV k4..k6) is "
        "refused.")
    conv.add_argument("src", help="input: .json list, COLMAP model dir, or transforms.json")
    conv.add_argument("dst", help="output file (.json / transforms.json) or COLMAP directory")
    conv.add_argument("--format", choices=["json", "colmap-text", "colmap-binary", "transforms"],
                      help="output format [default: from the destination name: transforms.json, "
                      "*.json, or a directory without suffix = colmap-text]")
    conv.add_argument("--overwrite", action="store_true", help="replace an existing destination")
    conv.set_defaults(func=run_convert)


def parse_background(text: str) -> tuple[float, float, float]:
    """``--background R,G,B`` (three numbers in [0, 1]), shared with ``bench score``."""
    from bench.errors import BenchError

    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or not all(0.0 <= v <= 1.0 for v in values):
        raise BenchError(f"--background {text!r} must be three comma-separated values in [0, 1], "
                         "e.g. 0,0,0 or 1,1,1")
    return values  # type: ignore[return-value]


def _override_size(cam, width: int | None, height: int | None):
    from bench.errors import BenchError
    from bench.safety import check_image_size

    if width is None and height is None:
        return cam
    if (width is not None and width <= 0) or (height is not None and height <= 0):
        raise BenchError(f"--width/--height must be positive pixel counts (got {width}, {height})")
    if height is None:
        height = max(1, round(cam.height * width / cam.width))
    if width is None:
        width = max(1, round(cam.width * height / cam.height))
    check_image_size(height, width, what="--height x --width")
    return cam.resized(width, height)


def _file_stem(index: int, name: str) -> str:
    from pathlib import PurePosixPath

    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", PurePosixPath(name.replace("\\", "/")).stem)
    return f"{index:04d}_{stem.strip('._') or 'view'}"


def _png_bytes(image) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".png", image)
    if not ok:  # pragma: no cover - cv2 failure is not expected for uint8/uint16 arrays
        raise RuntimeError("PNG encoding failed")
    return buf.tobytes()


def write_view(out_dir, stem: str, output) -> dict[str, str]:
    """Write one RenderOutput's files under ``out_dir``; returns name -> relative path."""
    import io

    import numpy as np

    rgb8 = np.round(np.clip(output.rgb, 0.0, 1.0) * 255.0).astype(np.uint8)
    depth_mm = np.where(np.isfinite(output.depth), output.depth * DEPTH_PNG_SCALE, 0.0)
    depth16 = np.round(np.clip(depth_mm, 0.0, 65535.0)).astype(np.uint16)
    alpha8 = np.round(np.clip(output.alpha, 0.0, 1.0) * 255.0).astype(np.uint8)
    files = {
        f"rgb/{stem}.png": _png_bytes(rgb8[..., ::-1]),  # cv2 expects BGR
        f"depth/{stem}.png": _png_bytes(depth16),
        f"alpha/{stem}.png": _png_bytes(alpha8),
    }
    buf = io.BytesIO()
    np.save(buf, output.depth.astype(np.float32), allow_pickle=False)
    files[f"depth/{stem}.npy"] = buf.getvalue()
    for rel, data in files.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return {rel.split("/")[0] + ("_npy" if rel.endswith(".npy") else ""): rel for rel in files}


def run_render(args: argparse.Namespace) -> int:
    """Handler of ``bench render``."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.progress import progress as progress_bar
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.render import render, resolve_backend
    from bench.safety import check_image_size, preflight_output_dir
    from bench.scene.bundle import SCENE_FILE, load_scene
    from bench.scene.camera_files import WORLD, load_camera_file, save_cameras

    background = parse_background(args.background)
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=[("--scene", args.scene),
                                                                ("--cameras", args.cameras)])
    bundle = load_scene(args.scene, keep_splat_frame=False)  # rendering never writes it back
    # Extra PLY properties (normals, labels) are not drawn: free them before the upload.
    bundle = bundle.replace(background=bundle.background.replace(extra={}))
    if args.role is not None:
        if args.role not in bundle.cameras:
            raise BenchError(f"scene {bundle.name!r} has no camera role {args.role!r}; "
                             f"roles: {sorted(bundle.cameras) or 'none'} (or pass --cameras)")
        cam_path = Path(bundle.root) / bundle.cameras[args.role]
    else:
        cam_path = Path(args.cameras)
    # the background is drawn in the world frame: cameras too (no key = world, as always)
    world = load_camera_file(cam_path, default_frame=WORLD).in_frame(WORLD,
                                                                     bundle.world_from_splat)
    cameras = [_override_size(c, args.width, args.height) for c in world]
    if not cameras:
        raise BenchError(f"camera file {cam_path} holds no cameras; add at least one")
    for cam in cameras:
        check_image_size(cam.height, cam.width, what=f"camera {cam.name!r} of {cam_path}")
    backend = resolve_backend(args.backend)
    lod = None
    for flag in ("lod_colour_tolerance", "lod_merged_sh_degree"):
        if getattr(args, flag) is not None and args.lod_pixels is None:
            name = "--" + flag.replace("_", "-")
            raise BenchError(f"{name} only applies to level of detail; add --lod-pixels PX "
                             f"or drop {name}")
    if args.lod_pixels is not None:
        from bench.render.lod import LodConfig

        if backend != "cpu":
            raise BenchError(f"--lod-pixels renders on the cpu backend only (got {backend}); "
                             "add --backend cpu or drop --lod-pixels")
        try:
            given = {"colour_tolerance": args.lod_colour_tolerance,
                     "merged_sh_degree": args.lod_merged_sh_degree}
            lod = LodConfig(pixel_size=args.lod_pixels,
                            **{k: v for k, v in given.items() if v is not None})
        except ValueError as exc:
            raise BenchError(f"{exc}; pass e.g. --lod-pixels 0.5 --lod-colour-tolerance 0.05"
                             ) from None
    inputs = {"scene_json": Path(bundle.root) / SCENE_FILE}
    background_file = Path(bundle.root) / "background.ply"
    if background_file.exists():
        inputs["background"] = background_file
    if cam_path.is_file():
        inputs["cameras"] = cam_path
    with staged_output_dir(args.out, overwrite=args.overwrite,
                           inputs=[("--scene", args.scene), ("cameras", cam_path)]) as tmp:
        outputs = {}
        for i, cam in enumerate(progress_bar(cameras, desc="render", unit="view", file=sys.stderr)):
            out = render(bundle.background, cam, backend=backend, background=background,
                         sh_degree=args.sh_degree, fisheye_mode=args.fisheye_mode, lod=lod)
            stem = _file_stem(i, cam.name)
            for kind, rel in write_view(tmp, stem, out).items():
                outputs[f"{kind}:{stem}"] = tmp / rel
        save_cameras(tmp / "cameras.json", cameras, frame=WORLD)
        outputs["cameras"] = tmp / "cameras.json"
        manifest = make_manifest(
            tool=TOOL,
            params={"backend": backend, "requested_backend": args.backend,
                    "fisheye_mode": args.fisheye_mode, "width": args.width,
                    "height": args.height, "background": background,
                    "sh_degree": args.sh_degree, "scene": bundle.name,
                    "depth_png_units_per_metre": DEPTH_PNG_SCALE,
                    "lod": None if lod is None else lod.to_json()},
            seed=None, inputs=inputs, outputs=outputs,
            counts={"views": len(cameras), "gaussians": bundle.background.num},
            extra={"files": {k: str(Path(v).relative_to(tmp)) for k, v in outputs.items()}},
        )
        atomic_write_json(tmp / "manifest.json", manifest)
    print(f"rendered {len(cameras)} view(s) with backend {backend} -> {args.out}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    """Handler of ``bench cameras convert``."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import check_output_path
    from bench.scene.camera_files import load_cameras, save_cameras

    dst = Path(args.dst)
    check_output_path(dst, inputs=[args.src], flag="DST")
    if dst.exists() and not args.overwrite and (dst.is_file() or any(dst.iterdir())):
        raise BenchError(f"{dst} exists; pass --overwrite or choose another destination")
    cameras = load_cameras(args.src, keep_distortion=True)  # written wherever the target holds it
    save_cameras(dst, cameras, format=args.format)
    print(f"converted {len(cameras)} camera(s): {args.src} -> {args.dst}")
    written = args.format or ("colmap-text" if dst.suffix == "" else "json")
    if written.startswith("colmap") and any(c.fov_deg is not None for c in cameras):
        print("bench cameras convert: note: COLMAP has no field for the fisheye fov_deg; the "
              "lens limit is dropped (the valid image circle then follows the distortion "
              "polynomial); keep a .json or transforms.json copy to preserve it", file=sys.stderr)
    return 0
