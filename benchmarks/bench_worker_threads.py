"""A policy query's cost inside a two-worker study vs alone, with and without thread budgets.

Run (issue 32 item 2; the numbers in the lead's closing note):

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_worker_threads.py --rounds 2

Each worker is a ``spawn`` process like a study's process-executor worker. It builds the
simulated Cup env of ``benchmarks/bench_demo_rollouts.py`` (shipped reconstruction, dual
64 px fisheyes, direct fisheye background, <= 200 frames) and the ``bc-large`` policy, then
rolls it out and records every policy query's wall time (``run_episode(latencies=)``). Two
thread settings, each measured with one worker alone and with two workers at once:

- ``before``: what a worker did before issue 32 (torch intra-op threads = cores / workers,
  every other pool at its default: OpenMP inter-op, OpenBLAS and llvmpipe sized to the
  machine);
- ``budget``: :func:`bench.threads.limit_threads` + :func:`bench.threads.limit_torch_threads`
  with cores / workers threads (the executor's ``_worker_init``).

The four cases run alternately ``--rounds`` times in one run, so a shared machine's load
hits them alike; the report is the median query time per case and the ratio pair / alone
(issue 32's target: within 2x). Prints a table and JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")


_BARRIER = None


def _init(barrier) -> None:
    global _BARRIER
    _BARRIER = barrier


def worker(setting: str, threads: int, rollouts: int) -> dict:
    """One worker process: set threads, build env + policy, roll out, return query times."""
    if setting == "budget":
        from bench.threads import limit_threads, limit_torch_threads

        limit_threads(threads)
        limit_torch_threads(threads)
    else:  # the executor's worker before issue 32: torch's intra-op pool only
        import torch

        torch.set_num_threads(threads)
    from bench_demo_rollouts import _spec, clean_bundle

    import bench.policies.visual  # noqa: F401 - registers the visual policies
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode
    from bench.study.world_domain import make_domain_env

    args = argparse.Namespace(size=64, task="cup", policies="bc-large,bc-aux-dagger",
                              cameras="yubi-dual",
                              max_frames=200, world="gt-duo", scene="duo", gaussians=20000)
    bundle, _ = clean_bundle(args)
    spec = _spec(args, shadows=False)
    overrides = {"image_size": spec.image_size, "max_frames": 200,
                 "render_backend": spec.render_backend, "fisheye_mode": "direct"}
    env = make_domain_env(spec, scene="duo", task="cup", domain="sim", bundle=bundle,
                          overrides=overrides)
    policy = make_policy("bc-large", env, seed=spec.seed)
    cpu_ms: list[float] = []
    act = policy.act

    def timed_act(observation, info):  # the query's CPU time on this thread (no waiting)
        tick = time.thread_time()
        try:
            return act(observation, info)
        finally:
            cpu_ms.append((time.thread_time() - tick) * 1000.0)

    policy.act = timed_act
    run_episode(env, policy, init_index=0)  # warm-up: GL context, kernels, torch
    cpu_ms.clear()
    _BARRIER.wait()  # both workers of a pair start rolling out together
    latencies: list[float] = []
    cpu, wall = time.process_time(), time.perf_counter()
    for trial in range(rollouts):
        run_episode(env, policy, init_index=trial + 1, latencies=latencies)
    env.close()
    return {"latencies_ms": latencies, "cpu_ms": cpu_ms,
            "cpu_s": (time.process_time() - cpu) / rollouts,
            "wall_s": (time.perf_counter() - wall) / rollouts,
            "process_threads": len(os.listdir("/proc/self/task"))}


def run_case(pool_ctx, setting: str, workers: int, threads: int, rollouts: int) -> list[dict]:
    """``workers`` processes at once (each its own spawn process); their results."""
    barrier = pool_ctx.Barrier(workers)
    with pool_ctx.Pool(workers, initializer=_init, initargs=(barrier,)) as pool:
        return pool.starmap(worker, [(setting, threads, rollouts)] * workers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the 4 cases")
    parser.add_argument("--rollouts", type=int, default=2, help="timed rollouts per worker")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    ctx = multiprocessing.get_context("spawn")
    cases = [(s, w) for _ in range(args.rounds) for s in ("before", "budget") for w in (1, 2)]
    times: dict[tuple[str, int], list[float]] = {}
    walls: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    threads_seen: dict[tuple[str, int], int] = {}
    for setting, workers in cases:
        threads = max(1, cores // 2)  # a two-worker study's budget, also for the lone worker
        for result in run_case(ctx, setting, workers, threads, args.rollouts):
            times.setdefault((setting, workers), []).extend(result["latencies_ms"])
            walls.setdefault((setting, workers), []).append(result["wall_s"])
            cpus.setdefault((setting, workers), []).extend(result["cpu_ms"])
            threads_seen[(setting, workers)] = result["process_threads"]
        print(f"[threads] {setting} x{workers}: "
              f"{statistics.median(times[(setting, workers)]):.2f} ms median so far", flush=True)
    rows = {}
    for setting in ("before", "budget"):
        alone = statistics.median(times[(setting, 1)])
        pair = statistics.median(times[(setting, 2)])
        rows[setting] = {"alone_ms": alone, "two_workers_ms": pair, "ratio": pair / alone,
                         "cpu_ms_alone": statistics.median(cpus[(setting, 1)]),
                         "cpu_ms_two_workers": statistics.median(cpus[(setting, 2)]),
                         "rollout_s_alone": statistics.median(walls[(setting, 1)]),
                         "rollout_s_two_workers": statistics.median(walls[(setting, 2)]),
                         "queries": [len(times[(setting, 1)]), len(times[(setting, 2)])],
                         "process_threads": threads_seen[(setting, 2)]}
    print(f"policy query (bc-large, Cup, dual 64 px fisheyes), {cores} cores, "
          f"{args.rounds} rounds x {args.rollouts} rollouts per worker")
    print("query wall ms (median) alone / in a two-worker study, the query's own CPU ms, "
          "threads per worker process, seconds per rollout")
    print(f"{'setting':<8} {'alone ms':>9} {'2 workers ms':>13} {'ratio':>6} {'cpu ms':>13} "
          f"{'threads':>8} {'rollout s':>14}")
    for setting, r in rows.items():
        print(f"{setting:<8} {r['alone_ms']:9.2f} {r['two_workers_ms']:13.2f} "
              f"{r['ratio']:6.2f} {r['cpu_ms_alone']:6.2f}/{r['cpu_ms_two_workers']:<6.2f} "
              f"{r['process_threads']:8d} {r['rollout_s_alone']:6.2f}/"
              f"{r['rollout_s_two_workers']:<7.2f}")
    print(json.dumps({"args": vars(args), "cores": cores, "results": rows}))


if __name__ == "__main__":
    main()
