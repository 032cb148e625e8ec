"""Issue 32's fast paths beside their references, in one process, alternating.

Run (the numbers in the issue's closing note):

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_rollout_paths.py --rounds 3

- physics: a Cup / Tape / Pen episode of the noisy expert in ``obs_mode="state"`` with
  ``env.batched_physics`` True (a frame's physics steps in one ``mujoco.rollout`` call where
  the grasp rule is idle) vs False (the per-step loop); CPU ms per control frame, and the
  share of frames batched;
- mesh pass: the dual-fisheye observation of the Cup over the sample room
  (``render_cameras``, 64 px) with face culling + the cached cube-map remap vs every face
  drawn + :func:`bench.render.fisheye.render_cubemap_reference`; CPU ms per observation;
- observations: renders per episode of ``run_episode`` (blocking, and async with 250 ms)
  with and without ``video=True`` (a count: deterministic).

Every pair runs alternately ``--rounds`` times, so the machine's load hits both alike; the
ratio is the result (absolute times move with other users of the cores). Prints a table
and JSON. Outcomes are checked equal on the way (states, images, records).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")


def physics(scene, task: str, rounds: int) -> dict:
    """CPU ms per frame, batched vs per-step loop, and the batched share."""
    import gymnasium

    import bench.sim
    from bench.policies import make_policy

    env = gymnasium.make(bench.sim.ENV_IDS[task], scene=scene, obs_mode="state")
    unwrapped = env.unwrapped
    times: dict[bool, list[float]] = {True: [], False: []}
    digests: dict[bool, str] = {}
    frames = 0
    for _ in range(rounds):
        for batched in (False, True):
            unwrapped.batched_physics = batched
            policy = make_policy("noisy-expert", env, seed=0)
            sha = hashlib.sha256()
            frames = 0
            for condition in (0, 7):
                obs, info = env.reset(seed=condition)
                policy.reset(seed=condition)
                done = False
                while not done:
                    action = policy.act(obs, info)
                    start = time.process_time()
                    obs, _, terminated, truncated, info = env.step(action)
                    times[batched].append(time.process_time() - start)
                    frames += info["frames_executed"]
                    sha.update(unwrapped.world.data.qpos.tobytes())
                    done = terminated or truncated
            digests[batched] = sha.hexdigest()
    assert digests[True] == digests[False], f"{task}: batched physics changed a state"
    counts = unwrapped.world._stepper.counts
    env.close()
    per_frame = {b: 1000 * sum(t) / (frames * rounds) for b, t in times.items()}
    return {"loop_ms_per_frame": per_frame[False], "batched_ms_per_frame": per_frame[True],
            "ratio": per_frame[False] / per_frame[True], "frames": frames,
            "batched_share": counts["batched"] / max(1, frames * rounds),
            "replayed": counts["replayed"]}


def mesh_pass(scene, rounds: int, repeats: int = 30) -> dict:
    """CPU ms per dual-fisheye observation: culling + cached remap vs the references."""
    import gymnasium
    import mujoco

    import bench.render.fisheye as fisheye
    import bench.sim
    from bench.policies import make_policy

    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, cameras="yubi-dual",
                         image_size=(64, 64))
    unwrapped = env.unwrapped
    policy = make_policy("expert", env, seed=0)
    obs, info = env.reset(seed=0)
    policy.reset(seed=0)
    poses = []  # a few states of an expert episode: the gripper descending and grasping
    for _ in range(4):
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        poses.append(unwrapped.world.data.qpos.copy())
    renderer = unwrapped._get_renderer()
    fast = fisheye.render_cubemap
    times: dict[bool, list[float]] = {True: [], False: []}
    images: dict[bool, list[bytes]] = {True: [], False: []}
    try:
        for _ in range(rounds):
            for new in (False, True):
                renderer.mujoco.cull = new
                fisheye.render_cubemap = fast if new else fisheye.render_cubemap_reference
                images[new] = []
                for qpos in poses:
                    unwrapped.world.data.qpos[:] = qpos
                    mujoco.mj_forward(unwrapped.world.model, unwrapped.world.data)
                    start = time.process_time()
                    for _ in range(repeats):
                        out = renderer.render_cameras()
                    times[new].append((time.process_time() - start) / repeats)
                    images[new].append(b"".join(np.ascontiguousarray(out[k]).tobytes()
                                                for k in sorted(out)))
    finally:
        fisheye.render_cubemap = fast
        renderer.mujoco.cull = True
    assert images[True] == images[False], "culling / the cached remap changed a pixel"
    env.close()
    old, new = statistics.median(times[False]) * 1000, statistics.median(times[True]) * 1000
    return {"reference_ms": old, "fast_ms": new, "ratio": old / new}


def renders(scene) -> dict:
    """Observations rendered per episode with and without a video, blocking and async."""
    import gymnasium

    import bench.sim
    from bench.policies import make_policy
    from bench.sim.rollout import Execution, run_episode

    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, cameras="yubi-dual",
                         image_size=(32, 32), max_frames=80)
    renderer = env.unwrapped._get_renderer()
    draw = renderer.render_cameras
    count = [0]

    def counted():
        count[0] += 1
        return draw()

    renderer.render_cameras = counted
    out = {}
    for name, execution in (("blocking", Execution()), ("async-250ms", Execution("async", 250))):
        row = {}
        for video in (True, False):
            count[0] = 0
            record, _, _ = run_episode(env, make_policy("expert", env, seed=0), init_index=0,
                                       execution=execution, video=video)
            row["video" if video else "queries_only"] = count[0]
            row["queries"] = record.policy_queries
        out[name] = row
    env.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternations of each pair")
    args = parser.parse_args()
    from bench.scene.sample import make_sample_scene

    scene = make_sample_scene(seed=0, n_gaussians=6000)
    results = {"physics": {t: physics(scene, t, args.rounds) for t in ("cup", "tape", "pen")},
               "mesh_pass": mesh_pass(scene, args.rounds), "renders": renders(scene)}
    print(f"{'physics':<10} {'loop ms/frame':>14} {'batched ms/frame':>17} {'ratio':>6} "
          f"{'batched share':>14}")
    for task, r in results["physics"].items():
        print(f"{task:<10} {r['loop_ms_per_frame']:14.3f} {r['batched_ms_per_frame']:17.3f} "
              f"{r['ratio']:6.2f} {r['batched_share']:14.2f}")
    m = results["mesh_pass"]
    print(f"observation (dual 64 px fisheyes, sample room): reference {m['reference_ms']:.2f} ms,"
          f" culled + cached remap {m['fast_ms']:.2f} ms, ratio {m['ratio']:.2f}")
    for name, r in results["renders"].items():
        print(f"renders per episode, {name}: {r['video']} with a video, {r['queries_only']} "
              f"without ({r['queries']} policy queries)")
    print(json.dumps({"args": vars(args), "results": results}))


if __name__ == "__main__":
    main()
