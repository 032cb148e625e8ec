"""Cost of a "real"-domain observation (MuJoCo ground-truth room) vs the simulated domain.

Run (the README / docs/demo-worlds.md numbers):

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_demo_worlds.py --size 64 --queries 5

Side by side, same task (Cup), same expert actions, yubi-dual rig (two 200-degree
fisheyes), per policy query (one executed chunk + both wrist images):
- real domain, gt-duo room, shadows on (the default of ``make_real_env``), sensor model;
- real domain, shadows off;
- simulated domain: the 20k-Gaussian sample room composited with MuJoCo objects;
- no rendering (obs_mode="state"): the physics alone.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")


def seconds_per_query(make_env, queries: int) -> float:
    from bench.policies.base import make_policy

    env = make_env()
    policy = make_policy("expert", env)
    obs, info = env.reset(seed=0)  # builds the renderer (not timed)
    start = time.perf_counter()
    for _ in range(queries):
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            obs, info = env.reset(seed=0)
    elapsed = (time.perf_counter() - start) / queries
    env.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--queries", type=int, default=5)
    args = parser.parse_args()
    from bench.scene.sample import make_sample_scene
    from bench.sim.env import SplatBenchEnv
    from bench.worlds.real import make_real_env

    size = (args.size, args.size)
    scene = make_sample_scene(seed=0, n_gaussians=20000)
    rows = {
        "real gt-duo, shadows on": lambda: make_real_env("gt-duo", "cup", image_size=size),
        "real gt-duo, shadows off": lambda: make_real_env("gt-duo", "cup", image_size=size,
                                                          shadows=False),
        "sim sample room (20k Gaussians)": lambda: SplatBenchEnv(
            "cup", scene, cameras="yubi-dual", image_size=size),
        "state only (no rendering)": lambda: SplatBenchEnv("cup", scene, obs_mode="state"),
    }
    results = {name: seconds_per_query(make, args.queries) for name, make in rows.items()}
    base = results["sim sample room (20k Gaussians)"]
    for name, sec in results.items():
        print(f"{name:34s} {sec * 1000:9.1f} ms/query  {sec / base:6.2f}x sim")
    print(json.dumps({"size": args.size, "queries": args.queries, "seconds": results}))


if __name__ == "__main__":
    main()
