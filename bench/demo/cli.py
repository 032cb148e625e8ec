"""``bench demo``: the whole study end to end on the bundled worlds (stdlib imports only)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

PROFILE_NAMES = ("quick", "default", "cup", "paper")  # bench.demo.run.PROFILES (checked)
BACKGROUND_COLORS = ("none", "shipped")  # bench.demo.run.BACKGROUND_COLORS (checked)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo``."""
    p = subparsers.add_parser(
        "demo", help="run the main job: the whole study end to end on the three bundled worlds",
        description="Apply every artifact preset to the reconstructed backgrounds of three "
        "ground-truth worlds, score quality against held-out captures, run paired rollouts of "
        "two policies per task in the simulator (the reconstructions) and in the ground-truth "
        "worlds (the 'real' domain), and write ranking, transition and reliability tables "
        "(CSV + Markdown), figures (PNG + PDF) and the regenerated YUBI tables under --out. "
        "Profiles: quick (smoke, ~3 min), default (<= 15 min on 2 cores), paper (YUBI's "
        "design, hours: see docs/demo.md).")
    _add_profile_arguments(p)
    p.set_defaults(func=run)
    commands = p.add_subparsers(dest="demo_command",
                                metavar="{build,train-policies,reaction,swap,probe,lights}",
                                help="further demo commands (`bench demo build -h`, "
                                "`bench demo train-policies -h`, `bench demo reaction -h`, "
                                "`bench demo swap -h`, `bench demo probe -h`, "
                                "`bench demo lights -h`)")
    add_build_parser(commands)
    add_train_policies_parser(commands)
    add_reaction_parser(commands)
    add_swap_parser(commands)
    add_probe_parser(commands)
    add_lights_parser(commands)


def _add_profile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="output directory (required)")
    p.add_argument("--profile", default="default",
                   help=f"study preset: {', '.join(PROFILE_NAMES)}")
    p.add_argument("--quick", action="store_true", help="same as --profile quick")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of every editor and of the capture noise")
    p.add_argument("--trials", type=int, default=None,
                   help="simulated rollouts per scene/condition/task/policy cell (count) "
                   "[the profile's]")
    p.add_argument("--real-trials", type=int, default=None,
                   help="ground-truth-world rollouts per scene/task/policy (count) "
                   "[the profile's]")
    p.add_argument("--tasks", default=None,
                   help="comma-separated tasks (cup, tape, pen) [the profile's]")
    p.add_argument("--workers", type=int, default=None,
                   help="process-executor workers (count; 1 runs serially) [the profile's: 2]")
    p.add_argument("--dry-run", action="store_true",
                   help="print the profile's rollout counts and its time estimated from one "
                   "measured rollout per policy and domain; write nothing")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--resume", action="store_true",
                   help="run in --out itself and continue a killed run there (every finished "
                   "rollout is kept; the same profile and options are required)")
    p.add_argument("--reuse-from", default=None, metavar="DIR",
                   help="copy the rollouts an earlier demo output DIR already ran that this run "
                   "still plans (e.g. after one task's policy pair changed), after re-running "
                   "one per (scene, task, policy, domain) as a check; DIR is only read "
                   "(docs/studies.md)")
    p.add_argument("--pair", action="append", default=None, metavar="TASK=POLICY_A,POLICY_B",
                   help="run TASK with another pair of registered learned policies (shipped "
                   "weights for TASK) instead of the shipped pair; repeatable, one per task, "
                   "the other tasks keep theirs. A pair other than the shipped one gives "
                   "results the committed tables (results/) do not hold: write it to its own "
                   "--out (docs/demo.md)")
    p.add_argument("--max-frames", action="append", default=None, metavar="TASK=FRAMES",
                   help="rollout time limit for TASK in 10 Hz frames instead of the profile's "
                   "(e.g. the limit measured for a --pair); results then differ from the "
                   "committed tables")
    p.add_argument("--time-limits", default="profile", choices=("profile", "yubi"),
                   help="rollout time limits: the profile's (paper: measured from held-out "
                   "starts, docs/demo.md) or YUBI's (600 frames, 1,800 for Duo Tape/Pen and "
                   "G2 Pen)")
    p.add_argument("--background-color", default=None, choices=BACKGROUND_COLORS,
                   help="simulated backgrounds' colours: 'shipped' aligns them to the robot's "
                   "camera with the shipped per-room fit (python -m bench.demo.color_align), "
                   "'none' leaves them as reconstructed [the profile's]; one other than the "
                   "profile's gives results the committed tables do not hold")
    p.add_argument("--allow-native-numerics", action="store_true",
                   help="run with this machine's own float kernels instead of the reference "
                   "numerics (needed on a CPU without AVX2 + FMA; the tables may then differ "
                   "from the committed ones; docs/demo.md)")


