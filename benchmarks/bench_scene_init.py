"""Speed and peak memory of ``bench scene init`` on large scans, one core.

For each size the sample room (``bench.scene.sample``, SH degree 3) is grown to N
Gaussians and written as a raw scan in its splat frame (scale 2.5, tilted). Three
jobs run in separate single-core worker processes (``os.sched_setaffinity`` to one
CPU, BLAS/OpenMP threads 1), side by side:

- ``io``: the I/O floor every bundle writer pays: read the scan, map it into the
  world frame (sample's true registration), write the bundle (PLY + scene.json +
  manifest with sha256) -- no registration, no previews;
- ``init --no-previews``: the full registration (RANSAC, fit, gravity, scale) + the
  same writing;
- ``init``: the command as a user runs it (three preview renders on the cpu backend).

Wall time is measured around the worker and CPU time (user + system) from its
rusage, each the fastest of ``--repeat`` interleaved runs (on a shared machine the CPU
time is the steadier number: a one-core job's CPU time is its wall time when it has the
core to itself); peak memory is the worker's own maximum resident set size (``os.wait4`` rusage
``ru_maxrss``, largest of the runs). Usage::

    python benchmarks/bench_scene_init.py                      # 1 M and 5 M Gaussians
    python benchmarks/bench_scene_init.py --sizes 200000       # quick check
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_scan(n: int, path: Path) -> None:
    import numpy as np

    from bench.geometry import Similarity
    from bench.scene.ply import write_ply
    from bench.scene.sample import sample_background, sample_world_from_splat
    from bench.scene.transforms import transform_splats

    world = sample_background(seed=0, n_gaussians=n)
    splat = transform_splats(world, Similarity.from_matrix(sample_world_from_splat()).inverse())
    write_ply(path, splat)
    del world, splat, np


def child(mode: str, scan: str, out: str) -> None:
    """Run one job in this (single-core) process."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if mode == "io":
        import numpy as np

        from bench.scene.bundle import SceneBundle
        from bench.scene.formats import read_scan
        from bench.scene.ops import BundleResult, write_bundle
        from bench.scene.sample import sample_world_from_splat
        from bench.scene.transforms import transform_splats

        splats, fmt, _ = read_scan(scan)
        matrix = sample_world_from_splat()
        world = transform_splats(splats, matrix)
        bundle = SceneBundle(name="io", background=world, world_from_splat=matrix,
                             stored=(world, splats))
        write_bundle(BundleResult(bundle, "io/1", {}, None, {}, {"n": len(splats)}), out,
                     overwrite=True)
        del np, fmt
        return
    from bench.cli import main

    argv = ["scene", "init", "--splat", scan, "--out", out, "--table-size", "1.2", "0.8",
            "--overwrite"]
    if mode == "init-no-previews":
        argv.append("--no-previews")
    code = main(argv)
    if code:
        raise SystemExit(code)


def run(mode: str, scan: Path, out: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", mode, str(scan), str(out)],
                            env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{mode} failed: {err}")
    return {"mode": mode, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024.0,
            "log": err.strip().splitlines()[-1] if err.strip() else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--repeat", type=int, default=2,
                        help="runs of each job, interleaved; fastest wall and largest RSS kept")
    parser.add_argument("--work", help="scratch directory (default: a temporary one)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "SCAN", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    sys.path.insert(0, str(ROOT))
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_scene_init."))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.sizes:
        scan = work / f"scan_{n}.ply"
        if not scan.exists():
            make_scan(n, scan)
        size_mib = scan.stat().st_size / 2**20
        runs: dict[str, list[dict]] = {}
        for _ in range(args.repeat):
            for mode in ("io", "init-no-previews", "init"):
                result = run(mode, scan, work / f"out_{n}_{mode}")
                runs.setdefault(mode, []).append(result)
                print(json.dumps({"gaussians": n, **result}), flush=True)
        for mode, results in runs.items():
            rows.append({"mode": mode, "gaussians": n, "file_mib": size_mib,
                         "wall_s": min(r["wall_s"] for r in results),
                         "cpu_s": min(r["cpu_s"] for r in results),
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in results)})
    print()
    print("| Gaussians | file MiB | job | wall s | CPU s | CPU x io | peak RSS MiB | RSS / file |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        base = next(r for r in rows if r["gaussians"] == row["gaussians"] and r["mode"] == "io")
        print(f"| {row['gaussians']:,} | {row['file_mib']:.0f} | {row['mode']} | "
              f"{row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['cpu_s'] / base['cpu_s']:.2f} | "
              f"{row['peak_rss_mib']:.0f} | {row['peak_rss_mib'] / row['file_mib']:.2f} |")


if __name__ == "__main__":
    main()
