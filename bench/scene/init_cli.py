"""``bench scene init | edit | crop``: bring your own scan (stdlib-only imports at module level).

- ``init``: a raw ``.ply`` / ``.compressed.ply`` / ``.splat`` / ``.spz`` scan -> a registered
  scene bundle (table found, gravity, metric scale, Test + OBS-Probe cameras, previews).
- ``edit``: adjust the table, keepouts and registration of a bundle; previews re-rendered.
- ``crop``: remove the Gaussians of physical task objects (boxes or the keepouts).

Registered from :mod:`bench.scene.cli` with :func:`add_parsers`.
"""

from __future__ import annotations

import argparse
import re
import sys

INIT_TOOL = "scene-init/1"
EDIT_TOOL = "scene-edit/1"
CROP_TOOL = "scene-crop/1"
PREVIEW_HELP = "do not render previews/ (faster; nothing to check the fit with)"


def _vector(text: str, count: int = 3):
    values = [v for v in text.replace(",", " ").split() if v]
    try:
        out = tuple(float(v) for v in values)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {count} comma-separated numbers, "
                                         f"got {text!r}") from None
    if len(out) != count:
        raise argparse.ArgumentTypeError(f"expected {count} comma-separated numbers, got {text!r}")
    return out


def _point(text: str):
    return _vector(text, 3)


