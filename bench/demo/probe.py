"""The first-view probe: where a learned policy places the object from its first view alone.

The ``bc-aux`` family of recipes (``BCConfig.aux_weight`` > 0) is trained with a head that
predicts the object's pose in the tool frame from the same features the action head reads
(docs/demo-policies.md). At run time no policy uses it, but it tells, without a rollout,
whether a world's first view lets the network find the object: issue 33 item 5 found the
simulated and the real first views to differ there by 5-6 cm before any action was taken
(docs/demo-build.md, "The dark fringe").

Per held-out start (the reaction screen's block, ten per room) and per world variant
(:data:`PROBE_VARIANTS`), the env is reset to the start, the network reads both wrist images
and the proprio, and the head's object xy is compared with the truth
(:func:`bench.demo.demos.object_pose_in_tcp`): the error in centimetres. One render per start
and variant instead of an episode, so a screen of 30 starts takes seconds. Variants:

- ``real``: the ground-truth world at the real domain's settings (what the real trials see);
- ``study``: the study's simulated env on the room's clean reconstruction;
- the swap screen's backgrounds (:data:`bench.demo.background_swap.SWAP_VARIANTS`: the
  room's lights on the meshes, the table top opaque / true / plain, the whole true room).

Each row also carries ``mean_predictor``: the error of predicting the training set's mean
position (the head's standardisation mean) everywhere, the level of no information.
``bench demo probe --out DIR [--tasks cup,tape] [--variants real,study]``
(:func:`bench.demo.cli.run_probe`, the reference numerics of ``bench demo``) writes
``probe_trials.csv``, ``probe.{csv,md}`` (median and mean per variant) and
``probe_config.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.demo.background_swap import SWAP_VARIANTS
from bench.demo.reaction import REACTION_CONDITION_OFFSET, SCENES, SCREEN_PROFILE

PROBE_VARIANTS = ("real", "study", *SWAP_VARIANTS)
MEAN_PREDICTOR = "mean_predictor"


@dataclass(frozen=True)
class ProbeConfig:
    """One first-view probe.

    Attributes:
        trials: Starts per (task, policy), cycled over the three rooms.
        condition_offset: First held-out start (the reaction screen's block).
        variants: Worlds whose first views are probed (:data:`PROBE_VARIANTS`).
        profile: Demo profile whose study settings the envs use (image size, rig).
        seed: The demo's seed (the profile's spec).
    """

    trials: int = 30
    condition_offset: int = REACTION_CONDITION_OFFSET
    variants: tuple[str, ...] = ("real", "study")
    profile: str = SCREEN_PROFILE
    seed: int = 0

    def __post_init__(self) -> None:
        if self.trials < 1 or self.condition_offset < 0:
            raise ValueError("trials must be >= 1 and condition_offset >= 0")
        bad = [v for v in self.variants if v not in PROBE_VARIANTS]
        if bad or not self.variants or len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants must be distinct names of {', '.join(PROBE_VARIANTS)}, "
                             f"got {list(self.variants)}")


def probe_env(spec: Any, *, scene: str, task: str, variant: str) -> Any:
    """The env of ``variant`` (:data:`PROBE_VARIANTS`) for (``scene``, ``task``)."""
    from bench.demo.background_swap import swap_env
    from bench.scene.bundle import load_scene
    from bench.study.work_unit import make_study_env

    if variant == "real":
        return make_study_env(spec, scene=scene, task=task, domain="real", bundle=None)
    if variant == "study":
        return make_study_env(spec, scene=scene, task=task, domain="sim",
                              bundle=load_scene(spec.scenes[scene]))
    return swap_env(spec, scene=scene, task=task, variant=variant)


def load_probed_network(task: str, policy: str) -> tuple[Any, Any]:
    """The shipped network of ``policy`` on ``task``; a BenchError if it has no pose head."""
    from bench.errors import BenchError
    from bench.policies.learned import LEARNED_POLICIES, LearnedPolicy

    if policy not in LEARNED_POLICIES:
        raise BenchError(f"--policies: {policy!r} is not a learned recipe; choose from "
                         f"{', '.join(LEARNED_POLICIES)}")
    learned = LearnedPolicy(task, name=policy)  # a task name stands for the env; its weights
    net, config = learned.net, learned.config  # check and loading are the policy's own
    if config.aux_weight <= 0:
        raise BenchError(f"policy {policy!r} was trained without the object-pose head "
                         "(aux_weight 0), so it cannot be probed; pick a bc-aux recipe")
    return net, config


def head_xy(net: Any, config: Any, obs: dict[str, Any]) -> Any:  # -> float64 [2], metres
    """The pose head's object x, y (tool frame) from one observation's wrist images."""
    import numpy as np
    import torch

    from bench.demo.demos import IMAGE_KEYS
    from bench.policies.bc_network import prepare_images

    left, right = (prepare_images(np.asarray(obs[key])[None], config.image_size)
                   for key in IMAGE_KEYS)
    proprio = torch.from_numpy(np.asarray(obs["proprio"], dtype=np.float32)[None])
    with torch.no_grad():
        pose = net.aux(net.features(left, right, proprio))[0] * net.aux_std + net.aux_mean
    return pose.numpy()[:2].astype(np.float64)


def screen_probe(task: str, policy: str, config: ProbeConfig = ProbeConfig(), *,
                 progress: bool = True) -> list[dict[str, Any]]:
    """One row per start: the head's xy error (cm) in every variant, and the mean predictor's."""
    import numpy as np

    from bench.demo.demos import object_pose_in_tcp
    from bench.demo.reaction import screen_spec
    from bench.progress import progress as progress_bar

    net, net_config = load_probed_network(task, policy)
    mean_xy = net.aux_mean.numpy()[:2].astype(np.float64)
    spec = screen_spec(task, profile=config.profile, seed=config.seed)
    envs: dict[tuple[str, str], Any] = {}
    rows = []
    try:
        for trial in progress_bar(range(config.trials), desc=f"probe {policy}/{task}",
                                  unit="start", disable=not progress, mininterval=5.0):
            scene = SCENES[trial % len(SCENES)]
            start = config.condition_offset + trial
            row: dict[str, Any] = {"task": task, "policy": policy, "scene": scene,
                                   "trial": trial, "start": start}
            truth = None
            for variant in config.variants:
                key = (scene, variant)
                if key not in envs:
                    envs[key] = probe_env(spec, scene=scene, task=task, variant=variant)
                env = envs[key]
                obs, info = env.reset(seed=start)
                if truth is None:  # the same start puts the object in the same place everywhere
                    truth = np.asarray(object_pose_in_tcp(
                        info, env.unwrapped.task.actor.name)[:2], dtype=np.float64)
                row[variant] = round(100.0 * float(np.linalg.norm(
                    head_xy(net, net_config, obs) - truth)), 3)
            row[MEAN_PREDICTOR] = round(100.0 * float(np.linalg.norm(mean_xy - truth)), 3)
            rows.append(row)
    finally:
        for env in envs.values():
            env.close()
    return rows


def summarise_probe(rows: list[dict[str, Any]], variants: tuple[str, ...]
                    ) -> list[dict[str, Any]]:
    """Per (task, policy, variant and the mean predictor): starts, median and mean error (cm)."""
    import numpy as np

    out = []
    for key in dict.fromkeys((r["task"], r["policy"]) for r in rows):
        sel = [r for r in rows if (r["task"], r["policy"]) == key]
        for column in (*variants, MEAN_PREDICTOR):
            errors = np.array([float(r[column]) for r in sel])
            out.append({"task": key[0], "policy": key[1], "variant": column,
                        "starts": len(sel), "median_cm": round(float(np.median(errors)), 2),
                        "mean_cm": round(float(np.mean(errors)), 2)})
    return out


def write_probe(out: Path, rows: list[dict[str, Any]], config: ProbeConfig, *,
                command: str = "") -> list[dict[str, Any]]:
    """``probe_trials.csv``, ``probe.{csv,md}`` and ``probe_config.json`` in ``out``."""
    from bench.demo.evaluation import write_screen

    table = summarise_probe(rows, config.variants)
    lines = ["| task | policy | first view | starts | median error (cm) | mean error (cm) |",
             "|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['task']} | {r['policy']} | {r['variant']} | {r['starts']} | "
                     f"{r['median_cm']:.2f} | {r['mean_cm']:.2f} |")
    write_screen(out, "probe", rows, table, lines, {**asdict(config), "scenes": list(SCENES),
                                                    "command": command})
    return table
