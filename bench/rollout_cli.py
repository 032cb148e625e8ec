"""``bench rollout``: run a policy for N episodes in one scene and task, write per-trial records.

Outputs in ``--out`` (written to a temp folder, renamed into place on success)::

    episodes.json   per-trial records (bench.sim.rollout.EpisodeRecord) + summary
    episodes.csv    the same records, one row per episode
    config.json     the resolved EnvConfig, policy, scene and run parameters
    manifest.json   tool id, params, seed, sha256 of the scene inputs and of every output
    videos/         episode_XXXX.gif|mp4 of the wrist view the policy saw (--video)
    states/         episode_XXXX.csv: the raw per-frame state stream (--save-states): TCP pose,
                    gripper, grasp flags, success predicate (per frame and declared), progress,
                    object poses

Stdlib-only imports at module level; numpy/mujoco/torch load inside the handler.
"""

from __future__ import annotations

import argparse
import sys

TOOL = "rollout/1"
#: EnvConfig fields exposed as ``bench rollout`` flags (``--obs-mode`` for ``obs_mode``).
ENV_FLAGS = ("task", "robot", "cameras", "obs_mode", "background", "fisheye_mode",
             "render_backend", "image_size", "execute", "max_frames", "controller_gains",
             "shadows", "min_table_gaussians")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench rollout``."""
    p = subparsers.add_parser(
        "rollout",
        help="run policy episodes in the simulator, write per-trial results",
        description="Roll a registered policy out for --episodes initial conditions "
        "(--seed-start, --seed-start+1, ...) of a task's fixed grid in one scene bundle. "
        "Headless rendering uses MUJOCO_GL=egl.",
    )
    from bench.cli_fields import add_dataclass_arguments
    from bench.sim.config import EnvConfig, GraspConfig

    p.add_argument("--scene", required=True, help="scene bundle directory (scene.json)")
    p.add_argument(
        "--policy",
        default="expert",
        help="registered policy: expert, noisy-expert, noisy-expert-8mm, noisy-expert-12mm, "
        "visual-servo, visual-glance (need --obs-mode rgb), random, hold, or an entry point "
        "package.module:factory (docs/policies.md)",
    )
    p.add_argument("--episodes", type=int, default=5, help="number of episodes (count)")
    p.add_argument(
        "--seed-start",
        type=int,
        default=0,
        help="first initial-condition index (grid index; also seeds policy noise)",
    )
    p.add_argument("--policy-seed", type=int, default=0,
                   help="base seed of the policy's own RNG")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    env = p.add_argument_group("environment (bench.sim.config.EnvConfig)")
    add_dataclass_arguments(env, EnvConfig, only=ENV_FLAGS)
    add_dataclass_arguments(env, GraspConfig, only=("mode", "force_threshold"),
                            flags={"mode": "grasp"})
    p.add_argument("--policy-kwargs", default="{}",
                   help="policy factory keyword arguments as a JSON object, e.g. "
                   "'{\"port\": 8000}' for --policy openpi")
    p.add_argument("--latency-ms", type=float, default=None,
                   help="asynchronous execution with this injected policy latency, ms of "
                   "simulated time (docs/policies.md) [default: blocking]")
    p.add_argument("--video", action="store_true", help="write the wrist view of each episode")
    p.add_argument(
        "--save-states",
        action="store_true",
        help="write each episode's per-frame state stream (metres, quaternions w x y z) as CSV",
    )
    p.add_argument(
        "--video-format",
        default="gif",
        choices=["gif", "mp4"],
        help="gif (always available) or mp4 (needs imageio-ffmpeg)",
    )
    p.set_defaults(func=run_rollout)


def _validate(args: argparse.Namespace) -> None:
    from bench.errors import BenchError

    if args.episodes < 1:
        raise BenchError(f"--episodes must be >= 1, got {args.episodes}")
    if args.seed_start < 0:
        raise BenchError(f"--seed-start must be >= 0 (a grid index), got {args.seed_start}")
    if args.policy_seed < 0:
        raise BenchError(f"--policy-seed must be >= 0, got {args.policy_seed}")
    from bench.safety import MAX_EPISODES

    if args.episodes > MAX_EPISODES:
        raise BenchError(f"--episodes {args.episodes:,} is above the limit of {MAX_EPISODES:,}; "
                         "split the run into several --seed-start blocks")
    from bench.safety import check_image_size, preflight_output_dir

    check_image_size(*args.image_size, what="--image-size")
    for flag, value in (("--execute", args.execute), ("--max-frames", args.max_frames)):
        if value is not None and value < 1:
            raise BenchError(f"{flag} must be >= 1 frame, got {value}")
    if args.max_frames is not None:  # the task file's time_limit_frames is capped when read
        from bench.safety import check_episode_frames

        check_episode_frames(args.max_frames, what="--max-frames")
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=[("--scene", args.scene)])
    if args.video and args.obs_mode != "rgb":
        raise BenchError("--video needs --obs-mode rgb (state mode renders nothing)")
    if args.video and args.cameras != "wrist":
        raise BenchError("--video records the wrist_rgb view; use --cameras wrist with --video "
                         "(state streams work with every rig)")
    if args.min_table_gaussians < 0:
        raise BenchError(f"--min-table-gaussians must be >= 0 (0 skips the check), got "
                         f"{args.min_table_gaussians}")
    if args.latency_ms is not None and not 0 <= args.latency_ms < 1e6:
        raise BenchError(f"--latency-ms must be in [0, 1e6) ms, got {args.latency_ms}")
    _policy_kwargs(args.policy_kwargs)
    if args.video and args.video_format == "mp4":
        import importlib.util

        if importlib.util.find_spec("imageio_ffmpeg") is None:
            raise BenchError(
                "--video-format mp4 needs imageio-ffmpeg; pip install imageio-ffmpeg "
                "or use --video-format gif"
            )


def _write_video(path, frames, *, fps: float, fmt: str) -> None:
    import imageio.v3 as iio

    from bench.provenance import atomic_write_bytes

    if fmt == "gif":
        data = iio.imwrite("<bytes>", frames, extension=".gif", duration=1000.0 / fps, loop=0)
    else:
        data = iio.imwrite("<bytes>", frames, extension=".mp4", fps=fps)
    atomic_write_bytes(path, data)


def _write_states(path, states, objects) -> None:
    import csv
    import io

    from bench.provenance import atomic_write_bytes
    from bench.sim.rollout import state_stream_columns, state_stream_rows

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(state_stream_columns(objects))
    writer.writerows(state_stream_rows(states))
    atomic_write_bytes(path, buffer.getvalue().encode("utf-8"))


def run_rollout(args: argparse.Namespace) -> int:
    """Handler of ``bench rollout``: make the env, run the episodes, write records + manifest."""
    _validate(args)
    from bench.policies import make_policy
    from bench.policies.entry import validate_ref
    from bench.provenance import staged_output_dir
    from bench.sim.tasks import get_task

    validate_ref(args.policy)  # "did you mean" / entry-point import errors before heavy work
    scene_dir, scene = _load_scene(args.scene)
    task = get_task(args.task, scene_root=scene_dir)
    from bench.policies.base import check_policy_task

    check_policy_task(args.policy, task)  # e.g. the rigid expert on the rope
    env = _make_env(args, task, scene)
    try:
        policy = make_policy(args.policy, env, seed=args.policy_seed,
                             **_policy_kwargs(args.policy_kwargs))
        with staged_output_dir(args.out, overwrite=args.overwrite,
                               inputs=[("--scene", args.scene)]) as tmp:
            records, outputs, wall = _run_episodes(args, env, policy, task, tmp)
            summary = _write_records(tmp, records, outputs)
            _write_config_and_manifest(args, env.unwrapped, scene, scene_dir, tmp, outputs,
                                       summary)
    finally:
        env.close()
    print(
        f"{task.name} / {args.policy}: {summary['successes']}/{summary['episodes']} successes, "
        f"mean final progress {summary['mean_progress_final']:.3f}, {wall:.1f} s -> {args.out}"
    )
    return 0


def _policy_kwargs(text: str) -> dict:
    import json

    from bench.errors import BenchError

    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"--policy-kwargs is not JSON ({exc.msg}); pass an object like "
                         "'{\"port\": 8000}'") from None
    if not isinstance(kwargs, dict):
        raise BenchError("--policy-kwargs must be a JSON object")
    return kwargs


def _load_scene(scene: str):
    from pathlib import Path

    from bench.scene.bundle import SCENE_FILE, load_scene

    scene_dir = Path(scene)
    if not (scene_dir / SCENE_FILE).is_file():
        raise FileNotFoundError(
            f"{scene_dir} is not a scene bundle (no {SCENE_FILE}); "
            "make one with `bench scene sample --out DIR`"
        )
    return scene_dir, load_scene(scene_dir)


def _is_shipped(task) -> bool:
    """Whether ``task`` is a registered task (its registry id names it in manifests)."""
    from bench.sim.tasks import TASKS

    return task.name in TASKS and TASKS.get(task.name) is task


def _make_env(args: argparse.Namespace, task, scene):
    import bench.sim
    from bench.sim.grasp import GraspConfig

    return bench.sim.make_env(
        task.name if _is_shipped(task) else task,
        scene,
        robot=args.robot,
        cameras=args.cameras,
        obs_mode=args.obs_mode,
        background=args.background,
        fisheye_mode=args.fisheye_mode,
        render_backend=args.render_backend,
        image_size=tuple(args.image_size),
        grasp=GraspConfig(mode=args.grasp, force_threshold=args.force_threshold),
        execute=args.execute,
        max_frames=args.max_frames,
        controller_gains=args.controller_gains,
        shadows=args.shadows,
        min_table_gaussians=args.min_table_gaussians,
    )


def _state_objects(task) -> list[str]:
    """Names of the tracked objects in the state stream (the rope: its end/middle/far end)."""
    names = getattr(task, "state_objects", None)
    return list(names) if names is not None else [o.name for o in task.objects]


def _run_episodes(args: argparse.Namespace, env, policy, task, tmp):
    """Roll out every condition; write videos / state streams into ``tmp`` as they finish.

    Returns:
        (records, {output name: path} of the videos and state streams, policy wall seconds).
    """
    from bench.progress import progress as progress_bar
    from bench.sim.rollout import Execution, run_episode

    execution = (Execution() if args.latency_ms is None
                 else Execution(mode="async", latency_ms=args.latency_ms))
    init_indices = range(args.seed_start, args.seed_start + args.episodes)
    records, outputs, wall, latencies = [], {}, 0.0, []
    for episode, init_index in enumerate(
        progress_bar(init_indices, desc=f"rollout {task.name}", unit="ep", file=sys.stderr)
    ):
        states = [] if args.save_states else None
        record, frames, seconds = run_episode(
            env, policy, init_index=init_index, episode=episode, policy_name=args.policy,
            record_frames=args.video, states=states, execution=execution,
            latencies=latencies,
        )
        records.append(record)
        wall += seconds
        if args.save_states:
            name = f"states/episode_{episode:04d}.csv"
            _write_states(tmp / name, states, _state_objects(task))
            outputs[name] = tmp / name
        if args.video:
            name = f"videos/episode_{episode:04d}.{args.video_format}"
            fps = env.unwrapped.config.control_hz / env.unwrapped.execute
            _write_video(tmp / name, frames, fps=fps, fmt=args.video_format)
            outputs[name] = tmp / name
    import numpy as np  # query latency is wall-clock: printed, never written into the outputs

    if latencies:
        print(f"policy query latency: median {np.median(latencies):.2f} ms, p95 "
              f"{np.percentile(latencies, 95):.2f} ms over {len(latencies)} queries",
              file=sys.stderr)
    return records, outputs, wall


def _write_records(tmp, records, outputs: dict) -> dict:
    """episodes.json (summary + records) and episodes.csv; returns the summary."""
    import csv
    import io

    from bench.provenance import atomic_write_bytes, atomic_write_json

    rows = [r.to_dict() for r in records]
    successes = sum(r.success for r in records)
    summary = {
        "episodes": len(records),
        "successes": successes,
        "success_rate": successes / len(records),
        "mean_progress_final": sum(r.progress_final for r in records) / len(records),
        "failures": sum(bool(r.failure) for r in records),
        "truncated": sum(r.truncated for r in records),
        "errors": sum(r.status == "error" for r in records),  # policy faults, not failures
    }
    atomic_write_json(tmp / "episodes.json", {"summary": summary, "episodes": rows})
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(tmp / "episodes.csv", buffer.getvalue().encode("utf-8"))
    outputs["episodes.json"] = tmp / "episodes.json"
    outputs["episodes.csv"] = tmp / "episodes.csv"
    return summary


def _write_config_and_manifest(args, unwrapped, scene, scene_dir, tmp, outputs, summary):
    """config.json (resolved run parameters) and manifest.json (hashes of inputs/outputs)."""
    from bench.policies import POLICIES
    from bench.provenance import atomic_write_json, make_manifest
    from bench.scene.bundle import SCENE_FILE

    params = {
        "scene": scene.name,
        "task": unwrapped.task.name,
        "policy": args.policy,
        "policy_meta": (POLICIES.entry(args.policy).meta if args.policy in POLICIES
                        else {"entry_point": args.policy}),
        "episodes": args.episodes,
        "seed_start": args.seed_start,
        "policy_seed": args.policy_seed,
        "env": unwrapped.config,
        "chunk_size": unwrapped.chunk_size,
        "execute": unwrapped.execute,
        "max_frames": unwrapped.max_frames,
        "robot": unwrapped.world.robot.name,
        "cameras": [c.name for c in unwrapped.rig],
        "instruction": unwrapped.task.instruction,
        "video": args.video,
        "save_states": args.save_states,
        "video_format": args.video_format if args.video else None,
    }
    atomic_write_json(tmp / "config.json", params)
    outputs = {  # the order of earlier manifests: records, config, videos, state streams
        **{k: v for k, v in outputs.items() if k.startswith("episodes.")},
        "config.json": tmp / "config.json",
        **{k: v for k, v in outputs.items() if k.startswith("videos/")},
        **{k: v for k, v in outputs.items() if k.startswith("states/")},
    }
    inputs = {"scene.json": scene_dir / SCENE_FILE}
    if not _is_shipped(unwrapped.task) and unwrapped.task.source:
        inputs["task"] = unwrapped.task.source
    if (scene_dir / "background.ply").is_file():
        inputs["background.ply"] = scene_dir / "background.ply"
    manifest = make_manifest(
        tool=TOOL, params=params, seed=args.seed_start, inputs=inputs, outputs=outputs,
        counts={"episodes": summary["episodes"], "successes": summary["successes"]},
    )
    atomic_write_json(tmp / "manifest.json", manifest)
