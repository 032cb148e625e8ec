"""``bench demo train-policies``: record the demonstrations, train every recipe per task.

Each plain recipe is trained by :func:`bench.demo.bc_training.build_policy`, each DAgger
recipe by :func:`bench.demo.dagger.build_dagger_policy` (after its base); the layout and
the resume rules are :func:`train_policies`'s.
"""

from __future__ import annotations

from typing import Any

from bench.demo.bc_training import TOOL, TrainPoliciesConfig, build_policy, build_task_dataset
from bench.demo.dagger import build_dagger_policy
from bench.policies.bc_recipes import DAGGER_RECIPES


def train_policies(out: Any, config: TrainPoliciesConfig, *, resume: bool = False,
                   progress: bool = True) -> dict[str, Any]:
    """Record the demonstrations and train every (policy, task) under ``out``.

    Layout: ``out/demos/<task>.npz`` + ``.json`` (dataset and its summary),
    ``out/policies/<name>/<task>/`` (weights, config, manifest: the shipped asset layout),
    ``out/dagger/round<r>/...`` (each DAgger round's rollouts and weights),
    ``out/manifest.json``. Every file is written atomically; ``resume`` keeps the
    datasets, rounds and policies whose config and input sha256 match.
    """
    from pathlib import Path

    from bench.provenance import atomic_write_json, make_manifest

    entries = {}
    for task in config.tasks:
        jobs = config.jobs(task)
        if not jobs:
            continue
        data, summary = build_task_dataset(out, task, config, resume=resume, progress=progress)
        for name in jobs:
            build = build_dagger_policy if name in DAGGER_RECIPES else build_policy
            manifest = build(out, name, task, data, summary, config, resume=resume,
                             progress=progress)
            entries[f"{name}/{task}"] = {"weights_sha256": manifest["weights_sha256"],
                                         "data_sha256": manifest["data"]["sha256"],
                                         "samples": manifest["data"]["samples"]}
    manifest = make_manifest(
        tool=TOOL, params={"tasks": list(config.tasks), "policies": list(config.policies),
                           "episodes": config.episodes, "epochs": config.epochs,
                           "dagger": config.dagger},
        seed=0, counts={"policies": len(entries)}, extra={"policies": entries})
    atomic_write_json(Path(out) / "manifest.json", manifest)
    return manifest
