"""``bench perturb``: apply a background editor (or a study preset) to a scene bundle.

Writes a complete scene bundle in ``--out`` (background.ply, scene.json, copied
cameras/ and objects/) plus ``manifest.json`` (editor id + version, resolved
parameters, seed, input/output sha256, counts removed/added/moved, bench
version). Nothing is written on failure. Only the standard library is imported
at module level.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench perturb``.

    Editor flags are built from each registered editor's parameter dataclass
    (:func:`perturbations.registry.editor_flags`: help, unit and the stated default come
    from the fields, flag names from the editor's registration); their parser default is
    None so that "not given" stays an override-free run. A flag several editors share goes
    into one group ("hole and warp"). Editor and preset choices come from the perturbation
    registry, plugins included.
    """
    from bench.cli_fields import add_dataclass_arguments, format_default
    from perturbations.registry import (
        PERTURBATIONS,
        editor_flags,
        editor_names,
        registered_presets,
    )

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
    which.add_argument("--preset", choices=registered_presets(),
                       help="a study condition: editor + fixed parameters (editor flags are "
                       "refused; use --kind for custom parameters)")
    p.add_argument("--scene", required=True, help="input scene bundle directory (scene.json)")
    p.add_argument("--out", required=True, help="output bundle directory (must not exist)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the numpy Generator (floaters, warp; hole draws nothing)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--drop-nonfinite", action="store_true",
                   help="drop Gaussians with NaN/Inf values instead of failing")
    flags = editor_flags()
    for kind in editor_names():  # each editor's group, then the groups it opens with others
        groups = {(kind,): f"{kind} (--kind {kind})"}
        groups.update({f.editors: " and ".join(f.editors) for f in flags
                       if len(f.editors) > 1 and f.editors[0] == kind})
        for editors, title in groups.items():
            members = [f for f in flags if f.editors == editors]
            if not members:
                continue
            group = p.add_argument_group(title)
            params_type = PERTURBATIONS.entry(editors[0]).meta["params_type"]
            fields = {f.name: f for f in dataclasses.fields(params_type)}
            for flag in members:
                if flag.named is None:
                    add_dataclass_arguments(group, params_type, only=(flag.field,),
                                            flags={flag.field: flag.flag},
                                            parser_defaults=False)
                    continue
                field = fields[flag.field]
                default = [name for name, value in flag.named.items() if value == field.default]
                stated = f" [default {format_default(default[0])}]" if default else ""
                group.add_argument(f"--{flag.flag}", choices=list(flag.named), default=None,
                                   help=f"{field.metadata['named_help']}{stated}")
    p.set_defaults(func=run_perturb)


def collect_overrides(args: argparse.Namespace, kind: str) -> dict:
    """Editor parameter overrides given on the command line.

    Rejects two flags that set the same parameter (``--band`` and ``--band-range``), other
    editors' flags, and any editor flag with ``--preset``: a preset is a study condition
    with fixed parameters, and its name is recorded in the manifest, so a changed
    parameter would be mislabelled.
    """
    from bench.errors import BenchError
    from perturbations.registry import editor_flags

    flags = editor_flags()
    given = [f for f in flags if getattr(args, f.dest, None) is not None]
    for i, flag in enumerate(given):
        for other in given[i + 1:]:
            if (other.field, other.editors) == (flag.field, flag.editors):
                first, second = sorted((flag, other), key=lambda f: f.named is None)
                raise BenchError(f"pass either --{first.flag} or --{second.flag}, not both")
    overrides = {}
    for flag in given:
        value = getattr(args, flag.dest)
        if kind not in flag.editors:
            raise BenchError(f"--{flag.flag} applies to {' and '.join(flag.editors)}, not "
                             f"{kind}; remove it")
        if args.preset is not None:
            raise BenchError(f"--{flag.flag} would change the study condition --preset "
                             f"{args.preset}; use --kind {kind} --{flag.flag} ... for custom "
                             "parameters")
        if flag.named is not None:
            value = flag.named[value]
        overrides[flag.field] = tuple(value) if isinstance(value, list) else value
    return overrides


def run_perturb(args: argparse.Namespace) -> int:
    """Handler of ``bench perturb``: apply the editor or preset, write the bundle and manifest."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import preflight_output_dir
    from bench.scene.bundle import read_scene_spec
    from perturbations.apply import perturb_scene, save_perturbed
    from perturbations.registry import PERTURBATIONS, resolve_edit

    if args.seed < 0:
        raise BenchError(f"--seed must be a non-negative integer, got {args.seed}")
    name = args.preset or args.kind
    kind = PERTURBATIONS.entry(name).meta["kind"]
    # parameters resolved (and validated) once, before reading anything big
    edit = resolve_edit(name, **collect_overrides(args, kind))
    out, scene_dir = Path(args.out), Path(args.scene)
    preflight_output_dir(out, overwrite=args.overwrite, inputs=[("--scene", scene_dir)])
    started = time.perf_counter()
    read_scene_spec(scene_dir)[0].require_table()  # fail before reading the background
    # Load + edit in one step: the input's SH is never rotated into the world (half the
    # peak memory of load_scene + apply_perturbation; same bytes, see perturb_scene).
    result = perturb_scene(scene_dir, edit, seed=args.seed, drop_nonfinite=args.drop_nonfinite)
    _progress(f"loaded {scene_dir}; {result.tool} ({name}): {result.stats.counts()}", started)
    save_perturbed(result, out, overwrite=args.overwrite, inputs=(scene_dir,))
    _progress(f"wrote {out} ({len(result.bundle.background):,} Gaussians)", started)
    return 0


def _progress(message: str, started: float) -> None:
    print(f"[bench perturb {time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr)