def add_parsers(inner: argparse._SubParsersAction) -> None:
    """Register ``init``, ``edit`` and ``crop`` under ``bench scene``."""
    init = inner.add_parser(
        "init", help="register a raw scan (.ply/.compressed.ply/.splat/.spz) as a scene bundle",
        description="Find the table in a raw 3DGS scan (RANSAC on opacity-weighted Gaussian "
        "centres, least-squares plane, minimum-area rectangle), set gravity, metric scale and "
        "table axes (world: metres, +z up, table top at z = --table-height, table long side "
        "along +x), write Test/OBS-Probe cameras and previews. Points (P, X,Y,Z) are in the "
        "scan's own coordinates (read them off SuperSplat or a viewer).")
    init.add_argument("--splat", required=True, metavar="SCAN",
                      help=".ply (3DGS layout), .compressed.ply (SuperSplat), .splat or .spz")
    init.add_argument("--out", required=True, metavar="BUNDLE", help="output bundle directory")
    init.add_argument("--name", help="scene name [default: the output folder's name]")
    init.add_argument("--table-size", nargs=2, type=float, metavar=("W", "D"),
                      help="the real table top's side lengths in metres (sets the metric scale "
                      "and table.size)")
    init.add_argument("--known-distance", nargs=3, metavar=("P1", "P2", "METRES"),
                      help="two scan points X,Y,Z and their real distance in metres (sets the "
                      "metric scale)")
    init.add_argument("--metric", action="store_true",
                      help="the scan is in metres already (trained from metric poses: an RGB-D "
                      "or LiDAR capture, `bench capture import-rgbd`); scale 1 without a warning")
    init.add_argument("--up", type=_point, metavar="X,Y,Z",
                      help="the scan's up direction (skips gravity inference; planes within "
                      "15 deg of it only)")
    init.add_argument("--table-center", type=_point, metavar="X,Y,Z",
                      help="a point on the table top in scan coordinates (picks that plane and "
                      "centres the footprint there)")
    init.add_argument("--table-yaw", type=float, metavar="DEG",
                      help="direction of the table's long side, degrees in the table plane from "
                      "the scan's +x axis projected into it (instead of the fitted rectangle's)")
    init.add_argument("--table-height", type=float, default=0.0, metavar="M",
                      help="world z of the table top in metres (YUBI: 0)")
    init.add_argument("--world-from-splat", metavar="FILE",
                      help="a JSON 4x4 similarity (or a scene.json) to use as the registration; "
                      "only the table is fitted (up = +z)")
    init.add_argument("--keepout", nargs=6, type=float, action="append", default=[],
                      metavar=("CX", "CY", "CZ", "SX", "SY", "SZ"),
                      help="a keepout box (world metres: centre, full size); repeatable")
    init.add_argument("--seed", type=int, default=0, help="seed of the RANSAC draws")
    init.add_argument("--min-contrast", type=float, default=5.0, metavar="C",
                      help="flatness a table patch needs: its mass over the slabs beside it "
                      "[5; a trained real RGB-D capture's table, a band of Gaussians a few cm "
                      "thick, scores ~2; slices through volumes score <= 1.4]")
    init.add_argument("--drop-nonfinite", action="store_true",
                      help="drop Gaussians with NaN/Inf values instead of failing")
    init.add_argument("--no-previews", action="store_true", help=PREVIEW_HELP)
    init.add_argument("--backend", default="cpu", help="render backend of the previews [cpu]")
    init.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    init.set_defaults(func=run_init)
    # points like -0.3,0.2,0.5 are values, not options (argparse only knows plain -1.5)
    init._negative_number_matcher = re.compile(r"^-\.?\d")

    edit = inner.add_parser(
        "edit", help="adjust table, keepouts and registration of a bundle (re-renders previews)",
        description="Edit a scene bundle in place (or into --out). Registration edits (--rotate-z, "
        "--translate, --scale) move the scene and carry the table and keepouts with it; "
        "--world-from-splat replaces the registration and re-fits the table; table and keepout "
        "flags then set values in world metres. Bundles made by `bench scene init` get their "
        "cameras regenerated around the new table.")
    edit.add_argument("bundle", metavar="BUNDLE", help="scene bundle directory")
    edit.add_argument("--out", help="write the edited bundle here instead of in place")
    edit.add_argument("--rotate-z", type=float, metavar="DEG",
                      help="turn the scene about world +z through the origin (degrees)")
    edit.add_argument("--translate", nargs=3, type=float, metavar=("DX", "DY", "DZ"),
                      help="shift the scene in world metres")
    edit.add_argument("--scale", type=float, metavar="S",
                      help="multiply the metric scale by S about the origin (e.g. 1.02)")
    edit.add_argument("--world-from-splat", metavar="FILE",
                      help="replace the registration (JSON 4x4 or scene.json) and re-fit the table")
    edit.add_argument("--table-center", nargs=2, type=float, metavar=("X", "Y"),
                      help="table footprint centre, world metres")
    edit.add_argument("--table-size", nargs=2, type=float, metavar=("SX", "SY"),
                      help="table side lengths along its own x/y, metres")
    edit.add_argument("--table-yaw", type=float, metavar="DEG", help="table yaw about +z, degrees")
    edit.add_argument("--table-height", type=float, metavar="Z", help="table top z, metres")
    edit.add_argument("--keepout", nargs=6, type=float, action="append", default=[],
                      metavar=("CX", "CY", "CZ", "SX", "SY", "SZ"),
                      help="add a keepout box (world metres); repeatable")
    edit.add_argument("--remove-keepout", type=int, action="append", default=[], metavar="I",
                      help="remove keepout number I (0-based, as `bench scene info` lists them)")
    edit.add_argument("--clear-keepouts", action="store_true", help="remove every keepout box")
    edit.add_argument("--seed", type=int, default=0, help="seed of a table re-fit")
    edit.add_argument("--no-previews", action="store_true", help=PREVIEW_HELP)
    edit.add_argument("--backend", default="cpu", help="render backend of the previews [cpu]")
    edit.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    edit.set_defaults(func=run_edit)

    crop = inner.add_parser(
        "crop", help="remove the Gaussians of physical task objects (boxes or keepouts)",
        description="Remove background Gaussians whose centres lie inside world boxes, so task "
        "objects the simulator replaces with meshes are not doubled. Writes a new bundle.")
    crop.add_argument("bundle", metavar="BUNDLE", help="scene bundle directory")
    crop.add_argument("--out", required=True, help="output bundle directory")
    which = crop.add_mutually_exclusive_group(required=True)
    which.add_argument("--box", nargs=6, type=float, action="append",
                       metavar=("CX", "CY", "CZ", "SX", "SY", "SZ"),
                       help="a world box (centre, full size, metres); repeatable")
    which.add_argument("--keepouts", action="store_true", help="use the bundle's keepout boxes")
    crop.add_argument("--margin", type=float, default=0.0, metavar="M",
                      help="grow every box by M metres on each side")
    crop.add_argument("--no-previews", action="store_true", help=PREVIEW_HELP)
    crop.add_argument("--backend", default="cpu", help="render backend of the previews [cpu]")
    crop.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    crop.set_defaults(func=run_crop)


