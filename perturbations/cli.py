"""``bench perturb``: apply a background editor (or a study preset) to a scene bundle.

Writes a complete scene bundle in ``--out`` (background.ply, scene.json, copied
cameras/ and objects/) plus ``manifest.json`` (editor id + version, resolved
parameters, seed, input/output sha256, counts removed/added/moved, bench
version). Nothing is written on failure. Only the standard library is imported
at module level.
"""

from __future__ import annotations

import argparse
import sys
import time

EDITOR_PARAMS = {  # CLI dest -> (editor, dataclass field)
    "angle": ("hole", "half_angle_deg"),
    "apex": ("hole", "apex"),
    "band": ("floaters", "band"),
    "band_range": ("floaters", "band"),
    "clusters": ("floaters", "num_clusters"),
    "per_cluster": ("floaters", "per_cluster"),
    "clearance": ("floaters", "clearance"),
    "cluster_std": ("floaters", "cluster_std"),
    "floater_scale": ("floaters", "scale"),
    "scale_log_std": ("floaters", "scale_log_std"),
    "opacity": ("floaters", "opacity"),
    "opacity_logit_std": ("floaters", "opacity_logit_std"),
    "neighbours": ("floaters", "neighbours"),
    "domes": ("warp", "num_domes"),
    "dome_height": ("warp", "height_range"),
    "dome_radius": ("warp", "radius_range"),
    "margin": (("hole", "warp"), "margin"),
    "slab": (("hole", "warp"), "slab"),
}
def _editor_flags(editor: str) -> dict[str, str]:
    """Field name -> flag name (no ``--``) of one editor's parameters (from EDITOR_PARAMS)."""
    flags = {}
    for dest, (editors, field) in EDITOR_PARAMS.items():
        if editor in (editors if isinstance(editors, tuple) else (editors,)):
            flags.setdefault(field, dest)
    return flags


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench perturb``.

    Editor flags are built from the parameter dataclasses (help, unit and the stated default
    come from the fields); their parser default is None so that "not given" stays an
    override-free run. Editor and preset choices come from the perturbation registry.
    """
    from bench.cli_fields import add_dataclass_arguments
    from perturbations.floaters import BANDS, FloaterParams
    from perturbations.hole import HoleParams
    from perturbations.registry import editor_names, preset_names
    from perturbations.warp import WarpParams

    p = subparsers.add_parser(
        "perturb",
        help="inject a deterministic artifact (hole, floaters, warp) into a scene bundle",
        description="Apply one background editor to a scene bundle and write the edited bundle "
        "plus manifest.json. World frame: metres, +z up, table top at table.height. "
        "Same input, parameters and seed give a byte-identical background.ply.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--kind", choices=editor_names(),
                       help="editor to apply (defaults: YUBI-Real2Sim values)")
    which.add_argument("--preset", choices=preset_names(),
                       help="a study condition: editor + fixed parameters (editor flags are "
                       "refused; use --kind for custom parameters)")
    p.add_argument("--scene", required=True, help="input scene bundle directory (scene.json)")
    p.add_argument("--out", required=True, help="output bundle directory (must not exist)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the numpy Generator (floaters, warp; hole draws nothing)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--drop-nonfinite", action="store_true",
                   help="drop Gaussians with NaN/Inf values instead of failing")
    hole_flags = _editor_flags("hole")
    add_dataclass_arguments(p.add_argument_group("hole (--kind hole)"), HoleParams,
                            only=("half_angle_deg", "apex"), flags=hole_flags,
                            parser_defaults=False)
    add_dataclass_arguments(p.add_argument_group("hole and warp"), HoleParams,
                            only=("margin", "slab"), flags=hole_flags, parser_defaults=False)
    fl = p.add_argument_group("floaters (--kind floaters)")
    default_band = next(name for name, band in BANDS.items()
                        if band == FloaterParams().band)
    bands = ", ".join(f"{name} {low:g}-{high:g} m" for name, (low, high) in BANDS.items())
    fl.add_argument("--band", choices=list(BANDS), default=None,
                    help=f"height band above the table: {bands} [default {default_band}]")
    add_dataclass_arguments(fl, FloaterParams, flags={**_editor_flags("floaters"),
                                                      "band": "band_range"},
                            parser_defaults=False)
    add_dataclass_arguments(p.add_argument_group("warp (--kind warp)"), WarpParams,
                            only=("num_domes", "height_range", "radius_range"),
                            flags=_editor_flags("warp"), parser_defaults=False)
    p.set_defaults(func=run_perturb)


def collect_overrides(args: argparse.Namespace, kind: str) -> dict:
    """Editor parameter overrides given on the command line.

    Rejects other editors' flags, and any editor flag with ``--preset``: a preset
    is a study condition with fixed parameters, and its name is recorded in the
    manifest, so a changed parameter would be mislabelled.
    """
    from bench.errors import BenchError

    overrides = {}
    if args.band is not None and args.band_range is not None:
        raise BenchError("pass either --band or --band-range, not both")
    for dest, (editors, field) in EDITOR_PARAMS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        editors = editors if isinstance(editors, tuple) else (editors,)
        flag = "--" + dest.replace("_", "-")
        if kind not in editors:
            raise BenchError(f"{flag} applies to {' and '.join(editors)}, not {kind}; remove it")
        if args.preset is not None:
            raise BenchError(f"{flag} would change the study condition --preset {args.preset}; "
                             f"use --kind {kind} {flag} ... for custom parameters")
        if dest == "band":
            from perturbations.floaters import BANDS

            value = BANDS[value]
        overrides[field] = tuple(value) if isinstance(value, list) else value
    return overrides


def run_perturb(args: argparse.Namespace) -> int:
    """Handler of ``bench perturb``: apply the editor or preset, write the bundle and manifest."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import preflight_output_dir
    from bench.scene.bundle import read_scene_spec
    from perturbations.apply import perturb_scene, save_perturbed
    from perturbations.registry import PERTURBATIONS, make_params

    if args.seed < 0:
        raise BenchError(f"--seed must be a non-negative integer, got {args.seed}")
    name = args.preset or args.kind
    kind = PERTURBATIONS.entry(name).meta["kind"]
    overrides = collect_overrides(args, kind)
    make_params(name, **overrides)  # validate parameters before reading anything big
    out, scene_dir = Path(args.out), Path(args.scene)
    preflight_output_dir(out, overwrite=args.overwrite, inputs=[("--scene", scene_dir)])
    started = time.perf_counter()
    read_scene_spec(scene_dir)[0].require_table()  # fail before reading the background
    # Load + edit in one step: the input's SH is never rotated into the world (half the
    # peak memory of load_scene + apply_perturbation; same bytes, see perturb_scene).
    result = perturb_scene(scene_dir, name, seed=args.seed, drop_nonfinite=args.drop_nonfinite,
                           **overrides)
    _progress(f"loaded {scene_dir}; {result.tool} ({name}): {result.stats.counts()}", started)
    save_perturbed(result, out, overwrite=args.overwrite, inputs=(scene_dir,))
    _progress(f"wrote {out} ({len(result.bundle.background):,} Gaussians)", started)
    return 0


def _progress(message: str, started: float) -> None:
    print(f"[bench perturb {time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr)
