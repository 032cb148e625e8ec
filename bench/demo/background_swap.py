"""Which part of a reconstruction costs a policy its skill: ground-truth geometry swapped in.

Issue 33 item 5 asks why the stronger policy keeps so little of its real success on the clean
reconstructions. This screen runs one policy from held-out starts in the study's simulated
env (:func:`bench.study.work_unit.make_study_env`) under variants that differ only in what is
drawn behind the simulator's meshes (:data:`SWAP_VARIANTS`):

- ``reconstruction``: the room's clean reconstruction (the control). The ground-truth room's
  lights are added and its geoms hidden, so the robot and the task objects are lit exactly as
  in the other variants.
- ``opaque-top``: as the control, but the reconstruction's own table-top Gaussians
  (:func:`table_top_mask`) made fully opaque (opacity 1, so each is clamped at the
  rasterizer's alpha limit): the same colours with nothing of the floor showing through,
  which separates the top's opacity from its colour.
- ``gt-table``: as the control, but the ground-truth table top is drawn as a mesh and the
  reconstruction's table-top Gaussians (:func:`table_top_mask`) are removed; the rest of the
  room stays Gaussian.
- ``gt-table-plain``: as ``gt-table``, but the true top without its texture: one plain
  material in the table's base colour (the texture's specular and shininess kept), which
  separates the top's texture from its colour and opacity.
- ``gt-room``: the whole ground-truth room drawn as meshes, no Gaussians (what the real
  trials see, without their sensor model).
- ``fitted-lights``: the study's own env: the reconstruction, its meshes lit by the lights
  fitted to real wrist images of training states (the spec's ``real_world.mesh_lights``,
  the shipped fit of :mod:`bench.demo.mesh_lights`) instead of the room's true lights: what
  a pipeline that cannot know the room's lights can estimate of them.

``bench demo swap --out DIR --tasks tape --policies bc-aux-dagger``
(:func:`bench.demo.cli.run_swap`: the reference numerics of ``bench demo``) writes
``swap_trials.csv``, ``swap.{csv,md}`` (per variant: successes, and the paired change against
the control with McNemar's exact p) and ``swap_config.json``. Starts come from the reaction
screen's held-out block (:data:`bench.demo.reaction.REACTION_CONDITION_OFFSET`); no study
table is read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.demo.reaction import REACTION_CONDITION_OFFSET, SCENES, SCREEN_PROFILE

SWAP_VARIANTS = ("reconstruction", "opaque-top", "gt-table", "gt-table-plain", "gt-room",
                 "fitted-lights")
CONTROL = "reconstruction"
#: The variants that draw the true table top in place of the reconstruction's.
TRUE_TOP_VARIANTS = ("gt-table", "gt-table-plain")
#: The table-top slab whose Gaussians ``gt-table`` removes: the top's footprint grown by this
#: margin (m), from this depth below the top surface to this height above it (m).
TOP_MARGIN = 0.03
TOP_BELOW = 0.06
TOP_ABOVE = 0.03
#: ``opaque-top``'s opacity logit: sigmoid(12) = 1 - 6e-6, above the rasterizer's alpha clamp.
OPAQUE_LOGIT = 12.0


@dataclass(frozen=True)
class SwapConfig:
    """One background-swap screen.

    Attributes:
        trials: Trials per (task, policy), cycled over the three rooms.
        condition_offset: First held-out start (the reaction screen's block).
        variants: Backgrounds compared (:data:`SWAP_VARIANTS`; the control first).
        profile: Demo profile whose study settings the envs use (image size, time limits).
        seed: Policy seed (the demo's).
    """

    trials: int = 30
    condition_offset: int = REACTION_CONDITION_OFFSET
    variants: tuple[str, ...] = SWAP_VARIANTS
    profile: str = SCREEN_PROFILE
    seed: int = 0

    def __post_init__(self) -> None:
        if self.trials < 1 or self.condition_offset < 0:
            raise ValueError("trials must be >= 1 and condition_offset >= 0")
        bad = [v for v in self.variants if v not in SWAP_VARIANTS]
        if bad or not self.variants or self.variants[0] != CONTROL:
            raise ValueError(f"variants must start with {CONTROL!r} and name "
                             f"{', '.join(SWAP_VARIANTS)}, got {list(self.variants)}")


def table_top_mask(means: Any, world: Any) -> Any:  # [N, 3] float -> bool [N]
    """Gaussians whose centre lies in the ground-truth table top's slab (world frame)."""
    import numpy as np

    from bench.demo.capture import table_frame_uv

    u, v = table_frame_uv(means, world)  # in the table's frame (top surface at z = 0)
    z = means[:, 2]
    half_x, half_y = world.table_size[0] / 2, world.table_size[1] / 2
    return ((np.abs(u) < half_x + TOP_MARGIN) & (np.abs(v) < half_y + TOP_MARGIN)
            & (z > -TOP_BELOW) & (z < TOP_ABOVE))


def _is_table_top(geom: Any, world: Any) -> bool:
    import mujoco

    from bench.worlds.rooms import TABLE_TOP_THICKNESS

    return (geom.type == mujoco.mjtGeom.mjGEOM_BOX
            and abs(geom.size[0] - world.table_size[0] / 2) < 1e-9
            and abs(geom.size[1] - world.table_size[1] / 2) < 1e-9
            and abs(geom.pos[2] + TABLE_TOP_THICKNESS / 2) < 1e-9)


def swap_decorator(world: Any, variant: str):
    """``World(decorate=...)``: the ground-truth room's lights, and what ``variant`` draws of it."""
    from bench.worlds.rooms import add_room

    table = variant in TRUE_TOP_VARIANTS

    def decorate(spec: Any) -> None:
        add_room(spec, world)  # every room geom is named with the "gt_" prefix
        tops = 0
        for geom in spec.geoms:
            if not geom.name.startswith("gt_") or variant == "gt-room":
                continue
            if table and _is_table_top(geom, world):
                tops += 1
                if variant == "gt-table-plain":  # the room builder's specular / shininess
                    plain = spec.add_material(name="swap_plain_top", specular=0.1,
                                              shininess=0.2)
                    geom.material = plain.name
                    geom.rgba = [*world.table_colour, 1.0]
                continue
            geom.group = 4  # hidden in every MuJoCo pass (bench.sim draws groups 0-3)
        if table and tops != 1:
            raise RuntimeError(f"found {tops} table tops in room {world.name!r}, expected 1")

    return decorate


def swap_env(spec: Any, *, scene: str, task: str, variant: str) -> Any:
    """The study's simulated env of (``scene``, ``task``) with ``variant``'s background."""
    import numpy as np

    from bench.scene.bundle import load_scene
    from bench.study.work_unit import make_study_env
    from bench.study.world_domain import world_domain
    from bench.worlds.rooms import get_world

    world = get_world(world_domain(spec).worlds[scene])
    bundle = load_scene(spec.scenes[scene])
    # fitted-lights: the spec's own mesh lights (real_world.mesh_lights, the shipped fit)
    extra: dict[str, Any] = ({} if variant == "fitted-lights" else
                             {"world_decorator": swap_decorator(world, variant)})
    if variant == "gt-room":
        extra["background"] = "none"
    elif variant in TRUE_TOP_VARIANTS:
        keep = np.flatnonzero(~table_top_mask(bundle.background.means, world))
        bundle = bundle.replace(background=bundle.background.subset(keep), stored=None)
        extra["min_table_gaussians"] = 0  # the table's Gaussians are gone on purpose
    elif variant == "opaque-top":
        splats = bundle.background
        logits = np.where(table_top_mask(splats.means, world), OPAQUE_LOGIT,
                          splats.opacity_logits).astype(splats.opacity_logits.dtype)
        bundle = bundle.replace(background=splats.replace(opacity_logits=logits), stored=None)
    return make_study_env(spec, scene=scene, task=task, domain="sim", bundle=bundle, **extra)


def screen_swaps(task: str, policy: str, config: SwapConfig = SwapConfig(), *,
                 progress: bool = True) -> list[dict[str, Any]]:
    """One row per trial: success of ``policy`` from the same start under every variant."""
    from bench.demo.reaction import paired_trials, screen_spec

    spec = screen_spec(task, profile=config.profile, seed=config.seed)
    return paired_trials(
        task, policy, trials=config.trials, condition_offset=config.condition_offset,
        seed=config.seed, columns=tuple((v, v) for v in config.variants),
        make_env=lambda scene, variant: swap_env(spec, scene=scene, task=task,
                                                 variant=variant),
        desc=f"swap {policy}/{task}", progress=progress)


def summarise_swaps(rows: list[dict[str, Any]], variants: tuple[str, ...]
                    ) -> list[dict[str, Any]]:
    """Per (task, policy, variant): successes and the paired change against the control."""
    from protocols.stats import mcnemar_exact_p

    out = []
    for key in dict.fromkeys((r["task"], r["policy"]) for r in rows):
        sel = [r for r in rows if (r["task"], r["policy"]) == key]
        for variant in variants:
            gained = sum(r[variant] and not r[CONTROL] for r in sel)
            lost = sum(r[CONTROL] and not r[variant] for r in sel)
            out.append({"task": key[0], "policy": key[1], "variant": variant,
                        "trials": len(sel), "successes": sum(r[variant] for r in sel),
                        "gained": gained, "lost": lost,
                        # four significant figures: a p of 8e-6 must not print as 0
                        "mcnemar_p": float(f"{mcnemar_exact_p(gained, lost):.4g}")})
    return out


def write_swaps(out: Path, rows: list[dict[str, Any]], config: SwapConfig, *,
                command: str = "") -> list[dict[str, Any]]:
    """``swap_trials.csv``, ``swap.{csv,md}`` and ``swap_config.json`` in ``out``."""
    from bench.demo.evaluation import write_screen

    table = summarise_swaps(rows, config.variants)
    lines = [f"| task | policy | background | successes | gained / lost vs {CONTROL} | "
             "McNemar p |", "|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['task']} | {r['policy']} | {r['variant']} | "
                     f"{r['successes']}/{r['trials']} | {r['gained']} / {r['lost']} | "
                     f"{r['mcnemar_p']:.2g} |")
    write_screen(out, "swap", rows, table, lines, {
        **asdict(config), "scenes": list(SCENES),
        "table_top_slab_m": {"margin": TOP_MARGIN, "below": TOP_BELOW, "above": TOP_ABOVE},
        "opaque_top_logit": OPAQUE_LOGIT,
        "command": command})
    return table
