"""CPU seconds per rollout, where they go, and what the paper-scale study costs (issue 32).

Run (writes docs/speed/rollout.md; the old code is a checkout of the commit before issue 32)::

    git worktree add /tmp/wt-base 7520487
    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_rollout_cost.py --base /tmp/wt-base \\
        --doc docs/speed/rollout.md

Every measurement runs in a fresh child process whose ``PYTHONPATH`` selects the code:
``new`` (this checkout) or ``old`` (``--base``); old and new alternate (``--repeats``) and
the tables give medians, so the speed-up is a same-run ratio even on a shared machine.
CPU time (``time.process_time``: every thread of the process) is the cost; wall time is
shown beside it but depends on the machine's other load.

Measured, each on the demo's assets as a study worker builds them (scene ``duo``, clean
bundle, the profile's two learned policies, the study's env and image settings, each
rollout's row committed to a results store):

1. ``cells``: per task and domain at the ``default`` profile's settings (Cup, 200 frames,
   direct fisheye) and the ``paper`` profile's (Cup, Tape, Pen; cube-map fisheye; YUBI's time
   limits capped at ``--paper-max-frames``, so cost per frame is what is projected), alone
   (one process, the machine's thread defaults) and inside a two-worker study (two
   processes at once, each set up by the code's own pool-worker initializer
   ``bench.study.executors._worker_init`` with cores / 2 threads). The records of old and
   new must be identical (sha256 of the records, printed).
2. phases: one profiled pass (cProfile) per cell; self time of every function assigned to a
   phase by where it lives (:data:`PHASES`), a C function's self time split over its
   callers. Profiling inflates Python-heavy phases, so the phase seconds are the profile's
   shares applied to the unprofiled CPU seconds.
3. ``vector`` (new code only): rollouts per CPU-second with N = 1, 4, 16 envs per worker
   (:mod:`bench.sim.vector_rollout`), and the batched CNN forward (one call for N queries,
   opt-in because not bit-identical) against N single queries.
4. projections: the paper-scale replica (three tasks, 80 simulated / 20 real trials per cell,
   eleven conditions: the ten of the demo + ``clean-repeat``), the ``paper`` profile (ten
   conditions) at YUBI's time limits and the ``default`` profile's rollout stage, on 2 cores,
   from the measured CPU per frame (two-worker case).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCENE = "duo"
#: phase -> (path fragments of the Python files, name fragments of C functions). First match
#: wins, in this order; a C function matching none is split over its callers.
PHASES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("store", ("bench/study/store", "sqlite3/"), ("sqlite3",)),
    ("policy", ("bench/policies/", "/torch/", "safetensors"), ("torch.", "conv2d", "linear")),
    ("composite", ("bench/render/composite", "bench/render/fisheye", "bench/worlds/sensor",
                   "bench/sim/observation", "bench/sim/env_render"), ()),
    ("gaussian render", ("bench/render/", "/warp/"), ("warp",)),
    ("mujoco render", ("/mujoco/", "/OpenGL/", "bench/sim/camera_rig"), ("mjr_", "Renderer",
                                                                       "MjrContext")),
    ("physics", (), ("mj_step", "mj_forward", "mj_kinematics", "mj_collision", "mj_")),
    ("per-step python", ("bench/sim/", "bench/geometry", "bench/worlds/", "/enum.py",
                         "/numpy/", "bench/study/"), ()),
)
PHASE_NAMES = tuple(p[0] for p in PHASES) + ("other",)
#: The replica design of issue 33 and the demo profiles (bench/demo/run.py PROFILES).
SCENES = 3
REPLICA = {"conditions": 11, "trials": 80, "real_trials": 20, "tasks": ("cup", "tape", "pen")}
PAPER = {"conditions": 10, "trials": 80, "real_trials": 20, "tasks": ("cup", "tape", "pen")}
DEFAULT = {"conditions": 10, "trials": 10, "real_trials": 20, "tasks": ("cup",)}
POLICIES_PER_TASK = 2


# --------------------------------------------------------------------------- children
def _phase_of(path: str, name: str) -> str | None:
    path = path.replace("\\", "/")
    for phase, files, names in PHASES:
        if path != "~" and any(f in path for f in files):
            return phase
        if path == "~" and any(n in name for n in names):
            return phase
    return None


def _phases(profile) -> dict[str, float]:  # cProfile.Profile -> {phase: self seconds}
    import pstats

    stats = pstats.Stats(profile).stats
    out = dict.fromkeys(PHASE_NAMES, 0.0)

    def place(func, depth: int = 0) -> str:
        path, _, name = func
        phase = _phase_of(path, name)
        if phase is not None or depth > 3:
            return phase or "other"
        callers = stats[func][4]
        if not callers:
            return "other"
        best = max(callers, key=lambda c: callers[c][2] if isinstance(callers[c], tuple)
                   else 0.0)
        return place(best, depth + 1)

    for func, (_, _, tottime, _, callers) in stats.items():
        path, _, name = func
        phase = _phase_of(path, name)
        if phase is not None or path != "~" or not callers:
            out[phase or "other"] += tottime
            continue
        total = sum(c[2] for c in callers.values()) or 1.0  # split over callers by their share
        for caller, info in callers.items():
            out[place(caller)] += tottime * info[2] / total
    return out


def _spec(profile: str, paper_cap: int):
    import dataclasses

    from bench.demo.run import PROFILES, profile_spec

    chosen = PROFILES[profile]
    if profile == "paper":  # YUBI's limits (the profile's own may change with issue 33)
        chosen = dataclasses.replace(chosen, max_frames=None)
    spec = profile_spec(chosen)
    if isinstance(spec.max_frames, dict):  # YUBI's limits, capped: cost per frame is projected
        capped = {s: {t: min(f, paper_cap) for t, f in v.items()}
                  for s, v in spec.max_frames.items()}
        spec = dataclasses.replace(spec, max_frames=capped)
    return spec


def child_cells(job: dict) -> dict:
    """Per (profile, task, domain): CPU and wall per rollout, frames, phases, records digest."""
    import tempfile

    spec = _spec(job["profiles"][0], job["paper_cap"])
    if job["worker"]:  # as a pool worker of a two-worker study: the code's own initializer
        from bench.study.executors import _worker_init

        _worker_init(spec, job["threads"], 0)
    import bench.policies.visual  # noqa: F401 - registers the visual policies
    from bench.policies import make_policy
    from bench.scene.bundle import load_scene
    from bench.sim.rollout import run_episode
    from bench.study.store import ResultsStore
    from bench.study.work_unit import make_study_env

    results = []
    warm = False
    with tempfile.TemporaryDirectory() as tmp:
        store = ResultsStore(Path(tmp))
        for profile in job["profiles"]:
            spec = _spec(profile, job["paper_cap"])
            bundle = load_scene(spec.scenes[SCENE])
            for task in spec.tasks:
                for domain in ("sim", "real"):
                    env = make_study_env(spec, scene=SCENE, task=task, domain=domain,
                                         bundle=bundle)
                    policies = {p: make_policy(p, env, seed=spec.seed)
                                for p in spec.policies[task]}
                    if not warm:  # first-call costs (kernel caches, GL) are not a rollout's
                        run_episode(env, next(iter(policies.values())), init_index=0)
                        warm = True
                    cell = _Cell(spec, profile, task, domain, env, policies, store)
                    results.append(cell.measure(job["trials"], profiled=job["profile_pass"]))
                    env.close()
        store.close()
    import torch

    return {"cells": results, "torch_threads": torch.get_num_threads()}


class _Cell:
    """One (profile, task, domain) env + policies; rollouts committed to ``store``."""

    def __init__(self, spec, profile, task, domain, env, policies, store) -> None:
        self.spec, self.profile, self.task, self.domain = spec, profile, task, domain
        self.env, self.policies, self.store = env, policies, store
        self.records: list = []

    def run(self, name: str, trial: int, latencies: list) -> None:
        from bench.sim.rollout import run_episode
        from bench.study.plan import init_index
        from bench.study.store import RolloutRow

        record, _, _ = run_episode(self.env, self.policies[name],
                                   init_index=init_index(self.spec, self.domain, trial),
                                   episode=trial, policy_name=name, latencies=latencies)
        self.store.add_rollout(RolloutRow.from_episode(  # a row's cost is part of a rollout's
            record, study=f"{self.profile}-{len(self.records)}", scene=SCENE,
            condition="clean", task=self.task, policy=name, domain=self.domain, trial=trial,
            manifest_sha256="-"))
        self.records.append(record)

    def measure(self, trials: int, *, profiled: bool) -> dict:
        import cProfile
        import hashlib

        import numpy as np

        cpu, wall, latencies = [], [], []
        for trial in range(trials):
            for name in self.policies:
                c0, w0 = time.process_time(), time.perf_counter()
                self.run(name, trial, latencies)
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
        records = list(self.records)
        phases = None
        if profiled:  # one more rollout per policy under cProfile, not timed
            prof = cProfile.Profile()
            c0 = time.process_time()
            prof.enable()
            for name in self.policies:
                self.run(name, 0, [])
            prof.disable()
            raw = _phases(prof)
            total = sum(raw.values()) or 1.0
            phases = {k: v / total for k, v in raw.items()}
            phases["_profiled_cpu_s"] = time.process_time() - c0
        n = len(cpu)
        text = "\n".join(json.dumps(r.to_dict(), sort_keys=True) for r in records)
        return {"profile": self.profile, "task": self.task, "domain": self.domain,
                "max_frames": self.spec.frames_limit(SCENE, self.task), "rollouts": n,
                "cpu_s": sum(cpu) / n, "wall_s": sum(wall) / n,
                "frames": sum(r.frames for r in records) / n,
                "queries": sum(r.policy_queries for r in records) / n,
                "successes": sum(r.success for r in records),
                "success_frames": [r.frames for r in records if r.success],
                "query_ms": float(np.median(latencies)) if latencies else 0.0,
                "phases": phases, "digest": hashlib.sha256(text.encode()).hexdigest()}


def child_vector(job: dict) -> dict:
    """Rollouts per CPU-second with ``envs`` sub-envs (new code), records digest."""
    import hashlib

    spec = _spec("default", job["paper_cap"])
    from bench.study.executors import _worker_init

    _worker_init(spec, job["threads"], 0)
    import bench.policies.visual  # noqa: F401
    from bench.policies import make_policy
    from bench.scene.bundle import load_scene
    from bench.sim.rollout import run_episode
    from bench.sim.vector_env import SplatBenchVectorEnv
    from bench.sim.vector_rollout import EpisodeJob, run_episodes
    from bench.study.plan import init_index
    from bench.study.work_unit import make_study_env

    bundle = load_scene(spec.scenes[SCENE])
    task, domain, n = "cup", job["domain"], job["envs"]
    c0 = time.process_time()
    envs = [make_study_env(spec, scene=SCENE, task=task, domain=domain, bundle=bundle)
            for _ in range(n)]
    policies = [{p: make_policy(p, e, seed=spec.seed) for p in spec.policies[task]}
                for e in envs]
    setup = time.process_time() - c0
    run_episode(envs[0], next(iter(policies[0].values())), init_index=0)  # warm-up
    vec = SplatBenchVectorEnv(envs, copy=False)
    names = list(spec.policies[task])
    jobs = [EpisodeJob(names[k % len(names)], init_index(spec, domain, k // len(names)), k)
            for k in range(job["rollouts"])]
    c0, w0 = time.process_time(), time.perf_counter()
    records = [r.record for r in run_episodes(vec, policies, jobs)]
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    vec.close()
    digest = hashlib.sha256("\n".join(json.dumps(r.to_dict(), sort_keys=True)
                                      for r in records).encode()).hexdigest()
    return {"envs": n, "domain": domain, "rollouts": len(records), "cpu_s": cpu,
            "wall_s": wall, "setup_cpu_s": setup, "per_cpu_s": len(records) / cpu,
            "frames": sum(r.frames for r in records) / len(records), "digest": digest,
            "maxrss_mb": _maxrss_mb()}


def child_cnn(job: dict) -> dict:
    """One batched CNN forward for N queries vs N single queries: ms per query, exactness."""
    spec = _spec("default", job["paper_cap"])
    from bench.study.executors import _worker_init

    _worker_init(spec, job["threads"], 0)
    import numpy as np
    import torch

    from bench.policies.bc_network import load_network, predict_chunk, prepare_images
    from bench.policies.learned import policy_dir

    out = []
    rng = np.random.default_rng(0)
    for name in spec.policies["cup"]:
        net, config = load_network(policy_dir(name, "cup"))
        for n in (1, 4, 16):
            left = rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8)
            right = rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8)
            proprio = rng.normal(size=(n, 8)).astype(np.float32)
            single, batch = [], []
            for _ in range(job["repeats"]):
                c0 = time.process_time()
                ref = [predict_chunk(net, config, left[i], right[i], proprio[i])
                       for i in range(n)]
                single.append(time.process_time() - c0)
                c0 = time.process_time()
                with torch.no_grad():
                    y = net(prepare_images(left, config.image_size),
                            prepare_images(right, config.image_size),
                            torch.from_numpy(proprio))
                    y = (y * net.target_std + net.target_mean).numpy()
                batch.append(time.process_time() - c0)
            from bench.policies.bc_network import TARGET_DIM, decode_chunk

            got = [decode_chunk(y[i].reshape(config.horizon, TARGET_DIM)) for i in range(n)]
            diff = max(float(np.abs(a - b).max()) for a, b in zip(got, ref, strict=True))
            out.append({"policy": name, "n": n,
                        "single_ms": 1000 * statistics.median(single) / n,
                        "batch_ms": 1000 * statistics.median(batch) / n,
                        "exact": all(np.array_equal(a, b) for a, b in zip(got, ref, strict=True)),
                        "max_abs_diff": diff})
    return {"cnn": out}


def child_warp(job: dict) -> dict:
    """N sub-envs' dual-fisheye backgrounds: N ``render_batch`` calls vs one of 2N cameras."""
    spec = _spec("default", job["paper_cap"])
    from bench.study.executors import _worker_init

    _worker_init(spec, job["threads"], 0)
    import numpy as np

    from bench.render import render_batch
    from bench.scene.bundle import load_scene
    from bench.study.work_unit import make_study_env

    bundle = load_scene(spec.scenes[SCENE])
    out = []
    for n in (4, 16):
        envs = [make_study_env(spec, scene=SCENE, task="cup", domain="sim", bundle=bundle)
                for _ in range(n)]
        cameras = []
        for i, env in enumerate(envs):  # n different wrist poses: n initial conditions
            env.reset(seed=i)
            cameras.append(env.unwrapped._get_renderer().rig_cameras())  # noqa: SLF001
        config = envs[0].unwrapped.config

        def draw(cams, config=config):
            return render_batch(bundle.background, cams, backend=config.render_backend,
                                fisheye_mode=config.fisheye_mode, cubemap_face_px=None)

        draw(cameras[0])  # warm-up
        apart, together = [], []
        for _ in range(job["repeats"]):
            c0 = time.process_time()
            one_each = [o for cams in cameras for o in draw(cams)]
            apart.append(time.process_time() - c0)
            c0 = time.process_time()
            batch = draw([c for cams in cameras for c in cams])
            together.append(time.process_time() - c0)
        same = all(np.array_equal(np.asarray(a.rgb), np.asarray(b.rgb))
                   and np.array_equal(np.asarray(a.depth), np.asarray(b.depth))
                   for a, b in zip(one_each, batch, strict=True))
        out.append({"n": n, "apart_ms": 1000 * statistics.median(apart),
                    "together_ms": 1000 * statistics.median(together), "identical": same})
        for env in envs:
            env.close()
    return {"warp": out}