# --------------------------------------------------------------------------- init
def run_init(args: argparse.Namespace) -> int:
    """Handler of ``bench scene init``: register a raw scan as a scene bundle."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import preflight_output_dir
    from bench.scene.ops import build_init_bundle, write_bundle
    from bench.scene.register import RegisterConfig, ScaleSpec

    if args.seed < 0:
        raise BenchError(f"--seed must be a non-negative integer, got {args.seed}")
    if not 0 < args.min_contrast < 1e6:
        raise BenchError(f"--min-contrast must be a positive ratio, got {args.min_contrast}")
    inputs = (("--splat", args.splat), ("--world-from-splat", args.world_from_splat))
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)  # before the fit
    known = None
    if args.known_distance:
        try:
            p1, p2 = (_point(v) for v in args.known_distance[:2])
            metres = float(args.known_distance[2])
        except (argparse.ArgumentTypeError, ValueError):
            raise BenchError("--known-distance takes P1 P2 METRES with P as X,Y,Z, e.g. "
                             "--known-distance 0,0,0 1.2,0,0 0.6") from None
        known = (p1, p2, metres)
    up, gravity_file = args.up, None
    if up is None and args.world_from_splat is None:  # --up overrides the recorded gravity
        up, gravity_file = recorded_gravity_up(Path(args.splat))
    scale = ScaleSpec(table_size=tuple(args.table_size) if args.table_size else None,
                      known_distance=known, metric=args.metric)
    result = build_init_bundle(
        Path(args.splat), name=args.name or Path(args.out).name,
        cfg=RegisterConfig(seed=args.seed, min_contrast=args.min_contrast),
        scale=scale, up=up, table_center=args.table_center, table_yaw_deg=args.table_yaw,
        table_height=args.table_height, world_from_splat_file=args.world_from_splat,
        keepouts=args.keepout, drop_nonfinite=args.drop_nonfinite,
        previews=not args.no_previews, backend=args.backend)
    if gravity_file is not None:  # recorded, not hand-given: said so in the manifests
        from bench.scene.ops import _hash_inputs

        result.params["up_source"] = f"capture gravity ({gravity_file.name})"
        result.inputs.update(_hash_inputs({"capture_gravity": gravity_file}))
        for record in (result.bundle.extra_json["registration"], result.extra["registration"]):
            record["gravity_rule"] = "capture gravity"
    write_bundle(result, args.out, overwrite=args.overwrite, inputs=inputs)
    reg = result.registration
    t = reg.table
    print(f"wrote {args.out}: {len(result.bundle.background):,} Gaussians ({result.fmt}), table "
          f"{t.size[0]:.3f} x {t.size[1]:.3f} m at z {t.height:.3f}, scale {reg.scale:.6g} "
          f"({reg.scale_source}), "
          + ("up: from capture gravity" if gravity_file is not None
             else f"up rule {reg.fit.gravity_rule}")
          + ("" if args.no_previews else f"; check {args.out}/previews/top.png"),
          file=sys.stderr)
    return 0


def recorded_gravity_up(scan):  # Path -> (tuple[3] | None, Path | None)
    """Up = minus the sensor gravity ``bench train`` recorded beside the scan, if any.

    ``train_manifest.json`` next to the scan carries ``gravity_down`` when the capture was
    imported from an RGB-D sequence with an accelerometer (sensor data in the scan's own
    frame, not hand-given geometry); ``--up`` overrides it.
    """
    import json
    import math

    path = scan.parent / "train_manifest.json"
    try:
        value = json.loads(path.read_text()).get("gravity_down")
    except (OSError, ValueError, AttributeError):
        return None, None
    if not (isinstance(value, list) and len(value) == 3
            and all(isinstance(v, int | float) and math.isfinite(v) for v in value)
            and any(value)):
        return None, None
    return tuple(-float(v) for v in value), path


# --------------------------------------------------------------------------- edit
def _check_edit_numbers(args: argparse.Namespace) -> None:
    """Refuse non-finite or absurd edit values before they are computed with (issue 30)."""
    from bench.safety import (
        MAX_EDIT_SCALE,
        MAX_WORLD_METRES,
        MIN_EDIT_SCALE,
        check_real,
    )

    if args.scale is not None:
        check_real(args.scale, what="--scale", low=MIN_EDIT_SCALE, high=MAX_EDIT_SCALE,
                   fix="give the factor the metric scale is off by (e.g. 1.02; 0.001 for "
                   "millimetres to metres)")
    if args.rotate_z is not None:
        check_real(args.rotate_z, what="--rotate-z", low=-360.0, high=360.0,
                   fix="give an angle in degrees within one turn")
    metres = [("--translate", v) for v in args.translate or ()]
    metres += [("--table-center", v) for v in args.table_center or ()]
    metres += [("--table-size", v) for v in args.table_size or ()]
    metres += [("--table-height", v) for v in ([args.table_height]
                                               if args.table_height is not None else [])]
    metres += [("--keepout", v) for box in args.keepout for v in box]
    for flag, value in metres:
        check_real(value, what=f"{flag} value", low=-MAX_WORLD_METRES, high=MAX_WORLD_METRES,
                   fix="give world metres")
    if args.table_yaw is not None:
        check_real(args.table_yaw, what="--table-yaw", low=-360.0, high=360.0,
                   fix="give an angle in degrees within one turn")


def run_edit(args: argparse.Namespace) -> int:
    """Handler of ``bench scene edit``: adjust a bundle's table, keepouts or registration."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.scene.ops import EditSpec, edit_bundle, write_bundle

    _check_edit_numbers(args)  # before any arithmetic: no overflow warnings, one line
    spec = EditSpec(
        rotate_z_deg=args.rotate_z, translate=tuple(args.translate) if args.translate else None,
        scale=args.scale, world_from_splat_file=args.world_from_splat,
        table_center=tuple(args.table_center) if args.table_center else None,
        table_size=tuple(args.table_size) if args.table_size else None,
        table_yaw_deg=args.table_yaw, table_height=args.table_height,
        add_keepouts=tuple(tuple(k) for k in args.keepout),
        remove_keepouts=tuple(args.remove_keepout), clear_keepouts=args.clear_keepouts,
        seed=args.seed)
    if spec.is_empty():
        raise BenchError("nothing to edit; pass a registration, table or keepout option "
                         "(see `bench scene edit --help`)")
    result = edit_bundle(Path(args.bundle), spec, previews=not args.no_previews,
                         backend=args.backend)
    out = Path(args.out) if args.out else Path(args.bundle)
    in_place = args.out is None or out.resolve() == Path(args.bundle).resolve()
    # in place: only the bundle's own files are replaced (a bench-made bundle; the user's
    # other files in it stay untouched); staged and recoverable like every write
    inputs = () if in_place else (("BUNDLE", args.bundle), ("--world-from-splat",
                                                            args.world_from_splat))
    write_bundle(result, out, overwrite=args.overwrite or in_place, inputs=inputs,
                 in_place=in_place)
    t = result.bundle.table
    table = (f"table {t.size[0]:.3f} x {t.size[1]:.3f} m at ({t.center[0]:.3f}, "
             f"{t.center[1]:.3f}, {t.height:.3f}) yaw {t.yaw_deg:.2f}" if t else "no table")
    print(f"edited {out}: {table}, {len(result.bundle.keepouts)} keepouts", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- crop
def run_crop(args: argparse.Namespace) -> int:
    """Handler of ``bench scene crop``: remove the Gaussians of physical task objects."""
    from pathlib import Path

    from bench.safety import preflight_output_dir
    from bench.scene.ops import crop_bundle, write_bundle

    inputs = (("BUNDLE", args.bundle),)
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)  # before the crop
    result = crop_bundle(Path(args.bundle), boxes=args.box, use_keepouts=args.keepouts,
                         margin=args.margin, previews=not args.no_previews,
                         backend=args.backend)
    write_bundle(result, args.out, overwrite=args.overwrite, inputs=inputs)
    counts = result.counts
    print(f"wrote {args.out}: removed {counts['removed']:,} of {counts['input']:,} Gaussians "
          f"in {counts['boxes']} boxes ({counts['kept']:,} kept)", file=sys.stderr)
    return 0
