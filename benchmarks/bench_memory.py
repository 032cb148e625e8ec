"""Benchmark: peak memory of ``bench perturb`` and ``bench render`` on a 3 M-Gaussian bundle.

Builds a *registered* bundle of the procedural sample room grown to ``--n`` Gaussians
(SH degree 3, the sample's non-trivial ``world_from_splat``: scale 2.5, a rotation and
a translation; :mod:`bench.scene.sample`), then runs each job as the real CLI in a fresh
process and reports its peak resident set size against the size of ``background.ply``:

- ``bench perturb --preset hole-54`` / ``floaters-mid`` / ``warp``;
- ``bench render`` of one 256x256 frame, pinhole (70 deg) and equidistant fisheye
  (200 deg), ``--backend cpu``.

Peak RSS: each job is started by a small wrapper process that waits for it and reads
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the job's own high-water mark; the
wrapper holds no arrays, so what Linux carries over from it at fork is a few MiB).
Wall time is the job's, start to exit (interpreter start and imports included).

``--baseline-src DIR`` also runs every job with another source tree first on the
``PYTHONPATH`` (e.g. ``main`` before a change), interleaved job by job on the same
bundle, so before and after come from the same run.

Usage::

    .venv/bin/python benchmarks/bench_memory.py                 # 3,000,000 Gaussians
    .venv/bin/python benchmarks/bench_memory.py --n 200000      # quick check
    git archive main | tar -x -C /tmp/main-src                  # before/after, same run
    .venv/bin/python benchmarks/bench_memory.py --baseline-src /tmp/main-src
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = {
    "perturb hole-54": ["perturb", "--preset", "hole-54"],
    "perturb floaters-mid": ["perturb", "--preset", "floaters-mid"],
    "perturb warp": ["perturb", "--preset", "warp"],
    "render pinhole 256": ["render", "--cameras", "{cams}/pinhole.json", "--backend", "cpu"],
    "render fisheye-200 256": ["render", "--cameras", "{cams}/fisheye.json", "--backend", "cpu"],
}


def build_bundle(root: Path, n: int) -> Path:
    """Save the sample room grown to ``n`` Gaussians as a registered bundle under ``root``."""
    from bench.scene.bundle import save_scene
    from bench.scene.camera_files import save_cameras
    from bench.scene.cameras import Camera, look_at
    from bench.scene.sample import make_sample_scene

    scene = root / "scene"
    save_scene(make_sample_scene(seed=0, n_gaussians=n), scene)
    cams = root / "cams"
    cams.mkdir()
    pose = look_at((0.9, -0.5, 0.55), (0.0, 0.0, 0.0))
    save_cameras(cams / "pinhole.json",
                 [Camera.pinhole_from_fov(256, 256, fov_x_deg=70.0, world_from_camera=pose,
                                          name="pinhole")])
    save_cameras(cams / "fisheye.json",
                 [Camera.equidistant_fisheye(256, 256, fov_deg=200.0, world_from_camera=pose,
                                             name="fisheye")])
    return scene


def bench_command() -> list[str]:
    """The ``bench`` console script next to this interpreter, else ``python -m bench.cli``."""
    script = Path(sys.executable).with_name("bench")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bench.cli"]


def measure(argv: list[str], source: Path | None = None) -> dict:
    """Run ``argv`` in a fresh wrapper process; its peak RSS (bytes) and wall seconds.

    ``source``: a source tree put first on ``PYTHONPATH`` (None: this tree).
    """
    wrapper = [sys.executable, __file__, "--child", json.dumps(argv)]
    tree = source if source is not None else Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run(wrapper, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(argv: list[str]) -> None:
    """Wrapper body: run the job, print its peak RSS and wall time as JSON."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"job failed ({done.returncode}): {' '.join(argv)}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"max_rss": peak, "wall_s": wall}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3_000_000, help="Gaussians in the bundle")
    parser.add_argument("--repeats", type=int, default=1, help="runs per job (largest peak, "
                        "fastest wall time are shown)")
    parser.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    parser.add_argument("--workdir", type=Path, default=None, help="scratch dir (default: tmp)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="another source tree (e.g. main) to run every job with too")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return

    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        scene = build_bundle(root, args.n)
        size = (scene / "background.ply").stat().st_size
        print(f"bundle: {args.n:,} Gaussians, SH 3, registered (scale 2.5, rotation, "
              f"translation); background.ply {size / 2**20:.0f} MiB "
              f"(built in {time.perf_counter() - start:.0f} s)", file=sys.stderr)
        base = measure([sys.executable, "-c", "import numpy, warp, bench.cli"])
        contenders = {"this tree": None}
        if args.baseline_src is not None:
            contenders = {"baseline": args.baseline_src.resolve(), **contenders}
        for name in args.jobs:
            for label, source in contenders.items():
                best = None
                for _ in range(args.repeats):
                    out = root / "out"
                    argv = [*bench_command(),
                            *(a.format(cams=root / "cams") for a in JOBS[name]),
                            "--scene", str(scene), "--out", str(out)]
                    run = measure(argv, source)
                    shutil.rmtree(out, ignore_errors=True)
                    best = run if best is None else {
                        "max_rss": max(best["max_rss"], run["max_rss"]),
                        "wall_s": min(best["wall_s"], run["wall_s"])}
                    print(f"{name} [{label}]: {run['max_rss'] / 2**20:.0f} MiB, "
                          f"{run['wall_s']:.1f} s", file=sys.stderr)
                rows.append({"job": name, "source": label, **best,
                             "ratio": best["max_rss"] / size})

    print(f"\n{args.n:,} Gaussians (SH 3, registered bundle), background.ply "
          f"{size / 2**20:.0f} MiB; peak RSS of the whole process; wall time includes "
          f"interpreter start and imports ({base['max_rss'] / 2**20:.0f} MiB, "
          f"{base['wall_s']:.1f} s for `import numpy, warp, bench.cli` alone)\n")
    print("| job | code | peak RSS MiB | x file size | wall s |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['job']} | {row['source']} | {row['max_rss'] / 2**20:.0f} | "
              f"{row['ratio']:.2f} | {row['wall_s']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "file_bytes": size, "baseline": base,
                                         "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