def _maxrss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --------------------------------------------------------------------------- driver
def _launch(code_root: Path, job: dict) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(code_root), PYTHONHASHSEED="0")
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child",
                             json.dumps(job)], cwd=str(ROOT), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(proc: subprocess.Popen, label: str) -> dict:
    out, err = proc.communicate()
    if proc.returncode != 0:
        tail = err.strip().splitlines()[-5:]
        raise SystemExit(f"bench_rollout_cost: the {label} child failed "
                         f"(exit {proc.returncode}): " + " | ".join(tail))
    return json.loads(out.strip().splitlines()[-1])


def _run(code_root: Path, job: dict, label: str, *, copies: int = 1) -> list[dict]:
    """Run ``copies`` children at once (2: a two-worker study); their results."""
    print(f"[bench_rollout_cost] {label} ...", file=sys.stderr, flush=True)
    procs = [_launch(code_root, job) for _ in range(copies)]
    return [_collect(p, label) for p in procs]


def _median_cells(runs: list[list[dict]]) -> dict[tuple, dict]:
    """(profile, task, domain) -> the cell with median CPU / wall over runs and copies."""
    by: dict[tuple, list[dict]] = {}
    for run in runs:
        for child in run:
            for cell in child["cells"]:
                by.setdefault((cell["profile"], cell["task"], cell["domain"]), []).append(cell)
    out = {}
    for key, cells in by.items():
        merged = dict(cells[0])
        for field in ("cpu_s", "wall_s", "query_ms"):
            merged[field] = statistics.median(c[field] for c in cells)
        digests = {c["digest"] for c in cells}
        merged["digest"] = digests.pop() if len(digests) == 1 else "DIFFERS"
        phased = [c["phases"] for c in cells if c["phases"]]
        if phased:
            merged["phases"] = {k: statistics.median(p[k] for p in phased) for k in phased[0]}
        out[key] = merged
    return out


