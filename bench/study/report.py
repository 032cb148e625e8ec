"""``bench study report``: one self-contained HTML page of a finished study output.

:func:`write_report` reads a study output directory (``study.json``, ``results.sqlite``
through :mod:`bench.study.store`, ``tables/*.csv``, ``real_results.json``, the demo's
``config.json`` / ``manifest.json`` when present) and writes ``index.html`` with its
images beside it (``img/``; PNG plots with a PDF copy, thumbnails, animated GIFs), plus
a ``manifest.json`` (:func:`bench.provenance.make_manifest`). The page loads nothing from
the network and opens from disk.

Sections: the design (scenes, conditions, tasks, policies, trials, real-results source),
success rates with Wilson intervals per condition (plot + table), ranking agreement
(MMRV, Pearson), significance transitions, Test-view quality per condition with
thumbnails (captured | clean | condition, rendered with the study's own functions:
:func:`bench.study.captures.capture_views` / :func:`metrics.views.render_frames`),
the reliability predictors against "always reliable", paired wrist-view rollouts
(clean vs condition from the same start, re-run deterministically with
:func:`bench.study.work_unit.make_study_env`'s env and the study's policies; capped by
``max_rollouts``) and provenance. The page sets ``data-images-ok`` on ``<body>`` once
every image has loaded (``"true"``) or one failed (``"false"``), for browser checks.
"""

from __future__ import annotations

import csv
import html
import io
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.study.plan import CONTROL  # the clean bundle on other starts: not paired with clean

