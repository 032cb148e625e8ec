"""Learned policies: behaviour-cloned CNNs that see only the wrist images and proprio.

Each registered name is one training recipe (:mod:`bench.policies.bc_recipes`; the network
and its inference are :mod:`bench.policies.bc_network`) with shipped weights per task
under ``bench/demo/assets/policies/<name>/<task>/`` (``model.safetensors``,
``config.json``, ``manifest.json``; rebuilt by ``bench demo train-policies``). At a query
the policy reads ``obs["images"]["wrist_left"]``, ``obs["images"]["wrist_right"]`` (any
size: resized to the network's own input size) and ``obs["proprio"]``; it never reads
``info`` or any other observation key (``object_state`` included), so it can be served
like any image policy (tested: scrambling everything else leaves its actions unchanged).

:data:`DEMO_POLICIES` names the two policies per task the demo compares. Recipes:
``bc-large`` (300 demonstrations, shift + colour augmentation, 64 px input), ``bc-small``
(60 demonstrations, no augmentation, 32 px input), ``bc-aux`` (no shift, a finer
keypoint map, an object-pose auxiliary loss at training; Cup and Pen draw each first query
8 times per epoch) and ``bc-aux-dagger`` (``bc-aux`` after two DAgger rounds, five for Cup
and Pen) - what a real lab varies.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from bench.policies.base import POLICIES
from bench.policies.bc_recipes import ALL_RECIPES, RECIPE_TASKS  # numpy-only (torch is lazy)

#: The shipped weights: data of the demo's asset folder (a path, not an import of bench.demo).
ASSETS = Path(__file__).resolve().parents[1] / "demo" / "assets" / "policies"
#: One registry entry per training recipe of bench.policies.bc_recipes (one source for both).
LEARNED_POLICIES = ALL_RECIPES
#: Tasks with shipped weights per recipe (bc_recipes.RECIPE_TASKS; default all three).
LEARNED_TASKS = RECIPE_TASKS
#: Deployment variants: registry name -> (weights of a trained recipe, chunk rows per query).
#: ``bc-large-exec16`` is ``bc-large`` executing all 16 rows of a Cup chunk open loop instead
#: of re-planning after 8 (what a lab varies when it deploys a chunked policy).
LEARNED_VARIANTS = {"bc-large-exec16": ("bc-large", 16)}
#: task -> the (pi_1, pi_2) pair of learned policies the demo compares. Every task's first
#: pair, bc-large vs bc-small, tied in the ground-truth worlds (Cup 5/20 vs 5/20 in Duo and
#: Flat, 3/20 vs 3/20 in G2; Tape 1/24 vs 1/24; Pen 0/24 vs 0/24; docs/demo.md,
#: docs/demo-policies.md); Cup was re-chosen first as bc-large vs its 16-row deployment
#: (12/60 vs 10/60 in the rooms, never significant), then, like Tape and Pen, as bc-aux-dagger
#: (the localising recipe + DAgger) vs bc-large; on 2026-12-06 Cup's second policy became
#: bc-aux-85 (bc-aux on 85 demonstrations), the first that reacts to damage with a 15-40 pp
#: real gap on the reaction screen's held-out starts (issue 33 item 4; docs/demo-policies.md).
#: Once the simulator lit its meshes with lights fitted to real images (the same day), the
#: screen re-chose Cup as bc-aux vs bc-aux-85 (bc-aux-dagger changed 1 of 30 outcomes) and
#: Tape as bc-aux-dagger vs bc-aux (both react; 23 pp apart on the screen, 33 on 9000+).
#: Pen's second policy became bc-aux-dagger-half (DAgger rounds of 30 rollouts instead of 60):
#: it reacts (10 of 30 outcomes changed) 27 pp below bc-aux-dagger on the screen, 17 on 9000+.
#: On 2026-12-07 Tape's pair became the blur-augmented bc-aux-dagger-blur-5 vs
#: bc-aux-dagger-blur (five DAgger rounds vs two): on held-out starts the stronger keeps 0.55 of
#: its real success on the clean reconstructions, bc-aux-dagger kept 0.35 (issue 33 item 5).
DEMO_POLICIES = {"cup": ("bc-aux", "bc-aux-85"),
                 "tape": ("bc-aux-dagger-blur-5", "bc-aux-dagger-blur"),
                 "pen": ("bc-aux-dagger", "bc-aux-dagger-half")}
OBSERVATION_KEYS = ("wrist_left", "wrist_right")
#: Chunk rows a learned policy returns per query (the rest of the env's chunk is hold rows):
#: it re-plans after 8 frames instead of running Cup's 16-row chunk open loop
#: (docs/demo-policies.md: 4/9 Cup successes with 8 rows, 1/24 with all 16, 0/6 with 4).
EXECUTED_ROWS = 8


def policy_dir(name: str, task: str, *, root: Path | None = None) -> Path:
    """Directory of the shipped weights of policy ``name`` on ``task``."""
    return Path(root or ASSETS) / name / task


class LearnedPolicy:
    """A trained :class:`bench.policies.bc_network.BCNet` behind the policy interface.

    Args:
        env: The (unwrapped) env: gives the task (weights are per task).
        seed: Unused (the policy is deterministic).
        name: Registered policy name (asset folder).
        root: Asset root (default: the shipped ``bench/demo/assets/policies``).
        rows: Rows of the predicted chunk returned per query (:data:`EXECUTED_ROWS`;
            None: all ``horizon`` rows).
        weights: Asset folder of the trained recipe (default: ``name``; a deployment variant
            of :data:`LEARNED_VARIANTS` reuses its recipe's weights).
    """

    privileged = False
    action_mode = "delta"

    def __init__(self, env: Any, *, seed: int = 0, name: str = "bc-large",
                 root: str | Path | None = None, rows: int | None = EXECUTED_ROWS,
                 weights: str | None = None) -> None:
        from bench.errors import BenchError
        from bench.policies.bc_network import load_network

        task = str(getattr(getattr(env, "task", None), "name", env))
        directory = policy_dir(weights or name, task, root=Path(root) if root else None)
        if not (directory / "model.safetensors").is_file():
            raise BenchError(f"policy {name!r} has no weights for task {task!r} in {directory}; "
                             "run `bench demo train-policies --out DIR` or pick cup, tape or pen")
        self.name = name
        self.task = task
        self.seed = seed
        self.net, self.config = load_network(directory)
        if rows is not None and rows < 1:
            raise BenchError(f"rows must be >= 1 (chunk rows executed per query), got {rows}")
        self.rows = rows

    def reset(self, *, seed: int | None = None) -> None:
        """Nothing to reset: the policy is a pure function of the observation."""

    def act(self, obs: Any, info: Any) -> np.ndarray:  # -> float32 [horizon, 7]
        """The next chunk from the wrist images and proprio only (``info`` is ignored)."""
        from bench.policies.base import PolicyError
        from bench.policies.bc_network import predict_chunk

        images = obs.get("images", {})
        missing = [key for key in OBSERVATION_KEYS if key not in images]
        if missing:
            raise PolicyError(f"policy {self.name!r}: observation lacks camera(s) {missing}; "
                              "run it with cameras='yubi-dual' (obs_mode='rgb')")
        chunk = predict_chunk(self.net, self.config, images["wrist_left"],
                              images["wrist_right"], obs["proprio"])
        return chunk if self.rows is None else chunk[:self.rows]


def _register() -> None:
    descriptions = {
        "bc-large": "behaviour-cloned CNN: 300 demos, augmentation, 64 px (wrist images + "
                    "proprio only)",
        "bc-small": "behaviour-cloned CNN: 60 demos, no augmentation, 32 px (wrist images + "
                    "proprio only)",
        "bc-aux": "bc-large's data with an 8x8 keypoint map and an object-pose auxiliary "
                  "loss at training (wrist images + proprio only at run time)",
        "bc-aux-85": "bc-aux on the first 85 demonstrations (wrist images + proprio only "
                     "at run time)",
        "bc-aux-dagger-3": "bc-aux fine-tuned on three DAgger rounds (wrist images + "
                           "proprio only at run time)",
        "bc-aux-dagger-half": "bc-aux fine-tuned on DAgger rounds of 30 rollouts each instead "
                              "of 60 (wrist images + proprio only at run time)",
        "bc-aux-blur": "bc-aux trained with blur augmentation (wrist images + proprio only "
                       "at run time)",
        "bc-aux-dagger-blur": "bc-aux-blur fine-tuned on two DAgger rounds (wrist images + "
                              "proprio only at run time)",
        "bc-aux-dagger-blur-5": "bc-aux-blur fine-tuned on five DAgger rounds (wrist images + "
                                "proprio only at run time)",
        "bc-aux-dagger": "bc-aux fine-tuned on DAgger rounds: its own rollouts labelled by "
                         "the expert (wrist images + proprio only at run time)",
    }
    for name in LEARNED_POLICIES:
        POLICIES.register(name, functools.partial(LearnedPolicy, name=name), privileged=False,
                          tasks=LEARNED_TASKS.get(name, ("cup", "tape", "pen")), learned=True,
                          description=descriptions[name])
    for name, (weights, rows) in LEARNED_VARIANTS.items():
        POLICIES.register(name, functools.partial(LearnedPolicy, name=name, weights=weights,
                                                  rows=rows),
                          privileged=False, tasks=("cup", "tape", "pen"), learned=True,
                          description=f"{weights} executing {rows} chunk rows per query "
                                      "(wrist images + proprio only)")


_register()