def _frames_expected(cell: dict, limit: int) -> float:
    """Frames per rollout at time limit ``limit``: successes as measured, the rest run out."""
    n = cell["rollouts"]
    done = cell["success_frames"]
    return (sum(min(f, limit) for f in done) + (n - len(done)) * limit) / n


def _project(cells: dict, design: dict, profile: str, limits: dict) -> float:
    """CPU seconds of a design's rollouts from the measured CPU per frame (scene duo)."""
    total = 0.0
    for task in design["tasks"]:
        for domain, trials, conds in (("sim", design["trials"], design["conditions"]),
                                      ("real", design["real_trials"], 1)):
            cell = cells[(profile, task, domain)]
            per_frame = cell["cpu_s"] / max(cell["frames"], 1.0)
            frames = statistics.mean(_frames_expected(cell, limits[s][task]) for s in limits)
            total += SCENES * conds * trials * POLICIES_PER_TASK * per_frame * frames
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="checkout of the code before issue 32 "
                        "(git worktree add DIR 7520487); omitted: new code only")
    parser.add_argument("--trials", type=int, default=2, help="trials per policy per cell")
    parser.add_argument("--repeats", type=int, default=1, help="old/new alternations")
    parser.add_argument("--paper-max-frames", type=int, default=300,
                        help="cap of YUBI's time limits in the measured paper cells (frames)")
    parser.add_argument("--profiles", default="default,paper", help="demo profiles measured")
    parser.add_argument("--envs", default="1,4,16", help="envs per worker to measure")
    parser.add_argument("--vector-rollouts", type=int, default=32)
    parser.add_argument("--skip", default="", help="comma list of parts to skip: "
                        "cells, workers, vector, cnn, warp")
    parser.add_argument("--doc", type=Path, help="write the Markdown tables here")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        job = json.loads(args.child)
        result = {"cells": child_cells, "vector": child_vector, "cnn": child_cnn,
                  "warp": child_warp}[
            job["mode"]](job)
        print(json.dumps(result))
        return
    sys.path.insert(0, str(HERE))
    from speed_doc import run_started, write_speed_doc

    started = run_started()
    skip = set(filter(None, args.skip.split(",")))
    threads = max(1, (os.cpu_count() or 1) // 2)
    base = {"paper_cap": args.paper_max_frames, "threads": threads}
    cells_job = {**base, "mode": "cells", "profiles": args.profiles.split(","),
                 "trials": args.trials}
    codes = [("new", ROOT)] + ([("old", args.base.resolve())] if args.base else [])
    raw: dict = {"alone": {c: [] for c, _ in codes}, "workers": {c: [] for c, _ in codes}}
    for rep in range(args.repeats):
        order = codes if rep % 2 == 0 else codes[::-1]  # alternate which goes first
        if "cells" not in skip:
            for code, root in order:
                raw["alone"][code].append(_run(root, {**cells_job, "worker": False,
                                                      "profile_pass": True},
                                               f"{code} alone (repeat {rep + 1})"))
        if "workers" not in skip:
            for code, root in order:
                raw["workers"][code].append(_run(root, {**cells_job, "worker": True,
                                                        "profile_pass": False},
                                                 f"{code} in a two-worker study "
                                                 f"(repeat {rep + 1})", copies=2))
    vector = []
    if "vector" not in skip:
        for n in (int(v) for v in args.envs.split(",")):
            for domain in ("sim", "real"):
                vector += _run(ROOT, {**base, "mode": "vector", "envs": n, "domain": domain,
                                      "rollouts": args.vector_rollouts},
                               f"new, {n} envs per worker, {domain}")
    cnn = [] if "cnn" in skip else _run(ROOT, {**base, "mode": "cnn", "repeats": 20},
                                        "batched CNN")[0]["cnn"]
    warp = [] if "warp" in skip else _run(ROOT, {**base, "mode": "warp", "repeats": 5},
                                          "batched backgrounds")[0]["warp"]
    cells = {(mode, code): _median_cells(raw[mode][code]) for mode in raw for code, _ in codes
             if raw[mode][code]}
    tables, notes, summary = _report(args, cells, vector, cnn, warp, codes)
    print("\n\n".join(t.caption + "\n" + _plain(t) for t in tables))
    print("\n".join(notes))
    if args.json:
        args.json.write_text(json.dumps({"cells": {f"{m}/{c}": {"/".join(k): v for k, v in
                                                                 d.items()}
                                                   for (m, c), d in cells.items()},
                                         "vector": vector, "cnn": cnn, "warp": warp,
                                         "summary": summary},
                                        indent=2))
    if args.doc:
        write_speed_doc(args.doc, title="Rollout cost: CPU seconds per rollout, phases, "
                        "envs per worker, projections (issue 32)", tables=tables, notes=notes,
                        started=started)


def _plain(table) -> str:
    return "\n".join(" | ".join(str(c) for c in row) for row in [table.header, *table.rows])


def _report(args, cells: dict, vector: list, cnn: list, warp: list, codes: list):
    from speed_doc import Table

    tables, notes, summary = [], [], {}
    have_old = any(c == "old" for c, _ in codes)
    for mode, what in (("alone", "alone (one process, default threads)"),
                       ("workers", "inside a two-worker study (two processes at once, "
                                   "pool-worker thread settings)")):
        new = cells.get((mode, "new"))
        if not new:
            continue
        old = cells.get((mode, "old"), {})
        rows = []
        for key, cell in new.items():
            profile, task, domain = key
            prev = old.get(key)
            same = "-" if prev is None else ("yes" if prev["digest"] == cell["digest"]
                                             else "NO")
            rows.append([profile, task, domain, cell["max_frames"], f"{cell['frames']:.0f}",
                         f"{cell['cpu_s']:.3f}", f"{prev['cpu_s']:.3f}" if prev else "-",
                         f"{prev['cpu_s'] / cell['cpu_s']:.2f}x" if prev else "-",
                         f"{cell['wall_s']:.2f}", f"{prev['wall_s']:.2f}" if prev else "-",
                         f"{cell['query_ms']:.2f}", f"{prev['query_ms']:.2f}" if prev else "-",
                         same])
        tables.append(Table(f"CPU seconds per rollout, {what}; median over repeats "
                            f"(and workers); frames = mean executed", [
                                "profile", "task", "domain", "limit", "frames", "CPU s new",
                                "CPU s old", "speed-up", "wall s new", "wall s old",
                                "query ms new", "query ms old", "same records"], rows,
                            align=["l", "l", "l"] + ["r"] * 9 + ["l"]))
        if have_old and mode == "alone":
            default = [k for k in new if k[0] == "default"]
            ratio = sum(old[k]["cpu_s"] for k in default) / sum(new[k]["cpu_s"] for k in default)
            summary["default_speedup_alone"] = ratio
    for code in ("new", "old"):
        alone = cells.get(("alone", code))
        if not alone or not any(c.get("phases") for c in alone.values()):
            continue
        rows = []
        for (profile, task, domain), cell in alone.items():
            shares = cell["phases"]
            rows.append([profile, task, domain, f"{cell['cpu_s']:.3f}",
                         *(f"{shares[p] * cell['cpu_s']:.3f}" for p in PHASE_NAMES)])
        tables.append(Table(f"Phases of a rollout, {code} code, alone: CPU seconds per rollout "
                            "(cProfile self-time shares x unprofiled CPU)",
                            ["profile", "task", "domain", "CPU s", *PHASE_NAMES], rows,
                            align=["l", "l", "l"] + ["r"] * (1 + len(PHASE_NAMES))))
    if vector:
        one = {v["domain"]: v["per_cpu_s"] for v in vector if v["envs"] == 1}
        digests = {v["domain"]: {x["digest"] for x in vector if x["domain"] == v["domain"]}
                   for v in vector}
        rows = [[v["envs"], v["domain"], v["rollouts"], f"{v['frames']:.0f}",
                 f"{v['per_cpu_s']:.3f}", f"{v['per_cpu_s'] / one[v['domain']]:.2f}x",
                 f"{v['wall_s'] / v['rollouts']:.2f}", f"{v['setup_cpu_s']:.1f}",
                 f"{v['maxrss_mb']:.0f}",
                 "yes" if len(digests[v["domain"]]) == 1 else "NO"] for v in vector]
        tables.append(Table("Envs per worker (new code, default settings, Cup, one process "
                            "with pool-worker threads): rollouts per CPU-second", [
                                "envs", "domain", "rollouts", "frames", "rollouts / CPU s",
                                "vs 1 env", "wall s / rollout", "setup CPU s", "max RSS MB",
                                "same records"], rows, align=["r", "l"] + ["r"] * 7 + ["l"]))
    if cnn:
        rows = [[c["policy"], c["n"], f"{c['single_ms']:.3f}", f"{c['batch_ms']:.3f}",
                 f"{c['single_ms'] / c['batch_ms']:.2f}x", "yes" if c["exact"] else "no",
                 f"{c['max_abs_diff']:.2e}"] for c in cnn]
        tables.append(Table("Batched CNN (opt-in): CPU ms per query, N single queries vs one "
                            "forward of N (64 px dual fisheye inputs)",
                            ["policy", "N", "single ms", "batched ms", "speed-up",
                             "bit-identical", "max |diff| of a row"], rows,
                            align=["l"] + ["r"] * 4 + ["l", "r"]))
    if warp:
        rows = [[w["n"], f"{w['apart_ms']:.1f}", f"{w['together_ms']:.1f}",
                 f"{w['apart_ms'] / w['together_ms']:.2f}x", "yes" if w["identical"] else "NO"]
                for w in warp]
        tables.append(Table("Gaussian backgrounds of N sub-envs (dual 64 px fisheyes, Warp): N "
                            "render_batch calls of 2 cameras vs one of 2N; CPU ms per round",
                            ["N", "N calls ms", "one call ms", "speed-up", "bit-identical"],
                            rows, align=["r", "r", "r", "r", "l"]))
    workers = {code: cells.get(("workers", code)) for code in ("new", "old")}
    rows = []
    from_code = [c for c in ("new", "old") if workers.get(c) and
                 all(("paper", t, d) in workers[c] for t in PAPER["tasks"]
                     for d in ("sim", "real"))]
    if from_code:
        yubi = _yubi_limits()
        own, said = _replica_limits(yubi)
        notes.append(f"Replica time limits: {said}; paper profile: YUBI's (600 frames, 1,800 "
                     "for Duo Tape/Pen and G2 Pen).")
        for code in from_code:
            w = workers[code]
            replica = _project(w, REPLICA, "paper", own) / 2
            paper = _project(w, PAPER, "paper", yubi) / 2
            default = _project(w, DEFAULT, "default", {s: {"cup": 200} for s in yubi}) / 2
            summary[f"{code}_minutes"] = {"replica": replica / 60, "paper": paper / 60,
                                          "default": default / 60}
            rows.append([code, f"{replica / 60:,.0f}", f"{paper / 60:,.0f}",
                         f"{default / 60:,.1f}"])
        tables.append(Table("Projected rollout wall time on 2 cores (minutes): measured "
                            "two-worker CPU per frame x frames x rollouts / 2 cores",
                            ["code", "replica (11 conditions, its limits: see the notes)",
                             "paper profile (10 conditions, YUBI limits)",
                             "default profile (720 rollouts)"], rows,
                            align=["l", "r", "r", "r"]))
    base = next((root for code, root in codes if code == "old"), None)
    if base is not None:
        commit = subprocess.run(["git", "-C", str(base), "rev-parse", "--short=7", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
        notes.append(f"old = the code at commit {commit} (--base {base}); new = this checkout.")
    notes += [
        "Cells: scene duo, clean bundle, the profile's two learned policies, "
        f"{args.trials} trial(s) each per cell and process; paper cells run YUBI's time limits "
        f"capped at {args.paper_max_frames} frames (projections scale the measured CPU per "
        "frame to the full limits: successful rollouts keep their measured length, the others "
        "run to the limit).",
        "same records: sha256 of every rollout record (success, progress, frames, queries, "
        "first grasp ...) of the cell equal for old and new code.",
        "Projections count 3 scenes x conditions x trials x 2 policies per task (+ 3 x 20 x 2 "
        "real) and assume the duo scene's cost for all three scenes; the fixed stages "
        "(bundles, quality scoring, tables) are not included.",
    ]
    return tables, notes, summary


def _replica_limits(yubi: dict) -> tuple[dict, str]:
    """The replica's limits: the paper profile's own when set (issue 33), else YUBI's."""
    from bench.demo.run import PROFILES

    own = PROFILES["paper"].max_frames
    if isinstance(own, dict) and own and all(int(v) > 0 for v in own.values()):
        return {s: dict(own) for s in yubi}, f"the paper profile's own {own}"
    return yubi, "YUBI's (the paper profile's own limits were not set in this checkout)"


def _yubi_limits() -> dict:
    from bench.demo.run import _yubi_max_frames

    return _yubi_max_frames()


if __name__ == "__main__":
    main()