TOOL_ID = "study-report/1"
REPORT_DIR = "report"
CLEAN = "clean"

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;
max-width:1180px;color:#1d1d1f;background:#fff;padding:0 16px}
h1{font-size:26px;margin-bottom:4px}h2{font-size:20px;border-bottom:1px solid #ddd;
padding-bottom:4px;margin-top:32px}h3{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #d0d0d0;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.muted{color:#666;font-size:13px}.grid{display:flex;flex-wrap:wrap;gap:10px}
figure{margin:0;padding:4px;border:1px solid #eee;font-size:12px}
figure img{image-rendering:pixelated;display:block}
code{background:#f5f5f5;padding:0 3px}
"""

_SCRIPT = """
(function(){
  function check(){
    var imgs=document.images, ok=true;
    for(var i=0;i<imgs.length;i++){
      if(!imgs[i].complete){return false;}
      if(!(imgs[i].naturalWidth>0)){ok=false;}
    }
    document.body.setAttribute('data-images-ok', ok ? 'true' : 'false');
    document.body.setAttribute('data-images', String(imgs.length));
    return true;
  }
  window.addEventListener('load', function(){
    if(!check()){var t=setInterval(function(){if(check()){clearInterval(t);}},50);}
  });
})();
"""


def _log(message: str) -> None:
    print(f"[bench study report] {message}", file=sys.stderr)


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _fmt(value: Any) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return _esc(value)
    if x != x:
        return "n/a"
    if x == int(x) and abs(x) < 1e9 and "." not in str(value):
        return str(int(x))
    return f"{x:.3f}"


def _table(columns: list[str], rows: list[list[Any]], *, left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{_esc(c)}</th>'
                   for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_fmt(v)}</td>'
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _csv_table(rows: list[dict[str, str]], columns: list[str] | None = None, left: int = 1) -> str:
    if not rows:
        return '<p class="muted">(no rows)</p>'
    columns = columns or [c for c in rows[0] if c != "real_source"]
    return _table(columns, [[r.get(c, "") for c in columns] for r in rows], left=left)


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _thumb(image: np.ndarray, size: int) -> np.ndarray:
    """``image`` [H, W, 3] (uint8 or float in [0, 1]) scaled so its longer side is ``size``."""
    from PIL import Image

    if image.dtype != np.uint8:
        image = (np.clip(image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    h, w = image.shape[:2]
    scale = size / max(h, w)
    if scale >= 1.0:
        return image
    im = Image.fromarray(image).resize((max(1, round(w * scale)), max(1, round(h * scale))),
                                       Image.LANCZOS)
    return np.asarray(im)


def _resolve(path: str, run_dir: Path) -> Path:
    """A bundle path of the store: as given, under the run dir, or under the checkout."""
    import bench

    p = Path(path)
    for base in (Path.cwd(), run_dir, Path(bench.__file__).resolve().parents[1]):
        if (base / p).exists():
            return base / p
    return p


def _load_spec(run_dir: Path) -> Any:
    from bench.study.spec import spec_from_dict

    data = json.loads((run_dir / "study.json").read_text())
    import bench

    checkout = Path(bench.__file__).resolve().parents[1]
    scenes = [str(v) for v in (data.get("scenes") or {}).values()]
    base = Path.cwd()
    for candidate in (Path.cwd(), run_dir, checkout):
        if all((candidate / s).exists() for s in scenes):
            base = candidate
            break
    return spec_from_dict(data, base=base)


# --------------------------------------------------------------------------- sections


def _success_plot(rates: list[dict[str, str]], img: Path, conditions: list[str]) -> list[str]:
    """Pooled (over scenes) sim success rate per condition with Wilson intervals; real dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from protocols.stats import wilson_interval

    pooled: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in rates:
        key = (r["task"], r["policy"], r["domain"], r["condition"])
        pooled[key][0] += int(r["successes"])
        pooled[key][1] += int(r["trials"])
    names = []
    for task in sorted({k[0] for k in pooled}):
        policies = sorted({k[1] for k in pooled if k[0] == task})
        fig, ax = plt.subplots(figsize=(max(5.0, 0.75 * len(conditions) + 2), 3.4), dpi=90)
        for j, policy in enumerate(policies):
            color = f"C{j}"
            xs, ys, lo, hi = [], [], [], []
            for i, cond in enumerate(conditions):
                k, n = pooled.get((task, policy, "sim", cond), (0, 0))
                if n:
                    iv = wilson_interval(k, n)
                    xs.append(i + (j - (len(policies) - 1) / 2) * 0.15)
                    ys.append(iv.estimate)
                    lo.append(iv.low)
                    hi.append(iv.high)
            ys_a = np.array(ys)
            ax.errorbar(xs, ys_a, yerr=[ys_a - np.array(lo), np.array(hi) - ys_a], fmt="o",
                        color=color, capsize=3, label=f"{policy} (sim)")
            real = [pooled[(task, policy, "real", c)] for c in conditions
                    if (task, policy, "real", c) in pooled]
            if real:
                k = sum(x[0] for x in real)
                n = sum(x[1] for x in real)
                ax.axhline(k / n, color=color, linestyle="--", linewidth=1,
                           label=f"{policy} (real {k}/{n})")
        ax.set_xticks(range(len(conditions)))
        ax.set_xticklabels(conditions, rotation=35, ha="right", fontsize=8)
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("success rate (95 % Wilson)")
        ax.set_title(f"task {task}: success per condition, pooled over scenes", fontsize=10)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        name = f"success_{task}"
        fig.savefig(img / f"{name}.png", metadata={"Software": None})
        fig.savefig(img / f"{name}.pdf", metadata={"Creator": None, "Producer": None,
                                                   "CreationDate": None})
        plt.close(fig)
        names.append(name)
    return names


def _views(spec: Any, run_dir: Path, scene: str, path: Path, cond: str) -> tuple[list[str],
                                                                                  np.ndarray,
                                                                                  Any]:
    """(frame names, renders [N, H, W, 3], captured references or None) of one condition."""
    from bench.scene.bundle import load_scene
    from metrics.views import render_frames, scene_cameras

    bundle = load_scene(path)
    if scene in spec.captures:
        from bench.study.captures import capture_views, prepare_test_capture

        capture = prepare_test_capture(spec, run_dir, scene)  # already written by the study
        sets = capture_views(bundle, capture, scene=scene, condition=cond,
                             backend=spec.render_backend)
        names = [n for s in sets for n in s.frame_names]
        frames = [f for s in sets for f in s.frames]
        refs = [r for s in sets for r in (s.references if s.references is not None
                                          else [None] * len(s.frames))]
        return names, frames, refs
    cams = scene_cameras(bundle, "test")
    frames = render_frames(bundle.background, cams, backend=spec.render_backend, progress=False)
    names = [getattr(c, "name", "") or f"view_{i:04d}" for i, c in enumerate(cams)]
    synthetic = run_dir / "captures" / scene / "test"  # a generated world's synthetic capture
    refs = [_read_png(synthetic / f"{n}.png") for n in names]
    return names, list(frames), refs


def _read_png(path: Path) -> np.ndarray | None:
    if not path.is_file():
        return None
    import imageio.v3 as iio

    return np.asarray(iio.imread(path))[..., :3]


def _thumbnails(spec: Any, run_dir: Path, conditions: dict[tuple[str, str], Path], img: Path,
                size: int, max_views: int) -> dict[str, list[dict[str, Any]]]:
    """Per condition: [{scene, view, files: {captured?, clean, condition}}] (PNG thumbnails)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for scene in spec.scene_names:
        if (scene, CLEAN) not in conditions:
            continue
        names, clean, refs = _views(spec, run_dir, scene, conditions[(scene, CLEAN)], CLEAN)
        keep = list(range(len(names) if max_views is None else min(max_views, len(names))))
        base: dict[int, dict[str, str]] = {}
        for i in keep:
            files = {}
            if refs[i] is not None:
                files["captured"] = f"img/thumb_{scene}_{i:02d}_captured.png"
                (img.parent / files["captured"]).write_bytes(_png(_thumb(np.asarray(refs[i]),
                                                                          size)))
            files["clean"] = f"img/thumb_{scene}_{i:02d}_clean.png"
            (img.parent / files["clean"]).write_bytes(_png(_thumb(np.asarray(clean[i]), size)))
            base[i] = files
        for cond in spec.all_conditions:
            if cond in (CLEAN, CONTROL) or (scene, cond) not in conditions:  # control = clean
                continue
            cnames, frames, _ = _views(spec, run_dir, scene, conditions[(scene, cond)], cond)
            for i in keep:
                if i >= len(frames):
                    continue
                rel = f"img/thumb_{scene}_{i:02d}_{cond}.png"
                (img.parent / rel).write_bytes(_png(_thumb(np.asarray(frames[i]), size)))
                out[cond].append({"scene": scene, "view": cnames[i],
                                  "files": {**base[i], "condition": rel}})
    return out


def _pick_pairs(rows: list[Any], spec: Any, per_condition: int) -> dict[str, list[tuple]]:
    """Per condition up to ``per_condition`` sim (scene, task, policy, trial) keys.

    Outcome changes (clean succeeded, condition failed or back) first, then by key.
    """
    sim = {(r.scene, r.condition, r.task, r.policy, r.trial): r.success
           for r in rows if r.domain == "sim"}
    picks: dict[str, list[tuple]] = {}
    for cond in spec.all_conditions:
        if cond in (CLEAN, CONTROL):  # the control's trials start elsewhere: not paired
            continue
        keys = sorted((s, t, p, tr) for (s, c, t, p, tr) in sim
                      if c == cond and (s, CLEAN, t, p, tr) in sim)
        keys.sort(key=lambda k: (sim[(k[0], cond, *k[1:])] == sim[(k[0], CLEAN, *k[1:])],
                                 k[3], k))
        chosen: list[tuple] = []
        for k in keys:  # spread over scenes/policies: one per (scene, policy) first
            if len(chosen) >= per_condition:
                break
            if all((k[0], k[2]) != (c[0], c[2]) for c in chosen):
                chosen.append(k)
        for k in keys:
            if len(chosen) >= per_condition:
                break
            if k not in chosen:
                chosen.append(k)
        picks[cond] = chosen
    return picks


class _Recorder:
    """``env`` that keeps the camera images of every observation it returns.

    The rig's ``*_rgb`` keys side by side: what the policy saw, one frame per policy query.
    """

    def __init__(self, env: Any) -> None:
        self._env = env
        self.frames: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def _keep(self, obs: Any) -> None:
        if isinstance(obs, dict):
            images = [np.asarray(obs[k]) for k in sorted(obs) if k.endswith("_rgb")]
            if images:
                self.frames.append(np.concatenate(images, axis=1))

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        out = self._env.reset(*args, **kwargs)
        self._keep(out[0])
        return out

    def step(self, *args: Any, **kwargs: Any) -> Any:
        out = self._env.step(*args, **kwargs)
        self._keep(out[0])
        return out


def _rerun(spec: Any, bundles: dict[tuple[str, str], Path], key: tuple, cond: str,
           every: int, cache: dict) -> tuple[list[np.ndarray], bool]:
    """Wrist frames (every ``every``-th) and success of one sim rollout, re-run."""
    scene, task, policy, trial = key
    ck = (scene, cond, task, policy, trial)
    if ck in cache:
        return cache[ck]
    from bench.sim.rollout import run_episode
    from bench.study.deployment import Deployment
    from bench.study.plan import init_index
    from bench.study.work_unit import RolloutChunk, WorkerState

    state = WorkerState(spec, keep_env=False)
    chunk = RolloutChunk(scene=scene, condition=cond, task=task, domain="sim",
                         items=((policy, trial),), bundle=str(bundles[(scene, cond)]),
                         manifest_sha256="")
    env, policies = state.env_and_policies(chunk)
    try:
        deployment = Deployment.from_dict(spec.deployment)
        measured = None
        if deployment.measured:
            from bench.study.deployment import measure_latency_ms

            measured = measure_latency_ms(env, policies[policy],
                                          init_index=init_index(spec, "sim", trial))
        seen = _Recorder(env)
        record, _, _ = run_episode(seen, policies[policy],
                                   init_index=init_index(spec, "sim", trial),
                                   episode=trial, policy_name=policy,
                                   execution=deployment.execution_for(measured),
                                   video=True)  # every step's images: the GIF's frames
    finally:
        state.close()
    kept = seen.frames[::every]
    cache[ck] = (kept, bool(record.success))
    return cache[ck]


def _gif(left: list[np.ndarray], right: list[np.ndarray], path: Path, scale: int) -> None:
    """Animated GIF of the two frame lists side by side (the shorter one holds its last frame)."""
    from PIL import Image

    n = max(len(left), len(right))
    frames = []
    for i in range(n):
        a = left[min(i, len(left) - 1)]
        b = right[min(i, len(right) - 1)]
        h = max(a.shape[0], b.shape[0])
        gap = np.full((h, 3, 3), 255, np.uint8)
        row = np.concatenate([a[:h], gap, b[:h]], axis=1).astype(np.uint8)
        im = Image.fromarray(row)
        if scale > 1:
            im = im.resize((im.width * scale, im.height * scale), Image.NEAREST)
        frames.append(im)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=120, loop=0,
                   optimize=True)


def _rollout_strips(spec: Any, store_rows: list[Any], bundles: dict[tuple[str, str], Path],
                    img: Path, *, per_condition: int, max_rollouts: int, every: int
                    ) -> tuple[dict[str, list[dict[str, Any]]], int, list[str]]:
    """Per condition: [{key, gif, clean/cond success}], rollouts re-run, notes."""
    stored = {(r.scene, r.condition, r.task, r.policy, r.trial): r.success
              for r in store_rows if r.domain == "sim"}
    picks = _pick_pairs(store_rows, spec, per_condition)
    cache: dict = {}
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    notes = []
    for cond, keys in picks.items():
        for key in keys:
            scene, task, policy, trial = key
            need = sum((k[0], c, *k[1:]) not in cache for k, c in ((key, CLEAN), (key, cond)))
            if len(cache) + need > max_rollouts:
                notes.append(f"rollout cap {max_rollouts} reached: {cond} {key} not re-run")
                continue
            clean, ok_clean = _rerun(spec, bundles, key, CLEAN, every, cache)
            damaged, ok_cond = _rerun(spec, bundles, key, cond, every, cache)
            rel = f"img/rollout_{cond}_{scene}_{task}_{policy}_{trial}.gif"
            _gif(clean, damaged, img.parent / rel, scale=2 if clean[0].shape[0] <= 96 else 1)
            same = (ok_clean == stored[(scene, CLEAN, task, policy, trial)]
                    and ok_cond == stored[(scene, cond, task, policy, trial)])
            if not same:
                notes.append(f"re-run of {cond} {key} differs from the stored outcome")
            out[cond].append({"scene": scene, "task": task, "policy": policy, "trial": trial,
                              "gif": rel, "clean": ok_clean, "condition": ok_cond,
                              "matches_store": same})
    return out, len(cache), notes


def _git_commit() -> str:
    import bench

    root = Path(bench.__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=root, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=root, timeout=30,
                               check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head} (with uncommitted changes)" if dirty else head


def _versions() -> dict[str, str]:
    from importlib import metadata

    from bench.provenance import __version__

    out = {"splatbench": __version__, "python": sys.version.split()[0]}
    for name in ("numpy", "torch", "mujoco", "scipy", "matplotlib", "pillow", "imageio"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


# --------------------------------------------------------------------------- the page


def write_report(run_dir: str | Path, out: str | Path | None = None, *,
                 overwrite: bool = True, thumb_px: int = 96, max_views: int | None = None,
                 rollouts_per_condition: int = 2, max_rollouts: int = 40,
                 frame_every: int = 1) -> Path:
    """Write the HTML report of the study output ``run_dir``; returns its directory.

    Args:
        run_dir: A finished study output (``study.json``, ``results.sqlite``, ``tables/``).
        out: Report directory (default ``run_dir/report``).
        overwrite: Replace an existing ``out`` (only one the bench wrote).
        thumb_px: Longer side of the Test-view thumbnails (px).
        max_views: Test views shown per scene and condition (None: every one).
        rollouts_per_condition: Paired rollouts (clean vs condition) re-run per condition.
        max_rollouts: Cap on rollouts re-run in all (a clean one shared by conditions
            counts once).
        frame_every: Keep every n-th observation in the animations (the env returns one
            per policy query, i.e. per action chunk).
    """
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from bench.study.store import DB_NAME, ResultsStore

    run_dir = Path(run_dir)
    db = run_dir / DB_NAME
    if not (run_dir / "study.json").is_file() or not db.is_file():
        raise BenchError(f"{run_dir} is not a finished study output (needs study.json and "
                         f"{DB_NAME}); pass the --out of bench study run or bench demo")
    if not (run_dir / "tables").is_dir():
        raise BenchError(f"{run_dir} has no tables/ (the study did not finish); resume it first")
    out = Path(out) if out is not None else run_dir / REPORT_DIR
    spec = _load_spec(run_dir)
    with ResultsStore.open_read_only(db) as store:
        rows = store.rollouts(spec.name)
        conditions = store.conditions(spec.name)
        real_meta = store.get_meta("real_source")
    bundles = {(c["scene"], c["condition"]): _resolve(c["path"], run_dir) for c in conditions}
    tables = run_dir / "tables"
    inputs = {"results.sqlite": db, "study.json": run_dir / "study.json"}
    for name in ("success_rates", "ranking", "transitions", "quality", "reliability"):
        if (tables / f"{name}.csv").is_file():
            inputs[f"tables/{name}.csv"] = tables / f"{name}.csv"
    conds = list(spec.all_conditions)
    with staged_output_dir(out, overwrite=overwrite, flag="--out",
                           inputs=[("results", db), ("tables", tables)]) as tmp:
        img = tmp / "img"
        img.mkdir()
        _log("plots")
        rates = _read_csv(tables / "success_rates.csv")
        plots = _success_plot(rates, img, conds)
        _log("Test-view thumbnails")
        thumbs = _thumbnails(spec, run_dir, bundles, img, thumb_px, max_views)
        _log("paired rollouts")
        strips, reran, notes = _rollout_strips(spec, rows, bundles, img,
                                               per_condition=rollouts_per_condition,
                                               max_rollouts=max_rollouts, every=frame_every)
        page = _page(spec, run_dir, rows, conditions, real_meta, tables, plots, thumbs, strips,
                     notes, reran, frame_every)
        (tmp / "index.html").write_text(page, encoding="utf-8")
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        weight = sum(p.stat().st_size for p in files)
        outputs = {str(p.relative_to(tmp)): p for p in files
                   if p.name != "manifest.json" and not p.name.startswith(".")}
        atomic_write_json(tmp / "manifest.json", make_manifest(
            tool=TOOL_ID,
            params={"thumb_px": thumb_px, "max_views": max_views,
                    "rollouts_per_condition": rollouts_per_condition,
                    "max_rollouts": max_rollouts, "frame_every": frame_every},
            seed=None, inputs=inputs, outputs=outputs,
            counts={"conditions": len(conds), "rollouts_stored": len(rows),
                    "rollouts_rerun": reran, "images": sum(
                        p.suffix in (".png", ".gif") for p in files),
                    "bytes": weight},
            extra={"study": spec.name}))
    _log(f"wrote {out.name}/index.html ({weight / 1e6:.1f} MB with its images)")
    return out


def write_report_or_warn(run_dir: str | Path) -> Path | None:
    """:func:`write_report` into ``run_dir/report`` after a study or demo run.

    A report that cannot be written is a warning (the study itself finished), not a failure.
    """
    try:
        return write_report(run_dir)
    except Exception as exc:  # noqa: BLE001 - the study's results are complete and kept
        _log(f"warning: report not written ({type(exc).__name__}: {exc}); rerun: "
             f"bench study report {run_dir}")
        return None


def _every(n: int) -> str:
    return "every observation" if n == 1 else f"every {n}th observation"


def _page(spec: Any, run_dir: Path, rows: list[Any], conditions: list[dict[str, Any]],
          real_meta: str | None, tables: Path, plots: list[str],
          thumbs: dict[str, list[dict[str, Any]]], strips: dict[str, list[dict[str, Any]]],
          notes: list[str], reran: int, every: int) -> str:
    real = json.loads(real_meta) if real_meta else {}
    parts = [f"<h1>Study report: {_esc(spec.name)}</h1>",
             f'<p class="muted">Generated by <code>{TOOL_ID}</code> from the study\'s '
             f'results.sqlite and tables/; every image is beside this page (img/).</p>']
    # design
    trials: dict[str, int] = defaultdict(int)
    for r in rows:
        trials[r.domain] += 1
    design = [["scenes", ", ".join(spec.scene_names)],
              ["conditions", ", ".join(spec.all_conditions)],
              ["tasks", ", ".join(spec.tasks)],
              ["policies", "; ".join(f"{t}: {', '.join(p)}" for t, p in spec.policies.items())],
              ["trials per cell", f"sim {spec.trials}, real {spec.real_trials}"],
              ["rollouts stored", ", ".join(f"{d} {n}" for d, n in sorted(trials.items()))],
              ["real results", f"{real.get('label') or real.get('kind') or 'none'}"
               + (f" (sha256 {real['sha256']})" if real.get("sha256") else "")],
              ["metrics", ", ".join(spec.metrics)],
              ["seed", spec.seed]]
    parts += ["<h2>Design</h2>", _table(["", "value"], design, left=2)]
    cond_rows = [[c["scene"], c["condition"], c["tool"], c["manifest_sha256"][:16]]
                 for c in sorted(conditions, key=lambda c: (c["scene"], c["condition"]))]
    parts += ["<details><summary>condition bundles</summary>",
              _table(["scene", "condition", "tool", "manifest sha256"], cond_rows, left=4),
              "</details>"]
    # success rates
    parts.append("<h2>Success rates (95 % Wilson intervals)</h2>")
    for name in plots:
        parts.append(f'<figure><img src="img/{name}.png" alt="{_esc(name)}">'
                     f'<figcaption>sim success per condition, pooled over scenes; dashed: the '
                     f'real domain. <a href="img/{name}.pdf">PDF</a></figcaption></figure>')
    parts.append("<details><summary>per scene</summary>" + _csv_table(
        _read_csv(tables / "success_rates.csv"),
        ["scene", "task", "condition", "domain", "policy", "successes", "trials", "rate",
         "wilson_low", "wilson_high"], left=5) + "</details>")
    # ranking
    parts += ["<h2>Ranking agreement with the real domain</h2>",
              _csv_table(_read_csv(tables / "ranking.csv")),
              "<h2>Significance transitions</h2>",
              _csv_table(_read_csv(tables / "transitions.csv"))]
    # quality
    parts.append("<h2>Quality against the Test views</h2>")
    q: dict[tuple[str, str], list[float]] = defaultdict(list)
    metrics: list[str] = []
    for r in _read_csv(tables / "quality.csv"):
        if r["view_protocol"] == "test":
            q[(r["condition"], r["metric"])].append(float(r["value"]))
            if r["metric"] not in metrics:
                metrics.append(r["metric"])
    qrows = [[c, *[np.mean(q[(c, m)]) if q.get((c, m)) else "" for m in metrics]]
             for c in spec.all_conditions]
    parts.append(_table(["condition (mean over scenes and views)", *metrics], qrows))
    for cond in spec.all_conditions:
        if cond == CLEAN or not thumbs.get(cond):
            continue
        figs = []
        for t in thumbs[cond]:
            imgs = "".join(f'<img src="{f}" alt="{_esc(k)}" title="{_esc(k)}">'
                           for k, f in t["files"].items())
            labels = " | ".join(t["files"])
            figs.append(f'<figure><div style="display:flex;gap:2px">{imgs}</div>'
                        f'<figcaption>{_esc(t["scene"])} {_esc(t["view"])}<br>'
                        f'{_esc(labels)}</figcaption></figure>')
        parts.append(f"<h3>{_esc(cond)}</h3><div class=\"grid\">{''.join(figs)}</div>")
    # reliability
    parts += ["<h2>Reliability predictors</h2>",
              '<p class="muted">Scene-held-out classification of each condition as reliable; '
              '"Always reliable" is the baseline to beat.</p>',
              _csv_table(_read_csv(tables / "reliability.csv")) if (
                  tables / "reliability.csv").is_file() else
              '<p class="muted">No reliability table: the scene-held-out classifier needs at '
              'least two scenes and both labels among the conditions (see the study log).</p>']
    # rollouts
    parts += ["<h2>Paired rollouts (wrist view)</h2>",
              f'<p class="muted">Left: clean, right: the condition, same start (initial '
              f'condition of the trial), {_every(every)} the policy received (one per '
              f'action chunk); {reran} rollouts '
              f're-run deterministically with the study\'s env and policies.</p>']
    for cond, items in strips.items():
        figs = [f'<figure><img src="{s["gif"]}" alt="rollout {_esc(cond)}">'
                f'<figcaption>{_esc(s["scene"])} {_esc(s["task"])} {_esc(s["policy"])} trial '
                f'{s["trial"]}<br>clean {"success" if s["clean"] else "fail"} | {_esc(cond)} '
                f'{"success" if s["condition"] else "fail"}'
                f'{"" if s["matches_store"] else " (differs from the store)"}'
                f'</figcaption></figure>' for s in items]
        parts.append(f"<h3>{_esc(cond)}</h3><div class=\"grid\">{''.join(figs)}</div>")
    if notes:
        parts.append("<ul>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>")
    # provenance
    prov = [[k, v] for k, v in _versions().items()]
    prov.append(["commit", _git_commit()])
    for name in ("manifest.json", "config.json", "real_results.json"):
        p = run_dir / name
        if p.is_file():
            from bench.provenance import sha256_file

            prov.append([name, f"sha256 {sha256_file(p)}"])
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text())
        prov.append(["run tool", f"{data.get('tool')} (bench {data.get('bench_version')})"])
    prov += [["render backend", spec.render_backend], ["image size", spec.image_size]]
    parts += ["<h2>Provenance</h2>", _table(["", "value"], prov, left=2)]
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Study report: {_esc(spec.name)}</title><style>{_CSS}</style>"
            f"<script>{_SCRIPT}</script></head>\n<body>\n{body}\n</body></html>\n")
