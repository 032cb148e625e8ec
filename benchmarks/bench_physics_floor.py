"""The physics floor of a study design: what MuJoCo alone costs, before any render or policy.

Run (the docs/speed/physics-floor.md numbers):

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_physics_floor.py --profile paper \
        --doc docs/speed/physics-floor.md

Per task of the demo profile, in the world the study builds (the "real" domain's env: the
physics of both domains is the same MuJoCo model), the TCP held at its home pose with the
gripper open, one control frame (``substeps`` physics steps of ``physics_dt``) stepped:

- ``rollout``: the frame's steps in one ``mujoco.rollout`` call (the study's fast path,
  :class:`bench.sim.world._FrameStepper`), no grasp rule, no Python per step;
- ``mj_step``: the same steps as a plain ``mujoco.mj_step`` loop.

CPU seconds per frame (``time.process_time``, one thread, median of repeats) times the
design's frames gives the floor: the wall time of the physics alone on ``--cores`` cores,
for the worst case (every rollout runs to its time limit) and, with ``--measured-frames``,
for one measured start per (domain, task, policy) (``bench.demo.run.measure_rollout_costs``).
Nothing here changes an outcome; it bounds what any speed-up that keeps the physics can reach.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")


def frame_cost(task: str, spec, *, frames: int, repeats: int) -> dict[str, float]:
    """CPU seconds per control frame of ``task``'s world: batched rollout and mj_step loop."""
    import mujoco
    import numpy as np

    from bench.study.world_domain import make_domain_env

    scene = spec.scene_names[0]
    env = make_domain_env(spec, scene=scene, task=task, domain="real", bundle=None,
                          overrides={"image_size": spec.image_size})
    try:
        env.reset(seed=0)
        world = env.unwrapped.world
        n = env.unwrapped.config.substeps
        home = world.robot.tcp_pose(world.data)
        positions = np.repeat(home[:3, 3][None], n, axis=0)
        from bench.geometry import mat_to_quat

        quats = np.repeat(np.asarray(mat_to_quat(home[:3, :3]))[None], n, axis=0)
        opening = float(world.robot.max_opening)
        stepper = world._stepper
        model, data = world.model, world.data
        out = {"substeps": n, "physics_dt": float(model.opt.timestep)}
        batched, plain = [], []
        for _ in range(repeats):
            tick = time.process_time()
            for _ in range(frames):
                stepper.run(positions, quats, opening, check_open=False)
            batched.append((time.process_time() - tick) / frames)
            tick = time.process_time()
            for _ in range(frames):
                for k in range(n):
                    world.robot.command(data, position=positions[k], quaternion=quats[k],
                                        opening=opening)
                    mujoco.mj_step(model, data)
            plain.append((time.process_time() - tick) / frames)
        out["rollout_s_per_frame"] = statistics.median(batched)
        out["mj_step_s_per_frame"] = statistics.median(plain)
        return out
    finally:
        env.close()


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def design_frames(config) -> dict[str, dict[str, int]]:
    """Per task: rollouts and frames if every rollout runs to its limit."""
    from bench.study.plan import rollout_cells

    spec = config.study_spec()
    out: dict[str, dict[str, int]] = {}
    for cell in rollout_cells(spec):
        limit = spec.frames_limit(cell.scene, cell.task) or 600
        row = out.setdefault(cell.task, {"rollouts": 0, "limit_frames": 0})
        row["rollouts"] += cell.trials * len(cell.policies)
        row["limit_frames"] += cell.trials * len(cell.policies) * limit
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--time-limits", default="profile", choices=("profile", "yubi"))
    parser.add_argument("--frames", type=int, default=200, help="frames timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--measured-frames", action="store_true",
                        help="also run one start per (domain, task, policy) for its frames")
    parser.add_argument("--doc", default=None, help="write the Markdown table here")
    args = parser.parse_args()

    from bench.demo.run import DemoConfig, measure_rollout_costs

    config = DemoConfig(out=None, profile=args.profile, time_limits=args.time_limits)
    spec = config.study_spec()
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    design = design_frames(config)
    rows = []
    measured: dict = {}
    if args.measured_frames:
        measure_rollout_costs(spec, measured)
    for task, counts in design.items():
        cost = frame_cost(task, spec, frames=args.frames, repeats=args.repeats)
        row = {"task": task, **counts, **cost}
        row["floor_worst_min"] = counts["limit_frames"] * cost["rollout_s_per_frame"] \
            / args.cores / 60
        if measured:
            per = [f for (domain, t, _), f in measured.items() if t == task]
            mean = sum(per) / len(per)
            limit = counts["limit_frames"] / counts["rollouts"]
            row["measured_frames_mean"] = mean
            row["floor_measured_min"] = row["floor_worst_min"] * mean / limit
        rows.append(row)
    total_worst = sum(r["floor_worst_min"] for r in rows)
    total_measured = sum(r.get("floor_measured_min", 0.0) for r in rows) if measured else None
    print(json.dumps({"rows": rows, "total_worst_min": total_worst,
                      "total_measured_min": total_measured}, indent=1))
    if args.doc:
        lines = [
            "# The physics floor of the paper design (issue 32)", "",
            "Generated by `benchmarks/bench_physics_floor.py`; do not edit by hand.", "",
            "```bash",
            "MUJOCO_GL=egl .venv/bin/python benchmarks/bench_physics_floor.py --profile "
            f"{args.profile} --time-limits {args.time_limits} --frames {args.frames} "
            f"--repeats {args.repeats} --cores {args.cores}"
            + (" --measured-frames" if measured else "") + f" --doc {args.doc}",
            "```", "",
            f"Run {started} UTC on {_cpu_name()}, {os.cpu_count()} logical cores (load "
            f"average {load} at the start), one thread. MuJoCo alone, TCP held at home, "
            "gripper open (the cheapest frame: no contact with the objects); CPU seconds per "
            "10 Hz control frame; floor = frames x seconds per frame / cores.", "",
            "| task | rollouts | frames at the limits | substeps x dt | rollout ms / frame | "
            "mj_step loop ms / frame | floor, all to the limit (min) |"
            + (" mean frames, one measured start each | floor at those frames (min) |"
               if measured else ""),
            "|---|---:|---:|---|---:|---:|---:|" + ("---:|---:|" if measured else ""),
        ]
        for r in rows:
            line = (f"| {r['task']} | {r['rollouts']:,} | {r['limit_frames']:,} | "
                    f"{r['substeps']} x {r['physics_dt'] * 1000:g} ms | "
                    f"{r['rollout_s_per_frame'] * 1000:.2f} | {r['mj_step_s_per_frame'] * 1000:.2f}"
                    f" | {r['floor_worst_min']:.0f} |")
            if measured:
                line += f" {r['measured_frames_mean']:.0f} | {r['floor_measured_min']:.0f} |"
            lines.append(line)
        lines.append(f"| all | {sum(r['rollouts'] for r in rows):,} | "
                     f"{sum(r['limit_frames'] for r in rows):,} | | | | {total_worst:.0f} |"
                     + (f" | {total_measured:.0f} |" if measured else ""))
        lines.append("")
        with open(args.doc, "w") as handle:
            handle.write("\n".join(lines))


if __name__ == "__main__":
    main()
