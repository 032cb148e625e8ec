"""Study throughput: rollouts per hour with the serial, process (1 and 2 workers) and, when
ray is installed, a 2-worker local Ray executor, side by side in one run.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_study_executors.py [--trials 6]

The study (demo-like: one 20k-Gaussian sample room, clean + floaters-mid, Cup with the two
visual policies, 200-frame limit) is prepared once (bundles, quality); then for every
executor the rollouts are deleted and rerun from a copy, timing only the rollout stage
(worker start-up included). Rows are checked identical to the serial run's. The projection
to the YUBI-scale study (14,800 rollouts) divides by the measured rate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

YUBI_ROLLOUTS = 14_800


def _time_rollouts(spec, base: Path, work: Path, config) -> tuple[float, float, int, list]:
    """(seconds in run_rollouts, steady-state rollouts/s after the first commit, ran, rows)."""
    import bench.study.rollouts as rollouts
    from bench.study.rollouts import run_rollouts
    from bench.study.runner import open_output, prepare_conditions

    commit, stamps = rollouts.commit_outcome, []

    def timed_commit(*args):  # a timestamp per stored row: start-up vs steady state
        stored = commit(*args)
        if stored:
            stamps.append(time.perf_counter())
        return stored

    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(base, work)
    db = sqlite3.connect(work / "results.sqlite")
    with db:
        db.execute("DELETE FROM rollouts")
    db.close()
    store = open_output(spec, work, resume=True, overwrite=False)
    try:
        bundles = prepare_conditions(spec, work, store, progress=False)
        rollouts.commit_outcome = timed_commit
        start = time.perf_counter()
        ran = run_rollouts(spec, store, bundles, progress=False, out=work, executor=config)
        seconds = time.perf_counter() - start
        rows = store.rollouts()
    finally:
        rollouts.commit_outcome = commit
        store.close()
    steady = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
    return seconds, steady, ran, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6, help="simulated trials per cell")
    parser.add_argument("--json", help="also write the numbers to this JSON file")
    args = parser.parse_args()

    from bench.study.executors import ExecutorConfig
    from bench.study.runner import run_study
    from bench.study.spec import StudySpec

    spec = StudySpec(name="bench-exec", sample_scenes={"duo": 0}, sample_gaussians=20_000,
                     conditions=("clean", "floaters-mid"), tasks=("cup",), trials=args.trials,
                     real_trials=2, max_frames=200, metrics=("psnr",))
    configs = [("serial", ExecutorConfig()),
               ("process x1", ExecutorConfig(kind="process", workers=1)),
               ("process x2", ExecutorConfig(kind="process", workers=2))]
    try:
        import ray  # noqa: F401

        configs.append(("ray x2 (local)", ExecutorConfig(kind="ray", workers=2)))
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        run_study(spec, base, progress=False)
        results, reference = [], None
        for label, config in configs:
            seconds, steady, ran, rows = _time_rollouts(spec, base, Path(tmp) / "work", config)
            reference = rows if reference is None else reference
            assert rows == reference, f"{label}: rows differ from serial"
            results.append({"executor": label, "rollouts": ran, "seconds": seconds,
                            "rollouts_per_hour": 3600.0 * ran / seconds,
                            "steady_per_hour": 3600.0 * steady})
    serial = results[0]["steady_per_hour"]
    print(f"cores: {os.cpu_count()}; rollouts per run: {results[0]['rollouts']}")
    print(f"{'executor':<16} {'total s':>8} {'rollouts/h':>11} {'steady/h':>9} "
          f"{'x serial':>9} {'YUBI h':>7}")
    for r in results:
        r["vs_serial"] = r["steady_per_hour"] / serial  # steady state: start-up excluded
        r["yubi_hours"] = YUBI_ROLLOUTS / r["steady_per_hour"]
        print(f"{r['executor']:<16} {r['seconds']:8.1f} {r['rollouts_per_hour']:11.0f} "
              f"{r['steady_per_hour']:9.0f} {r['vs_serial']:9.2f} {r['yubi_hours']:7.2f}")
    one = next(r for r in results if r["executor"] == "process x1")["steady_per_hour"]
    print(f"one process worker: {one:.0f} rollouts/h steady -> an added 8-core machine of "
          f"8 such workers (linear, not measured here) ~{8 * one:.0f} rollouts/h, the YUBI "
          f"study alone in {YUBI_ROLLOUTS / (8 * one):.2f} h")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
