"""The paper profile's time limits, measured: when do the demo's successful rollouts end?

A rollout stops at its time limit whether or not the policy would still succeed, so a limit
below a policy's late successes turns them into failures and biases the comparison. The
paper profile's limits are therefore chosen on rollouts the study never runs: the expert
(what the demonstrations record) and both learned policies of every task, in the
ground-truth worlds (``real``) and on the clean reconstructions (``sim``), from held-out
starts (initial conditions ``condition_offset + i``, a block no study or demonstration
uses: demonstrations 5000-5299, evaluation 9000+, the study 100+, 1000+ and the control
block), each with a long measurement limit. The envs are the study's own
(:func:`bench.study.work_unit.make_study_env` on the paper profile's spec), so rig, image
size, sensor and fisheye mode are the study's.

Rule (:func:`chosen_limits`): per task, the smallest multiple of 50 frames that is at least
1.5 x the latest success frame seen in any policy and domain; a success within 10 % of the
measurement limit is flagged as censored (measure longer before trusting the limit).

``python -m bench.demo.time_limits --out DIR`` writes ``success_frames.csv`` (one row per
rollout), ``summary.{csv,md}`` (distribution per task, policy and domain) and
``limits.json`` (the chosen limit per task, the rule, the censoring flag) with a manifest.

Afterwards, on the study's own starts: :mod:`bench.demo.success_frames`.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.demo.success_frames import LATE, frame_stats

#: Margin and rounding of the rule: limit = ceil(MARGIN x latest success / ROUND) x ROUND.
MARGIN = 1.5
ROUND = 50
TOOL = "demo-time-limits/1"


@dataclass(frozen=True)
class TimeLimitConfig:
    """What the measurement runs (one typed config, the single source of its defaults).

    Attributes:
        tasks: Tasks measured.
        starts_per_scene: Held-out starts per scene (each policy and domain runs all of them).
        condition_offset: First initial-condition index of the held-out block.
        max_frames: Measurement time limit, 10 Hz frames (longer than any limit chosen).
        domains: ``real`` (ground-truth worlds) and/or ``sim`` (clean reconstructions).
        expert: Also run the scripted expert (the policy the demonstrations record).
        background_color: ``shipped`` / ``none`` instead of the paper profile's colour
            alignment of the simulated backgrounds; None: the paper profile's.
    """

    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    starts_per_scene: int = 4
    condition_offset: int = 7000
    max_frames: int = 600
    domains: tuple[str, ...] = ("real", "sim")
    expert: bool = True
    background_color: str | None = None


def measurement_spec(config: TimeLimitConfig) -> Any:
    """The paper profile's spec with the measurement's time limit (envs as the study's)."""
    import dataclasses

    from bench.demo.run import get_profile, profile_spec

    paper = get_profile("paper")
    profile = dataclasses.replace(paper, tasks=config.tasks, max_frames=config.max_frames,
                                  trials=1, real_trials=1,
                                  background_color=measured_colors(config))
    return profile_spec(profile)


def measure_success_frames(config: TimeLimitConfig, *, progress: bool = True
                           ) -> list[dict[str, Any]]:
    """One row per rollout: task, scene, domain, policy, start, success, frames."""
    import bench.policies.visual  # noqa: F401 - registers the visual policies
    from bench.demo.run import _clean_bundle
    from bench.policies import make_policy
    from bench.progress import progress as progress_bar
    from bench.sim.rollout import run_episode
    from bench.study.work_unit import make_study_env

    spec = measurement_spec(config)
    jobs = [(task, scene, domain) for task in spec.tasks for scene in spec.scene_names
            for domain in config.domains]
    names = {t: (("expert",) if config.expert else ()) + tuple(spec.policies[t])
             for t in spec.tasks}
    total = sum(len(names[t]) for t, _, _ in jobs) * config.starts_per_scene
    bar = progress_bar(total=total, desc="success frames", unit="rollout", file=sys.stderr,
                       disable=not progress)
    rows = []
    for task, scene, domain in jobs:
        bundle = _clean_bundle(spec, scene) if domain == "sim" else None
        env = make_study_env(spec, scene=scene, task=task, domain=domain, bundle=bundle)
        try:
            first = config.condition_offset + spec.scene_names.index(scene) * \
                config.starts_per_scene
            for name in names[task]:
                policy = make_policy(name, env, seed=spec.seed)
                for i in range(config.starts_per_scene):
                    record, _, _ = run_episode(env, policy, init_index=first + i, episode=i,
                                               policy_name=name)
                    rows.append({"task": task, "scene": scene, "domain": domain,
                                 "policy": name, "start": first + i,
                                 "success": int(bool(record.success)),
                                 "frames": int(record.frames), "status": str(record.status)})
                    bar.update(1)
        finally:
            env.close()
    bar.close()
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, policy, domain): successes / rollouts and the success frames' quantiles."""
    out = []
    keys = sorted({(r["task"], r["policy"], r["domain"]) for r in rows})
    for task, policy, domain in keys:
        sel = [r for r in rows if (r["task"], r["policy"], r["domain"]) == (task, policy, domain)]
        frames = [r["frames"] for r in sel if r["success"]]
        out.append({"task": task, "policy": policy, "domain": domain,
                    "successes": len(frames), "rollouts": len(sel), **frame_stats(frames)})
    return out


