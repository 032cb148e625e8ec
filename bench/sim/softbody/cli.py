"""``bench softbody rollout``: episodes of the deformable rope task (``splatbench/Rope-v0``).

Outputs in ``--out`` (staged, renamed into place on success): ``episodes.json`` (summary +
per-trial :class:`bench.sim.rollout.EpisodeRecord`), ``episodes.csv``, ``config.json``
(resolved EnvConfig and run parameters), ``manifest.json``, ``videos/episode_XXXX.gif``
(``--video``: the wrist view the policy saw) and ``states/episode_XXXX.csv``
(``--save-states``: the per-frame state stream, as ``bench rollout`` writes it).

The rollout loop is :func:`bench.sim.rollout.run_episode`, the one ``bench rollout`` and the
study runner use, so a perturbed scene bundle (``bench perturb``) runs here unchanged.
"""

from __future__ import annotations

import argparse
import sys

TOOL = "softbody-rollout/1"
POLICIES = ("expert", "hold")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench softbody``."""
    from bench.sim.config import OBS_MODES
    p = subparsers.add_parser("softbody", help="deformable (spring-mass) tasks: rope routing")
    sub = p.add_subparsers(dest="softbody_command", required=True)
    r = sub.add_parser("rollout", help="roll a policy out in splatbench/Rope-v0",
                       description="Episodes of the rope-routing task from initial conditions "
                       "--seed-start, --seed-start+1, ...; headless rendering uses MUJOCO_GL=egl.")
    r.add_argument("--scene", required=True, help="scene bundle directory (scene.json)")
    r.add_argument("--policy", default="expert", choices=POLICIES,
                   help="expert (privileged scripted) or hold")
    r.add_argument("--episodes", type=int, default=3, help="number of episodes")
    r.add_argument("--seed-start", type=int, default=0, help="first condition")
    r.add_argument("--obs-mode", default="rgb", choices=OBS_MODES,
                   help="rgb renders the wrist view (rope Gaussians + background)")
    r.add_argument("--max-frames", type=int, default=600, help="time limit, frames [600]")
    r.add_argument("--image-size", type=int, nargs=2, default=[128, 128],
                   metavar=("H", "W"), help="wrist image size, pixels [128 128]")
    r.add_argument("--video", action="store_true", help="write the wrist view as a GIF")
    r.add_argument("--save-states", action="store_true", help="write per-frame state streams")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    r.set_defaults(func=run_rollout)


class _Hold:
    name = "hold"

    def __init__(self, env) -> None:
        self.env = env.unwrapped

    def reset(self, seed=None) -> None:
        pass

    def act(self, obs, info):
        import numpy as np

        row = np.array([0, 0, 0, 0, 0, 0, self.env.world.robot.max_opening], np.float32)
        if self.env.config.control == "chunk":
            return np.tile(row, (self.env.chunk_size, 1))
        return row


def run_rollout(args: argparse.Namespace) -> int:
    """Handler of ``bench softbody rollout``."""
    from bench.errors import BenchError
    from bench.safety import (
        MAX_EPISODES,
        check_episode_frames,
        check_image_size,
        preflight_output_dir,
    )

    if args.episodes < 1 or args.seed_start < 0:
        raise BenchError("--episodes must be >= 1 and --seed-start >= 0")
    if args.episodes > MAX_EPISODES:  # issue 30: checked before any work
        raise BenchError(f"--episodes {args.episodes:,} is above the limit of {MAX_EPISODES:,}; "
                         "split the run into several --seed-start blocks")
    check_episode_frames(args.max_frames, what="--max-frames")
    check_image_size(*args.image_size, what="--image-size")
    inputs = [("--scene", args.scene)]
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)  # before work
    import csv
    import io
    from pathlib import Path

    import gymnasium

    import bench.sim  # noqa: F401 - registers splatbench/Rope-v0
    from bench.progress import progress as progress_bar
    from bench.provenance import (
        atomic_write_bytes,
        atomic_write_json,
        make_manifest,
        staged_output_dir,
    )
    from bench.scene.bundle import SCENE_FILE, load_scene
    from bench.sim.rollout import run_episode, state_stream_columns, state_stream_rows
    from bench.sim.softbody.rope import rope_expert

    scene_dir = Path(args.scene)
    if not (scene_dir / SCENE_FILE).is_file():
        raise BenchError(f"{scene_dir} is not a scene bundle (no {SCENE_FILE}); make one with "
                         "`bench scene sample --out DIR`")
    scene = load_scene(scene_dir)
    env = gymnasium.make("splatbench/Rope-v0", scene=scene, obs_mode=args.obs_mode,
                         max_frames=args.max_frames, image_size=tuple(args.image_size))
    policy = rope_expert(env) if args.policy == "expert" else _Hold(env)
    records, outputs = [], {}
    try:
        with staged_output_dir(args.out, overwrite=args.overwrite,
                               inputs=inputs) as tmp:
            init_indices = range(args.seed_start, args.seed_start + args.episodes)
            bar = progress_bar(init_indices, desc="rollout rope", unit="ep", file=sys.stderr)
            for episode, init_index in enumerate(bar):
                states = [] if args.save_states else None
                record, frames, _ = run_episode(
                    env, policy, init_index=init_index, episode=episode, policy_name=args.policy,
                    record_frames=args.video, states=states)
                records.append(record)
                if args.video and frames:
                    import imageio.v3 as iio

                    name = f"videos/episode_{episode:04d}.gif"
                    data = iio.imwrite("<bytes>", frames, extension=".gif", duration=800, loop=0)
                    atomic_write_bytes(tmp / name, data)
                    outputs[name] = tmp / name
                if args.save_states:
                    name = f"states/episode_{episode:04d}.csv"
                    buffer = io.StringIO()
                    writer = csv.writer(buffer, lineterminator="\n")
                    writer.writerow(state_stream_columns(list(states[0].objects)))
                    writer.writerows(state_stream_rows(states))
                    atomic_write_bytes(tmp / name, buffer.getvalue().encode("utf-8"))
                    outputs[name] = tmp / name
            rows = [r.to_dict() for r in records]
            successes = sum(r.success for r in records)
            summary = {"episodes": len(rows), "successes": successes,
                       "success_rate": successes / len(rows),
                       "mean_progress_final": sum(r.progress_final for r in records) / len(rows)}
            atomic_write_json(tmp / "episodes.json", {"summary": summary, "episodes": rows})
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            atomic_write_bytes(tmp / "episodes.csv", buffer.getvalue().encode("utf-8"))
            unwrapped = env.unwrapped
            params = {"scene": scene.name, "task": "rope", "policy": args.policy,
                      "episodes": args.episodes, "seed_start": args.seed_start,
                      "env": unwrapped.config, "spring_mass": unwrapped.world.sm_config,
                      "grasp": unwrapped.world.grasp.config, "execute": unwrapped.execute,
                      "chunk_size": unwrapped.chunk_size, "max_frames": unwrapped.max_frames}
            atomic_write_json(tmp / "config.json", params)
            outputs = {"episodes.json": tmp / "episodes.json",
                       "episodes.csv": tmp / "episodes.csv",
                       "config.json": tmp / "config.json", **outputs}
            inputs = {"scene.json": scene_dir / SCENE_FILE}
            if (scene_dir / "background.ply").is_file():
                inputs["background.ply"] = scene_dir / "background.ply"
            manifest = make_manifest(tool=TOOL, params=params, seed=args.seed_start,
                                     inputs=inputs, outputs=outputs,
                                     counts={"episodes": len(rows), "successes": successes})
            atomic_write_json(tmp / "manifest.json", manifest)
    finally:
        env.close()
    print(f"rope / {args.policy}: {successes}/{len(rows)} successes, mean final progress "
          f"{summary['mean_progress_final']:.3f} -> {args.out}")
    return 0
