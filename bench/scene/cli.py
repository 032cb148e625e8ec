"""``bench scene info`` and ``bench scene sample`` (stdlib-only imports at module level)."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench scene {info,sample}``."""
    p = subparsers.add_parser("scene", description="Scene bundle utilities.",
                              help="inspect scene bundles / scan files, make a sample scene")
    inner = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    info = inner.add_parser(
        "info", help="counts, bounds (metres), SH degree, table, memory of a bundle or scan",
        description="Summarise a scene bundle directory (world frame) or a scan file (file "
        "frame): .ply (3DGS layout), .compressed.ply (SuperSplat), .splat or .spz, read exactly "
        "as `bench scene init` reads it (a .splat by its suffix, the others by their content).")
    info.add_argument("path", metavar="SCENE_DIR|SCAN",
                      help="bundle directory or scan file (.ply/.compressed.ply/.splat/.spz)")
    info.add_argument("--json", action="store_true", help="print machine-readable JSON")
    info.add_argument("--drop-nonfinite", action="store_true",
                      help="drop Gaussians with NaN/Inf values instead of failing")
    info.set_defaults(func=run_info)
    sample = inner.add_parser(
        "sample", help="write the procedural sample room as a scene bundle",
        description="Generate the procedural sample room (table top at z = 0 m, SH degree 3, "
        "registered by a non-trivial similarity) deterministically.")
    sample.add_argument("--out", required=True, help="output bundle directory")
    sample.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    sample.add_argument("--gaussians", type=int, default=40000,
                        help="number of background Gaussians (count, >= 100)")
    sample.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    sample.set_defaults(func=run_sample)
    from bench.scene.init_cli import add_parsers  # bench scene init | edit | crop (issue 19)

    add_parsers(inner)


def scene_summary(path: str, *, drop_nonfinite: bool = False) -> dict:
    """Summary dict of a bundle directory or a Gaussian file."""
    import warnings
    from pathlib import Path

    import numpy as np

    from bench.errors import BenchError
    from bench.scene.bundle import SCENE_FILE, load_scene
    from bench.scene.formats import read_scan

    target = Path(path)
    if target.is_dir() or target.name == SCENE_FILE:
        bundle = load_scene(target, drop_nonfinite=drop_nonfinite)
        splats, frame = bundle.background, "world"
        summary = {"kind": "bundle", "name": bundle.name,
                   "world_from_splat": bundle.world_from_splat.tolist(),
                   "scale": bundle.similarity.scale,
                   "table": bundle.table.to_json() if bundle.table else None,
                   "keepouts": [k.to_json() for k in bundle.keepouts],
                   "cameras": bundle.cameras}
    elif target.exists():
        # exactly what `bench scene init` reads: one format decision (bench.scene.formats)
        splats, fmt, dropped = read_scan(target, drop_nonfinite=drop_nonfinite)
        frame = "file"
        summary = {"kind": "file", "format": fmt}
        if dropped:
            warnings.warn(f"{target}: dropped {dropped} Gaussians with NaN/Inf values "
                          f"({len(splats)} kept)", stacklevel=2)
    else:
        raise BenchError(f"{target} not found; pass a scene bundle directory or a scan file "
                         "(.ply, .compressed.ply, .splat or .spz)")
    means = splats.means
    summary.update({
        "path": str(target),
        "frame": frame,
        "gaussians": len(splats),
        "sh_degree": splats.sh_degree,
        "bounds_min": means.min(axis=0).tolist() if len(splats) else None,
        "bounds_max": means.max(axis=0).tolist() if len(splats) else None,
        "median_scale": float(np.median(np.exp(splats.log_scales.max(axis=1))))
        if len(splats) else None,
        "extra_properties": list(splats.extra),
        "memory_bytes": splats.nbytes,
    })
    return summary


def run_info(args: argparse.Namespace) -> int:
    """Handler of ``bench scene info``: print the bundle's summary (text or JSON)."""
    summary = scene_summary(args.path, drop_nonfinite=args.drop_nonfinite)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    kind = f"{summary['kind']}: {summary['format']}" if "format" in summary else summary["kind"]
    lines = [f"{summary['path']} ({kind}, {summary['frame']} frame)"]
    if summary["kind"] == "bundle":
        lines.append(f"  name:        {summary['name']}")
    lines.append(f"  Gaussians:   {summary['gaussians']:,} (SH degree {summary['sh_degree']})")
    if summary["bounds_min"] is not None:
        lo, hi = summary["bounds_min"], summary["bounds_max"]
        lines.append("  bounds:      " + "  ".join(
            f"{a} [{lo[i]:.3f}, {hi[i]:.3f}]" for i, a in enumerate("xyz")))
        lines.append(f"  median size: {summary['median_scale']:.4f} (largest-axis std)")
    lines.append(f"  memory:      {summary['memory_bytes'] / 2**20:.1f} MiB")
    if summary["extra_properties"]:
        lines.append(f"  extra:       {', '.join(summary['extra_properties'])}")
    if summary["kind"] == "bundle":
        lines.append(f"  registration scale: {summary['scale']:.6g} (world m per splat unit)")
        table = summary["table"]
        lines.append("  table:       " + (
            f"center {table['center']} m, size {table['size']} m, yaw {table['yaw_deg']} deg, "
            f"height {table['height']} m" if table else "none"))
        lines.append(f"  keepouts:    {len(summary['keepouts'])}")
        lines.append(f"  cameras:     {summary['cameras'] or 'none'}")
    print("\n".join(lines))
    return 0


def run_sample(args: argparse.Namespace) -> int:
    """Handler of ``bench scene sample``: write a generated sample room bundle."""
    from bench.errors import BenchError
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.scene.bundle import write_scene_files
    from bench.scene.sample import make_sample_scene

    if args.gaussians < 100:
        raise BenchError(f"--gaussians must be >= 100, got {args.gaussians}")
    if args.seed < 0:
        raise BenchError(f"--seed must be a non-negative integer, got {args.seed}")
    bundle = make_sample_scene(seed=args.seed, n_gaussians=args.gaussians)
    generator = bundle.extra_json["generator"]
    with staged_output_dir(args.out, overwrite=args.overwrite) as tmp:
        written = write_scene_files(bundle, tmp)
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=generator["tool"], params={"n_gaussians": args.gaussians}, seed=args.seed,
            inputs={}, outputs=written, counts={"gaussians": len(bundle.background)}))
    print(f"wrote {args.out} ({len(bundle.background):,} Gaussians, seed {args.seed})",
          file=sys.stderr)
    return 0