def run(args: argparse.Namespace) -> int:
    """Run ``bench demo`` (or ``--dry-run``: print its estimate) from parsed args; returns 0."""
    from pathlib import Path

    from bench.demo.run import DemoConfig, estimate_demo, get_profile, run_demo
    from bench.errors import BenchError
    from bench.numerics import require_reference_numerics
    from bench.safety import preflight_output_dir

    if args.out is None and not args.dry_run:
        raise BenchError("bench demo needs --out DIR (the output directory)")
    profile = "quick" if args.quick else args.profile
    if args.quick and args.profile not in ("default", "quick"):
        raise BenchError(f"--quick and --profile {args.profile} contradict; give one of them")
    get_profile(profile)
    if args.seed < 0:
        raise BenchError(f"--seed must be >= 0, got {args.seed}")
    options = {}
    for name in ("trials", "real_trials", "workers"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                raise BenchError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
            options[name] = value
    if args.tasks is not None:
        options["tasks"] = _tasks(args.tasks)
    config = DemoConfig(out=Path(args.out or "."), profile=profile, seed=args.seed,
                        overwrite=args.overwrite, time_limits=args.time_limits,
                        resume=args.resume, **options,
                        reuse_from=None if args.reuse_from is None else Path(args.reuse_from),
                        pairs=_pairs(args.pair), frame_limits=_frame_limits(args.max_frames),
                        background_color=args.background_color)
    spec = config.study_spec()  # every refusal of the options before anything runs
    note = config.unshipped_note()
    if note:
        import sys

        print(f"[bench demo] {note}", file=sys.stderr)
    if config.reuse_from is not None:  # refused before --out is touched
        from bench.study.reuse import check_source

        check_source(spec, config.reuse_from, out=None if args.out is None else config.out)
    if args.dry_run:
        estimate_demo(config, report=True)
        return 0
    if not args.resume:  # a resumed run checks --out as bench study run --resume does
        preflight_output_dir(args.out, overwrite=args.overwrite)
    # the committed tables hold only under the reference numerics: set them, restarting this
    # process with them where numpy already loaded without them (bench.cli imports it)
    require_reference_numerics(allow_native=args.allow_native_numerics)
    run_demo(config)
    return 0


def add_build_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo build`` (the reconstructed backgrounds of the demo worlds)."""
    p = subparsers.add_parser(
        "build", help="regenerate the demo's reconstructed backgrounds (capture + training)",
        description="Simulate a handheld 200-degree fisheye capture of each ground-truth world, "
        "select frames, reproject to pinhole views, seed from depth and train the clean and "
        "the three coverage backgrounds (gsplat on CUDA, the CPU Warp trainer otherwise). "
        "Deterministic and resumable per (world, condition).")
    p.add_argument("--out", required=True, help="output directory (scenes/, captures/, work/)")
    from bench.demo.build import DEMO_CONDITIONS, DEMO_WORLDS, BuildConfig  # no heavy imports

    p.add_argument("--worlds", default=",".join(DEMO_WORLDS), help="comma-separated worlds")
    p.add_argument("--conditions", default=",".join(DEMO_CONDITIONS),
                   help="comma-separated conditions")
    p.add_argument("--iters", type=int, default=BuildConfig().iters,
                   help="training iterations per background")
    p.add_argument("--resume", action="store_true",
                   help="continue an existing --out: finished artifacts with the same inputs "
                   "are kept, the rest is (re)built")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "gsplat"),
                   help="trainer backend [default auto: gsplat on CUDA, else cpu]")
    p.set_defaults(func=run_build)


def _names(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if text is None:
        return default
    return tuple(t.strip() for t in text.split(",") if t.strip())


def run_build(args: argparse.Namespace) -> int:
    """Run ``bench demo build`` from parsed args: check names, build the backgrounds; returns 0."""
    import dataclasses
    from pathlib import Path

    from bench.demo.build import DEMO_CONDITIONS, DEMO_WORLDS, BuildConfig, build, check_names
    from bench.errors import BenchError

    worlds = _names(args.worlds, DEMO_WORLDS)
    conditions = _names(args.conditions, DEMO_CONDITIONS)
    check_names(worlds, conditions)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.resume:
        raise BenchError(f"--out {out} exists and is not empty; pass --resume to continue it "
                         "or choose a new --out")
    config = BuildConfig(backend=args.backend)
    if args.iters is not None:
        if args.iters < 1:
            raise BenchError(f"--iters must be >= 1, got {args.iters}")
        config = dataclasses.replace(config, iters=args.iters)
    build(out, worlds=worlds, conditions=conditions, config=config)
    return 0


def add_train_policies_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo train-policies`` (issue 12 item 3: the learned policies)."""
    p = subparsers.add_parser(
        "train-policies", help="re-record the demonstrations and retrain the learned policies",
        description="Record the scripted expert's noisy demonstrations in the three "
        "ground-truth worlds and train the behaviour-cloned policies (bc-large, bc-small; "
        "bc-aux and its DAgger rounds bc-aux-dagger) per task, "
        "deterministically and resumably stage by stage; writes OUT/demos/, "
        "OUT/policies/<name>/<task>/ (the layout of bench/demo/assets/policies), "
        "OUT/dagger/ (each DAgger round) and OUT/manifest.json. See docs/demo-policies.md.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--tasks", default="cup,tape,pen",
                   help="comma-separated tasks (cup, tape, pen) [default all three]")
    from bench.policies.bc_recipes import ALL_RECIPES

    p.add_argument("--policies", default=None,
                   help=f"comma-separated recipes ({', '.join(ALL_RECIPES)}; a DAgger recipe "
                   "trains its base too) [default all, each on its tasks]")
    p.add_argument("--episodes", type=int, default=None,
                   help="demonstrations recorded per task (count) [default 300]")
    p.add_argument("--epochs", type=int, default=None,
                   help="training epochs (count) [default: the recipe's, 30 Cup/Tape, 20 Pen]")
    p.add_argument("--evaluate", type=int, default=0,
                   help="then roll each policy out this many times per task in the "
                   "ground-truth worlds and write OUT/eval.{csv,md} (count) [default 0]")
    p.add_argument("--resume", action="store_true",
                   help="keep the datasets and policies in --out whose config and inputs match")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out written by the bench")
    p.set_defaults(func=run_train_policies)


def _tasks(text: str) -> tuple[str, ...]:
    """The comma-separated ``--tasks`` value, checked in one line."""
    from bench.errors import BenchError

    tasks = tuple(t.strip().lower() for t in text.split(",") if t.strip())
    bad = sorted(set(tasks) - {"cup", "tape", "pen"})
    if not tasks or bad:
        raise BenchError(f"--tasks must name cup, tape and/or pen, got {text!r}")
    return tasks


def _per_task(values: list[str] | None, *, flag: str, form: str, example: str,
              parse: Any) -> tuple[tuple[str, Any], ...] | None:
    """Repeated ``TASK=VALUE`` flags as ``((task, parse(VALUE)), ...)`` (None: none given).

    Only the form is checked here (``parse`` returns None for a bad VALUE); the tasks, repeats
    and values themselves are checked by :class:`DemoConfig` (one line each).
    """
    from bench.errors import BenchError

    items = []
    for value in values or ():
        task, sep, rest = value.partition("=")
        parsed = parse(rest) if sep else None
        if not task.strip() or parsed is None:
            raise BenchError(f"{flag} must be {form} (e.g. {example}), got {value!r}")
        items.append((task.strip().lower(), parsed))
    return tuple(items) or None


def _policy_names(text: str) -> tuple[str, ...] | None:
    names = tuple(n.strip() for n in text.split(","))
    return names if all(names) else None


def _whole_number(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _pairs(values: list[str] | None) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """``--pair TASK=POLICY_A,POLICY_B`` as ``DemoConfig.pairs`` (checked by ``policy_pairs``)."""
    return _per_task(values, flag="--pair", form="TASK=POLICY_A,POLICY_B",
                     example="tape=bc-aux-dagger,bc-large", parse=_policy_names)


def _frame_limits(values: list[str] | None) -> tuple[tuple[str, int], ...] | None:
    """``--max-frames TASK=FRAMES`` as ``DemoConfig.frame_limits`` (checked by the config)."""
    return _per_task(values, flag="--max-frames",
                     form="TASK=FRAMES, FRAMES a whole number of 10 Hz frames",
                     example="tape=350", parse=_whole_number)


def _tasks_and_recipes(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--tasks`` and ``--policies`` (None: every learned recipe), checked in one line each."""
    from bench.errors import BenchError
    from bench.policies.bc_recipes import ALL_RECIPES

    tasks = _tasks(args.tasks)
    policies = ALL_RECIPES if args.policies is None else tuple(
        n.strip() for n in args.policies.split(",") if n.strip())
    unknown = sorted(set(policies) - set(ALL_RECIPES))
    if not policies or unknown:
        raise BenchError(f"--policies must name recipes of {', '.join(ALL_RECIPES)}, "
                         f"got {args.policies!r}")
    return tasks, policies


def run_train_policies(args: argparse.Namespace) -> int:
    """Run ``bench demo train-policies``: record demos, train, optionally evaluate; returns 0."""
    from pathlib import Path

    from bench.errors import BenchError
    from bench.safety import MARKER, marker_json, preflight_output_dir

    tasks, policies = _tasks_and_recipes(args)
    for name in ("episodes", "epochs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BenchError(f"--{name} must be >= 1, got {value}")
    if args.evaluate < 0:
        raise BenchError(f"--evaluate must be >= 0, got {args.evaluate}")
    out = Path(args.out)
    if not (args.resume and (out / MARKER).is_file()):
        preflight_output_dir(out, overwrite=args.overwrite)
        if out.exists():  # --overwrite of a bench output: start afresh
            import shutil

            shutil.rmtree(out)
    from bench.demo.bc_training import TrainPoliciesConfig
    from bench.demo.evaluation import write_evaluation
    from bench.demo.train_policies import train_policies

    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_bytes(marker_json())
    options = {"tasks": tasks, "epochs": args.epochs, "policies": policies}
    if args.episodes is not None:
        options["episodes"] = args.episodes
    train_policies(out, TrainPoliciesConfig(**options), resume=args.resume)
    if args.evaluate:
        write_evaluation(out, tasks=tasks, trials=args.evaluate, policies=policies)
    print(f"wrote {out}")
    return 0


def add_reaction_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo reaction`` (issue 33 item 4: which policies react to damage)."""
    from bench.demo.reaction import ReactionConfig  # stdlib imports only: defaults from it

    defaults = ReactionConfig()
    p = subparsers.add_parser(
        "reaction", help="screen learned policies: real success and paired simulated "
        "outcomes, clean vs an artifact, on held-out starts",
        description="Per task and learned recipe, roll out the same held-out starts (8000+, "
        "ten per room; no study or demonstration uses them) in the ground-truth world, on the "
        "room's clean reconstruction and on its --preset edit, each in the env the study "
        "builds; writes OUT/reaction_trials.csv, OUT/reaction.{csv,md} (real and simulated "
        "successes, paired worse / better, McNemar) and OUT/reaction_config.json. Computes "
        "with the reference numerics, as bench demo does. See docs/demo-policies.md.")
    _add_screen_arguments(p, tasks="cup,tape,pen", tasks_help="all three", policies=None,
                          policies_help="all, each on its tasks", trials=defaults.trials)
    p.add_argument("--condition-offset", type=int, default=defaults.condition_offset,
                   help="first held-out start (initial-condition index) "
                   f"[default {defaults.condition_offset}]")
    p.add_argument("--preset", default=defaults.preset,
                   help=f"artifact preset compared with clean [default {defaults.preset}]")
    p.add_argument("--background-color", default=None, choices=BACKGROUND_COLORS,
                   help="simulated backgrounds' colours: 'shipped' (aligned to the robot's "
                   "camera) or 'none' [the screen profile's]")
    _add_screen_output_arguments(p)
    p.set_defaults(func=run_reaction)


def run_reaction(args: argparse.Namespace) -> int:
    """Run ``bench demo reaction`` from parsed args; returns 0."""
    from bench.demo.reaction import ReactionConfig, screen_policy, write_reaction
    from bench.errors import BenchError
    from perturbations.registry import registered_presets

    tasks, policies = _tasks_and_recipes(args)
    if args.preset not in registered_presets():
        raise BenchError(f"--preset {args.preset!r} is not an artifact preset; choose one of "
                         f"{', '.join(registered_presets())}")
    try:
        config = ReactionConfig(trials=args.trials, condition_offset=args.condition_offset,
                                preset=args.preset, background_color=args.background_color)
    except ValueError as error:
        raise BenchError(f"bench demo reaction: {error}") from None
    return _run_screen(args, tasks, policies, config, screen_policy, write_reaction)


def add_swap_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo swap`` (issue 33 item 5: which part of the background costs skill)."""
    from bench.demo.background_swap import SWAP_VARIANTS, SwapConfig  # stdlib only at import

    defaults = SwapConfig()
    p = subparsers.add_parser(
        "swap", help="screen learned policies on the clean reconstruction with ground-truth "
        "geometry swapped in (the table top, the whole room), on held-out starts",
        description="Per task and learned recipe, roll out the same held-out starts (8000+, "
        "ten per room) in the study's simulated env under backgrounds that differ only in "
        "what is drawn behind the meshes: the clean reconstruction (control), the same with "
        "its table-top Gaussians made opaque, the same with the ground-truth table top "
        "instead of its table Gaussians, that top without its texture, and the ground-truth "
        "room instead of every Gaussian (the room's lights in each); and the reconstruction "
        "with the meshes under the lights fitted by bench demo lights instead. Writes "
        "OUT/swap_trials.csv, OUT/swap.{csv,md} (successes, paired gained / lost vs the "
        "control, McNemar) and OUT/swap_config.json. Computes with the reference numerics, "
        "as bench demo does. See docs/demo-build.md.")
    _add_screen_arguments(p, tasks="tape", tasks_help="tape", policies="bc-aux-dagger",
                          policies_help="bc-aux-dagger", trials=defaults.trials)
    _add_variants_argument(p, defaults.variants, what="backgrounds, the control first",
                           choices=SWAP_VARIANTS, default_help="all")
    _add_screen_output_arguments(p)
    p.set_defaults(func=run_swap)


def run_swap(args: argparse.Namespace) -> int:
    """Run ``bench demo swap`` from parsed args; returns 0."""
    from bench.demo.background_swap import SwapConfig, screen_swaps, write_swaps

    tasks, policies = _tasks_and_recipes(args)
    config = _variant_config(SwapConfig, args, "swap")
    return _run_screen(args, tasks, policies, config, screen_swaps, write_swaps)


def _add_variants_argument(p: argparse.ArgumentParser, variants: tuple[str, ...], *, what: str,
                           choices: tuple[str, ...], default_help: str) -> None:
    """``--variants`` of the variant screens (swap, probe)."""
    p.add_argument("--variants", default=",".join(variants),
                   help=f"comma-separated {what} ({', '.join(choices)}) [default {default_help}]")


def _variant_config(cls: Any, args: argparse.Namespace, command: str) -> Any:
    """A variant screen's config from ``--trials`` and ``--variants``, checked in one line."""
    from bench.errors import BenchError

    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    try:
        return cls(trials=args.trials, variants=variants)
    except ValueError as error:
        raise BenchError(f"bench demo {command}: {error}") from None


def add_probe_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo probe`` (issue 33 item 5: where the first view places the object)."""
    from bench.demo.probe import PROBE_VARIANTS, ProbeConfig  # stdlib only at import

    defaults = ProbeConfig()
    p = subparsers.add_parser(
        "probe", help="where a learned policy's object-pose head places the object from its "
        "first view, in the real world and the simulators, on held-out starts (no rollout)",
        description="Per task and bc-aux recipe, reset the same held-out starts (8000+, ten "
        "per room) in each --variants world (real: the ground-truth world; study: the "
        "study's simulated env; or a bench demo swap background) and compare the policy's "
        "training-time object-pose head, read from the first view, with the object's true "
        "position. Writes OUT/probe_trials.csv, OUT/probe.{csv,md} (median and mean error in "
        "cm, and the mean predictor's) and OUT/probe_config.json. Computes with the reference "
        "numerics, as bench demo does. See docs/demo-build.md.")
    _add_screen_arguments(p, tasks="cup,tape,pen", tasks_help="all three",
                          policies="bc-aux-dagger", policies_help="bc-aux-dagger",
                          trials=defaults.trials)
    _add_variants_argument(p, defaults.variants, what="first views", choices=PROBE_VARIANTS,
                           default_help=",".join(defaults.variants))
    _add_screen_output_arguments(p)
    p.set_defaults(func=run_probe)


def run_probe(args: argparse.Namespace) -> int:
    """Run ``bench demo probe`` from parsed args; returns 0."""
    from bench.demo.probe import ProbeConfig, load_probed_network, screen_probe, write_probe
    from bench.policies.bc_recipes import recipe_tasks

    tasks, policies = _tasks_and_recipes(args)
    config = _variant_config(ProbeConfig, args, "probe")
    for task in tasks:  # refuse a recipe without the pose head before anything is written
        for name in policies:
            if task in recipe_tasks(name):
                load_probed_network(task, name)
    return _run_screen(args, tasks, policies, config, screen_probe, write_probe)


def add_lights_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench demo lights`` (issue 33 item 5: the meshes lit as in the room)."""
    from bench.demo.mesh_lights import LightsConfig  # stdlib only at import

    defaults = LightsConfig()
    p = subparsers.add_parser(
        "lights", help="fit the simulator's mesh lights per room to real wrist images of "
        "training states, and report how well the meshes and the wrist views then match",
        description="Per room, pair the real wrist images of scripted-expert episodes from "
        "the demonstrations' starts (5000+) with renders of the simulator's meshes under each "
        "light term at the same states, and fit the terms' weights per colour channel by "
        "non-negative least squares over the pixels the meshes cover. Writes "
        "OUT/mesh_lights.json (the fit, with its manifest), OUT/lights.{csv,md} (mesh-pixel "
        "PSNR under the task world's default, the fitted and the room's true lights) and "
        "OUT/wrist.{csv,md} (wrist-view PSNR, default against fitted lights). The demo's "
        "study lights its simulated meshes with the shipped fit "
        "(bench/demo/assets/mesh_lights.json). Computes with the reference numerics, as "
        "bench demo does. See docs/demo-build.md.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--episodes", type=int, default=defaults.episodes,
                   help=f"expert episodes per room and task (count) [default {defaults.episodes}]")
    p.add_argument("--no-wrist", action="store_true",
                   help="skip the wrist-view PSNR tables (the fit alone)")
    _add_screen_output_arguments(p)
    p.set_defaults(func=run_lights)


def run_lights(args: argparse.Namespace) -> int:
    """Run ``bench demo lights`` from parsed args; returns 0."""
    import sys
    from pathlib import Path

    from bench.demo.mesh_lights import LightsConfig, fit_rooms, wrist_rows, write_lights
    from bench.errors import BenchError
    from bench.numerics import require_reference_numerics
    from bench.safety import MARKER, marker_json, preflight_output_dir

    try:
        config = LightsConfig(episodes=args.episodes)
    except ValueError as error:
        raise BenchError(f"bench demo lights: {error}") from None
    preflight_output_dir(args.out, overwrite=args.overwrite)
    require_reference_numerics(allow_native=args.allow_native_numerics)
    fits, rows = fit_rooms(config)
    wrist = [] if args.no_wrist else wrist_rows(fits, config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_bytes(marker_json())
    for row in write_lights(out, fits, rows, wrist, config,
                            command="bench " + " ".join(sys.argv[1:])):
        print(row)
    return 0


def _add_screen_arguments(p: argparse.ArgumentParser, *, tasks: str, tasks_help: str,
                          policies: str | None, policies_help: str, trials: int) -> None:
    """``--out``, ``--tasks``, ``--policies`` and ``--trials`` of the policy screens."""
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--tasks", default=tasks,
                   help=f"comma-separated tasks (cup, tape, pen) [default {tasks_help}]")
    p.add_argument("--policies", default=policies,
                   help=f"comma-separated learned recipes [default {policies_help}]")
    p.add_argument("--trials", type=int, default=trials,
                   help="paired trials per task and recipe, cycled over the rooms (count) "
                   f"[default {trials}]")


def _add_screen_output_arguments(p: argparse.ArgumentParser) -> None:
    """``--overwrite`` and ``--allow-native-numerics`` of the policy screens."""
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out written by the bench")
    p.add_argument("--allow-native-numerics", action="store_true",
                   help="compute with this machine's own float numerics instead of the "
                   "reference numerics (a CPU without AVX2 + FMA)")


def _run_screen(args: argparse.Namespace, tasks: tuple[str, ...], policies: tuple[str, ...],
                config: Any, screen: Callable[..., list], write: Callable[..., list]) -> int:
    """A policy screen's run: check --out, the numerics, screen each (task, recipe), write."""
    import sys
    from pathlib import Path

    from bench.numerics import require_reference_numerics
    from bench.policies.bc_recipes import recipe_tasks
    from bench.safety import MARKER, marker_json, preflight_output_dir

    preflight_output_dir(args.out, overwrite=args.overwrite)
    require_reference_numerics(allow_native=args.allow_native_numerics)
    rows = [row for task in tasks for name in policies if task in recipe_tasks(name)
            for row in screen(task, name, config)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_bytes(marker_json())
    for row in write(out, rows, config, command="bench " + " ".join(sys.argv[1:])):
        print(row)
    return 0
