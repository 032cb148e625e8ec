"""Per-rollout cost of the demo's two domains: simulated (a scene bundle) vs "real" (a world).

Run (the docs/demo.md numbers):

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_demo_rollouts.py --size 64 --trials 2

Side by side in one process, the same policies, task, starts, image size and time limit,
each through the env the study itself builds (:func:`bench.study.world_domain.make_domain_env`,
one env per domain, reused across trials as a study worker does):

- ``sim``: the simulated domain on the scene's clean bundle (the demo's shipped
  reconstruction when present, else the sample room), Gaussian background composited;
- ``real``: the MuJoCo ground-truth world with shadows on (the world's look) and sensor;
- ``real-noshadow``: the same with ``shadows: false`` (the cheaper option);
- ``sim-direct`` (optional): ``sim`` with the background fisheye drawn directly
  (``deployment.fisheye_mode = "direct"``) instead of through a cube map.

Prints seconds per rollout, frames and policy queries per rollout, and the ratios to ``sim``
(the meaningful part on a shared machine) and the CPU seconds of this process per rollout
(less sensitive to other users' load than wall time), as a table and as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")


def _spec(args: argparse.Namespace, shadows: bool):
    from bench.study.spec import StudySpec

    return StudySpec(name="bench", sample_scenes={args.scene: 0}, tasks=(args.task,),
                     policies={args.task: tuple(args.policies.split(","))},
                     image_size=(args.size, args.size), max_frames=args.max_frames,
                     real_domain="world",
                     real_world={"worlds": {args.scene: args.world}, "cameras": args.cameras,
                                 "shadows": shadows})


def time_domain(spec, domain: str, bundle, trials: int, fisheye_mode: str = "cubemap"
                ) -> dict[str, float]:
    """Mean wall seconds, frames and queries per rollout of both policies in ``domain``."""
    import bench.policies.visual  # noqa: F401 - registers the visual policies
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode
    from bench.study.plan import init_index
    from bench.study.world_domain import make_domain_env

    scene, task = spec.scene_names[0], spec.tasks[0]
    overrides = {"image_size": spec.image_size, "max_frames": spec.frames_limit(scene, task),
                 "render_backend": spec.render_backend, "fisheye_mode": fisheye_mode}
    started = time.perf_counter()
    env = make_domain_env(spec, scene=scene, task=task, domain=domain, bundle=bundle,
                          overrides=overrides)
    setup = time.perf_counter() - started
    seconds, cpu, frames, queries, successes = [], [], [], [], 0
    try:
        for name in spec.policies[task]:
            policy = make_policy(name, env, seed=spec.seed)
            for trial in range(trials):
                start, start_cpu = time.perf_counter(), time.process_time()
                record, _, _ = run_episode(env, policy, init_index=init_index(
                    spec, "sim" if domain == "sim" else "real", trial), episode=trial)
                seconds.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                frames.append(record.frames)
                queries.append(record.policy_queries)
                successes += int(record.success)
    finally:
        env.close()
    n = len(seconds)
    return {"s_per_rollout": sum(seconds) / n, "cpu_s_per_rollout": sum(cpu) / n,
            "frames": sum(frames) / n,
            "queries": sum(queries) / n, "ms_per_query": 1000 * sum(seconds) / sum(queries),
            "successes": successes, "rollouts": n, "setup_s": setup}


def clean_bundle(args: argparse.Namespace):
    """The shipped reconstruction of ``--world`` when present, else the sample room."""
    import dataclasses

    try:
        from bench.demo.build import shipped_bundle
        from bench.scene.bundle import load_scene

        return load_scene(shipped_bundle(args.world, "clean")), "shipped reconstruction"
    except (ImportError, FileNotFoundError, ValueError):
        from bench.scene.sample import make_sample_scene

        made = make_sample_scene(seed=0, n_gaussians=args.gaussians)
        return dataclasses.replace(made, name=args.scene), f"sample room ({args.gaussians})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--trials", type=int, default=2, help="rollouts per policy and domain")
    parser.add_argument("--task", default="cup")
    parser.add_argument("--policies", default="visual-servo,visual-glance")
    parser.add_argument("--cameras", default="wrist", choices=("wrist", "yubi-dual"))
    parser.add_argument("--max-frames", type=int, default=200)
    parser.add_argument("--world", default="gt-duo")
    parser.add_argument("--scene", default="duo")
    parser.add_argument("--gaussians", type=int, default=20000)
    parser.add_argument("--domains", default="sim,real,real-noshadow",
                        help="comma-separated: sim, sim-direct (Gaussian background drawn as a "
                        "direct fisheye, deployment fisheye_mode), real, real-noshadow")
    args = parser.parse_args()
    bundle, source = clean_bundle(args)
    results = {}
    for domain in args.domains.split(","):
        spec = _spec(args, shadows=domain != "real-noshadow")
        kind = "sim" if domain.startswith("sim") else "real"
        results[domain] = time_domain(spec, kind, bundle, args.trials,
                                      "direct" if domain == "sim-direct" else "cubemap")
    base = results.get("sim", next(iter(results.values())))["s_per_rollout"]
    print(f"{args.task}, {args.policies}, {args.cameras} {args.size}x{args.size}, "
          f"max_frames {args.max_frames}, sim background: {source}")
    print(f"{'domain':<14} {'s/rollout':>9} {'cpu s':>6} {'x sim':>6} {'frames':>7} "
          f"{'queries':>7} {'ms/query':>8} {'success':>8} {'setup s':>7}")
    for name, r in results.items():
        print(f"{name:<14} {r['s_per_rollout']:9.2f} {r['cpu_s_per_rollout']:6.2f} "
              f"{r['s_per_rollout'] / base:6.2f} "
              f"{r['frames']:7.1f} {r['queries']:7.1f} {r['ms_per_query']:8.0f} "
              f"{r['successes']:>4}/{r['rollouts']:<3} {r['setup_s']:7.2f}")
    print(json.dumps({"args": vars(args), "source": source, "results": results}))


if __name__ == "__main__":
    main()