def chosen_limits(rows: list[dict[str, Any]], *, max_frames: int) -> dict[str, dict[str, Any]]:
    """Task -> {limit, latest_success, censored}: the rule of the module docstring."""
    limits = {}
    for task in sorted({r["task"] for r in rows}):
        success = [r["frames"] for r in rows if r["task"] == task and r["success"]]
        latest = max(success) if success else 0
        limit = max(ROUND, math.ceil(MARGIN * latest / ROUND) * ROUND)
        limits[task] = {"limit": int(limit), "latest_success": int(latest),
                        "censored": bool(latest >= LATE * max_frames)}
    return limits


def measured_colors(config: TimeLimitConfig) -> str:
    """The simulated backgrounds' colour alignment the measurement ran (``shipped`` / ``none``)."""
    from bench.demo.run import get_profile

    return config.background_color or get_profile("paper").background_color


def write_measurement(out: Path, config: TimeLimitConfig, rows: list[dict[str, Any]]) -> None:
    """``success_frames.csv``, ``summary.{csv,md}``, ``limits.json`` and ``manifest.json``."""
    import dataclasses

    from bench.provenance import (
        atomic_write_json,
        make_manifest,
        staged_output_dir,
    )
    from protocols.tablefmt import write_table

    summary = summarise(rows)
    limits = chosen_limits(rows, max_frames=config.max_frames)
    with staged_output_dir(out, overwrite=True) as tmp:
        header = list(rows[0])
        paths = write_table(tmp, "success_frames", header, [list(r.values()) for r in rows],
                            title="Rollouts from held-out starts (success frame = frames)")
        sheader = list(summary[0])
        paths += write_table(
            tmp, "summary", sheader, [list(s.values()) for s in summary],
            title=f"Success frames per task, policy and domain (measurement limit "
                  f"{config.max_frames} frames)",
            notes=[f"Held-out starts {config.condition_offset}+, "
                   f"{config.starts_per_scene} per scene; real = ground-truth worlds, sim = "
                   "clean reconstructions; the paper profile's rig, image size and fisheye "
                   f"mode; background colours: {measured_colors(config)}.",
                   f"Chosen limit per task: ceil({MARGIN} x latest success / {ROUND}) x "
                   f"{ROUND}: " + ", ".join(f"{t} {v['limit']} (latest success "
                                            f"{v['latest_success']})"
                                            for t, v in limits.items())])
        atomic_write_json(tmp / "limits.json", {"rule": f"ceil({MARGIN} x latest success / "
                                                        f"{ROUND}) x {ROUND}",
                                                "limits": limits})
        paths.append(tmp / "limits.json")
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL, params=dataclasses.asdict(config), seed=0,
            outputs={p.name: p for p in paths},
            counts={"rollouts": len(rows), "successes": sum(r["success"] for r in rows)}))


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.demo.time_limits --out DIR [--starts N] [--max-frames N]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.demo.time_limits",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--tasks", default="cup,tape,pen", help="comma-separated tasks")
    parser.add_argument("--starts", type=int, default=TimeLimitConfig.starts_per_scene,
                        help="held-out starts per scene (count)")
    parser.add_argument("--max-frames", type=int, default=TimeLimitConfig.max_frames,
                        help="measurement time limit (10 Hz frames)")
    parser.add_argument("--domains", default="real,sim", help="real and/or sim")
    from bench.demo.run import BACKGROUND_COLORS

    parser.add_argument("--background-color", default=None, choices=BACKGROUND_COLORS,
                        help="simulated backgrounds' colours (bench demo --background-color) "
                        "[the paper profile's]")
    args = parser.parse_args(argv)

    if args.starts < 1 or args.max_frames < 1:
        parser.error("--starts and --max-frames must be >= 1")
    config = TimeLimitConfig(tasks=tuple(args.tasks.split(",")), starts_per_scene=args.starts,
                             max_frames=args.max_frames, domains=tuple(args.domains.split(",")),
                             background_color=args.background_color)
    try:
        rows = measure_success_frames(config)
    except ValueError as exc:  # BenchError included: one line, exit 2
        print(f"time_limits: error: {exc}", file=sys.stderr)
        return 2
    write_measurement(args.out, config, rows)
    print(f"wrote {args.out}: {chosen_limits(rows, max_frames=config.max_frames)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
