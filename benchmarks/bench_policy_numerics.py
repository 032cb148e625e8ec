"""What the CPU-independent torch path costs: a policy query and an LPIPS score, both ways.

Side by side, each in its own process (the variables act when torch loads):

- ``pinned``: this bench's reference numerics (``bench.numerics``: ``MKL_CBWR=COMPATIBLE``)
  with the computation pinned by :func:`bench.threads.pinned_torch` (a fixed thread count,
  no oneDNN): the CPU-independent path the committed tables are made with;
- ``unpinned``: the earlier pin (``MKL_ENABLE_INSTRUCTIONS=AVX2`` instead of ``MKL_CBWR``),
  torch's own thread pool (one per core) and oneDNN on: fast, but its bits depend on the CPU.

Measured: one query of the Pen policy ``bc-aux-dagger`` (two 64 px wrist images + proprio,
median of ``--queries``), and LPIPS of ``--frames`` 240 x 320 image pairs (median of
``--repeats``).

    python benchmarks/bench_policy_numerics.py [--queries 400] [--frames 8] [--repeats 7] \
        [--doc docs/speed/numerics.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import contextlib, json, statistics, sys, time
import numpy as np
pinned = sys.argv[1] == "pinned"
queries, frames, repeats = map(int, sys.argv[2:5])
import torch
import bench.threads, metrics.base
if not pinned:  # the path before the pin: the process's pool, oneDNN on
    nothing = lambda threads: contextlib.nullcontext()
    bench.threads.pinned_torch = nothing
    metrics.base.pinned_torch = nothing
from bench.policies.bc_network import load_network, predict_chunk
from bench.policies.learned import policy_dir
from metrics.registry import get_scorer
rng = np.random.default_rng(0)
net, config = load_network(policy_dir("bc-aux-dagger", "pen"))
query = (rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
         rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), rng.normal(size=8).astype(np.float32))
for _ in range(20):
    predict_chunk(net, config, *query)
times = []
for _ in range(queries):
    t = time.perf_counter()
    predict_chunk(net, config, *query)
    times.append(time.perf_counter() - t)
a = rng.random((frames, 240, 320, 3)); b = np.clip(a + rng.normal(0, 0.05, a.shape), 0, 1)
lpips = get_scorer("lpips"); lpips(a[:1], b[:1])
scores = []
for _ in range(repeats):
    t = time.perf_counter(); lpips(a, b); scores.append(time.perf_counter() - t)
print(json.dumps({"query_ms": 1e3 * statistics.median(times),
                  "lpips_ms_per_frame": 1e3 * statistics.median(scores) / frames,
                  "threads": torch.get_num_threads()}))
"""


def _env(mode: str) -> dict[str, str]:
    from bench import numerics

    env = numerics.reference_env()
    if mode == "unpinned":
        env.pop("MKL_CBWR")
        env["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--doc", help="write the generated speed doc (Markdown) here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from speed_doc import Table, render_table, run_started, write_speed_doc

    start = run_started()
    rows = {}
    for mode in ("pinned", "unpinned"):
        out = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.queries),
                              str(args.frames), str(args.repeats)], cwd=ROOT, env=_env(mode),
                             capture_output=True, text=True, check=True)
        rows[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    pin, free = rows["pinned"], rows["unpinned"]
    table = Table("Median wall time; each path in its own process, one after the other:",
                  ["path", "policy query (ms)", "LPIPS (ms per 240 x 320 frame)",
                   "torch threads outside the pin"],
                  [[mode, f"{row['query_ms']:.2f}", f"{row['lpips_ms_per_frame']:.1f}",
                    str(row["threads"])] for mode, row in rows.items()],
                  align=["l", "r", "r", "r"])
    ratio = (f"pinned / unpinned: policy query {pin['query_ms'] / free['query_ms']:.2f}x, "
             f"LPIPS {pin['lpips_ms_per_frame'] / free['lpips_ms_per_frame']:.2f}x")
    print(render_table(table))
    print(ratio)
    if args.doc:
        write_speed_doc(args.doc, title="The CPU-independent torch path: its cost", tables=[table],
                        notes=[ratio,
                               "pinned: MKL_CBWR=COMPATIBLE, one torch thread per query or "
                               "score, oneDNN off (bench.threads.pinned_torch); unpinned: "
                               "MKL_ENABLE_INSTRUCTIONS=AVX2, the process's torch pool, oneDNN "
                               "on (the path before 2026-12-07)",
                               f"{args.queries} queries of the Pen policy bc-aux-dagger; LPIPS "
                               f"of {args.frames} frames, {args.repeats} repeats"],
                        started=start)


if __name__ == "__main__":
    main()
