"""``bench task validate FILE`` and ``bench task show FILE --out DIR``: check and draw task files.

``validate`` reads a task file (JSON / TOML, ``splatbench-task/1``) with every
check the environment applies, optionally builds the MuJoCo world on a scene's
table (``--scene``), and prints a summary; a bad field exits 2 with one line.

``show`` writes, into ``--out`` (staged, then renamed into place)::

    layout.png        MuJoCo exterior view of initial condition --condition (robot at home)
    grid.png / .pdf   top-down map: table, receptacle, the actor at every grid condition
    grid.csv          the fixed grid (index, x, y, yaw_deg; table frame) shared by sim and real
    task.json         the resolved task (objects, grid, rule) as the bench reads it
    manifest.json     tool id, parameters, sha256 of the task file and every output

Stdlib-only imports at module level; numpy/mujoco/matplotlib load inside the handlers.
"""

from __future__ import annotations

import argparse

TOOL = "task-show/1"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench task validate|show``."""
    from bench.sim.config import BACKGROUNDS
    p = subparsers.add_parser("task", help="validate and draw task files (objects, grid, rule)",
                              description="Task files: splatbench-task/1 JSON or TOML "
                              "(docs/tasks-and-robots.md).")
    sub = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    v = sub.add_parser("validate", help="check a task file; one-line error and exit 2 if bad")
    v.add_argument("file", help="task file (.json / .toml) or a registered task name")
    v.add_argument("--scene", default=None,
                   help="scene bundle: also check the layout fits its table and build the world")
    v.set_defaults(func=run_validate)
    s = sub.add_parser("show", help="render the initial layout and grid of a task to PNG")
    s.add_argument("file", help="task file (.json / .toml) or a registered task name")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    s.add_argument("--scene", default=None,
                   help="scene bundle (its table; background drawn with --background gaussian) "
                   "[default: a 1.2 x 0.8 m table at z = 0, no background]")
    s.add_argument("--condition", type=int, default=0,
                   help="initial-condition index drawn in layout.png")
    s.add_argument("--robot", default="floating-gripper",
                   help="floating-gripper, arm6, a robot .json or an MJCF/URDF path")
    s.add_argument("--background", default="none", choices=BACKGROUNDS,
                   help="draw the scene's Gaussians behind the layout (needs --scene)")
    s.add_argument("--size", type=int, nargs=2, default=[480, 640], metavar=("H", "W"),
                   help="layout.png height and width in pixels")
    s.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _task(name: str, scene_root=None):
    from bench.sim.tasks import get_task, is_deformable

    task = get_task(name, scene_root=scene_root)
    if is_deformable(task):  # the rope: no task file, no rigid layout to check or draw
        from bench.errors import BenchError

        raise BenchError(f"task {task.name!r} is deformable and has no task file to validate or "
                         f"show; run it with `bench rollout --task {task.name} --policy "
                         f"{task.policies[0]}`")
    return task


def _scene(path: str | None):
    """The scene bundle, or a bare default table (no background) when none is given."""
    if path is not None:
        from bench.sim.env import resolve_scene

        return resolve_scene(path)
    from bench.scene.bundle import SceneBundle, TableSpec
    from bench.scene.gaussians import GaussianSplats

    return SceneBundle(name="default-table", background=GaussianSplats.empty(), table=TableSpec())


def summary(task) -> dict:
    """A JSON-able description of a resolved task (``task.json``, ``validate`` output)."""
    from bench.sim.objects import Mesh

    def obj(spec):
        shape = spec.shape
        if isinstance(shape, Mesh):
            geometry = {"type": "mesh", "source": shape.source, "sha256": shape.sha256,
                        "extent_m": shape.extent.tolist(), "collision_parts": len(shape.parts),
                        "textured": shape.texture is not None}
        else:
            import dataclasses

            geometry = {"type": type(shape).__name__, **dataclasses.asdict(shape)}
        return {"name": spec.name, "shape": geometry, "mass_kg": spec.mass,
                "friction": spec.friction, "rgba": list(spec.rgba),
                "resting_height_m": spec.resting_height(),
                "footprint_radius_m": spec.footprint_radius()}

    grid = task.grid
    return {
        "name": task.name, "instruction": task.instruction, "source": task.source,
        "sha256": task.sha256, "actor": obj(task.actor), "receptacle": obj(task.receptacle),
        "receptacle_xy": list(task.receptacle_xy), "receptacle_yaw_deg": task.receptacle_yaw_deg,
        "grid": {"xs": list(grid.xs), "ys": list(grid.ys), "yaws_deg": list(grid.yaws_deg),
                 "size": grid.size, "seed": grid.seed},
        "success": {"rule": task.rule, "params": dict(task.rule_params)},
        "grasp_height_m": task.grasp_height, "time_limit_frames": task.max_frames,
        "chunking": {"chunk_size": task.chunk_size, "execute": task.execute},
        "home_yaw_deg": task.home_yaw_deg,
    }


def run_validate(args: argparse.Namespace) -> int:
    """Handler of ``bench task validate``."""
    scene = _scene(args.scene) if args.scene else None
    task = _task(args.file, getattr(scene, "root", None))
    extra = ""
    if scene is not None:
        from bench.sim.world import TableGeometry, World

        World(task, TableGeometry.from_scene_table(scene.table))  # layout fits + model compiles
        extra = f"; fits the table of scene {scene.name!r} and compiles"
    s = summary(task)
    print(f"{task.name}: ok - actor {task.actor.name} ({s['actor']['shape']['type']}), "
          f"receptacle {task.receptacle.name} ({s['receptacle']['shape']['type']}), "
          f"rule {task.rule}, {task.grid.size} grid conditions, {task.max_frames} frames, "
          f"chunk {task.chunk_size}/{task.execute}{extra}")
    return 0


def _grid_figure(task, table, path_png, path_pdf) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    hx, hy = table.size[0] / 2, table.size[1] / 2
    ax.add_patch(plt.Rectangle((-hx, -hy), 2 * hx, 2 * hy, fill=False, lw=1.5, color="0.3"))
    rx, ry = task.receptacle_xy
    ax.add_patch(plt.Circle((rx, ry), task.receptacle.footprint_radius(), color="tab:green",
                            alpha=0.3, label=f"receptacle {task.receptacle.name}"))
    conditions = task.grid.conditions()
    radius = task.actor.footprint_radius()
    for index, (x, y, yaw) in enumerate(conditions):
        ax.add_patch(plt.Circle((x, y), radius, fill=False, color="tab:blue", lw=0.6,
                                alpha=0.5))
        ax.arrow(x, y, 0.8 * radius * np.cos(yaw), 0.8 * radius * np.sin(yaw),
                 head_width=0.006, color="tab:blue", lw=0.6)
        if index < 20:
            ax.annotate(str(index), (x, y), fontsize=6, ha="center", va="center")
    ax.plot([], [], color="tab:blue", label=f"actor {task.actor.name}: {len(conditions)} "
            "grid conditions")
    ax.set_aspect("equal")
    ax.set_xlim(-hx - 0.05, hx + 0.05)
    ax.set_ylim(-hy - 0.05, hy + 0.05)
    ax.set_xlabel("table x (m)")
    ax.set_ylabel("table y (m)")
    ax.set_title(f"{task.name}: {task.instruction}", fontsize=9)
    ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    from io import BytesIO

    from bench.provenance import atomic_write_bytes

    for path, fmt in ((path_png, "png"), (path_pdf, "pdf")):
        buffer = BytesIO()
        fig.savefig(buffer, format=fmt, metadata={"CreationDate": None} if fmt == "pdf" else {})
        atomic_write_bytes(path, buffer.getvalue())
    plt.close(fig)


def run_show(args: argparse.Namespace) -> int:
    """Handler of ``bench task show``."""
    from bench.safety import preflight_output_dir

    inputs = [("FILE", args.file), ("--scene", args.scene)]
    preflight_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)  # before work
    import csv
    import io

    import numpy as np

    from bench.errors import BenchError
    from bench.provenance import (
        atomic_write_bytes,
        atomic_write_json,
        make_manifest,
        staged_output_dir,
    )

    if args.background == "gaussian" and args.scene is None:
        raise BenchError("--background gaussian needs --scene DIR (a bundle with background.ply)")
    if args.condition < 0:
        raise BenchError(f"--condition must be >= 0 (a grid index), got {args.condition}")
    scene = _scene(args.scene)
    task = _task(args.file, getattr(scene, "root", None))
    import bench.sim

    env = bench.sim.make_env(task, scene, obs_mode="state", render_mode="rgb_array",
                             robot=args.robot, background=args.background,
                             exterior_size=tuple(args.size), min_table_gaussians=0)
    try:
        env.reset(seed=args.condition)
        image = env.render()
        table = env.unwrapped.table
        with staged_output_dir(args.out, overwrite=args.overwrite,
                                inputs=inputs) as tmp:
            from PIL import Image

            buffer = io.BytesIO()
            Image.fromarray(image).save(buffer, format="PNG")
            atomic_write_bytes(tmp / "layout.png", buffer.getvalue())
            _grid_figure(task, table, tmp / "grid.png", tmp / "grid.pdf")
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")
            writer.writerow(["index", "x_m", "y_m", "yaw_deg"])
            for index, (x, y, yaw) in enumerate(task.grid.conditions()):
                writer.writerow([index, repr(float(x)), repr(float(y)),
                                 repr(float(np.rad2deg(yaw)))])
            atomic_write_bytes(tmp / "grid.csv", text.getvalue().encode())
            atomic_write_json(tmp / "task.json", summary(task))
            outputs = {n: tmp / n for n in ("layout.png", "grid.png", "grid.pdf", "grid.csv",
                                            "task.json")}
            inputs = {"task": task.source} if task.source else {}
            manifest = make_manifest(
                tool=TOOL, params={"task": task.name, "condition": args.condition,
                                   "robot": args.robot, "scene": scene.name,
                                   "background": args.background, "size": list(args.size)},
                seed=args.condition, inputs=inputs, outputs=outputs,
                counts={"grid_conditions": task.grid.size})
            atomic_write_json(tmp / "manifest.json", manifest)
    finally:
        env.close()
    print(f"{task.name}: layout of condition {args.condition} and the {task.grid.size}-point "
          f"grid -> {args.out}")
    return 0
