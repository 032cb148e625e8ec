"""DAgger rounds of the demo's learned policies (Ross et al. 2011), on top of a trained recipe.

The recipes are :data:`bench.policies.bc_recipes.DAGGER_RECIPES`
(:class:`~bench.policies.bc_recipes.DaggerConfig`); each round's rollouts are labelled by
the privileged expert (:func:`dagger_rollouts`) and the weights fine-tuned on the aggregate
with :func:`bench.demo.bc_training.train_policy` (:func:`build_dagger_policy`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from bench.demo.bc_training import (
    TOOL,
    TrainPoliciesConfig,
    read_json,
    save_policy,
    train_policy,
    weights_sha256,
)
from bench.policies.bc_recipes import DaggerConfig


def dagger_rollouts(  # -> dict of arrays (DATASET_ARRAYS, AUX_ARRAYS) + "success"
    policy_root: Any, policy_name: str, task: str, dagger: DaggerConfig, *, round_index: int,
    first_episode: int, progress: bool = True
) -> dict[str, np.ndarray]:
    """One DAgger round's data: the policy's rollouts, every query labelled by the expert.

    The env is the evaluation's (:data:`bench.worlds.real.REAL_DOMAIN`, the task's own
    ``execute``); the policy executes its first :data:`bench.policies.learned.EXECUTED_ROWS`
    rows as deployed, or with probability ``beta`` the expert's chunk. Episode ids continue
    from ``first_episode`` (after the demonstrations and earlier rounds).
    """
    from bench.demo.demos import (
        AUX_ARRAYS,
        DATASET_ARRAYS,
        QUERY_ARRAYS,
        WORLD_IDS,
        add_episode,
        append_query,
        stack_episodes,
    )
    from bench.policies import make_policy
    from bench.policies.base import policy_observation, to_env_chunk
    from bench.policies.learned import LearnedPolicy
    from bench.progress import progress as progress_bar
    from bench.worlds.real import REAL_DOMAIN

    envs: dict[str, Any] = {}
    parts: dict[str, list] = {name: [] for name, _ in (*DATASET_ARRAYS, *AUX_ARRAYS)}
    success = []
    bar = progress_bar(range(dagger.episodes),
                       desc=f"dagger {policy_name}/{task} round {round_index}",
                       unit="ep", disable=not progress, mininterval=5.0)
    for i in bar:
        world_index = i % len(WORLD_IDS)
        world = WORLD_IDS[world_index]
        if world not in envs:
            envs[world] = REAL_DOMAIN.make_env(world, task, max_frames=dagger.max_frames)
        env = envs[world]
        learner = LearnedPolicy(env.unwrapped, name=policy_name, root=policy_root)
        expert = make_policy("expert", env.unwrapped, seed=0)
        condition = dagger.condition_offset + round_index * dagger.episodes + i
        rng = np.random.default_rng([dagger.seed, round_index, i])
        rows: dict[str, list] = {key: [] for key in QUERY_ARRAYS}
        obs, info = env.reset(seed=condition)
        expert.reset(seed=condition)
        while True:
            observation = policy_observation(obs, env, frame=int(info["frame"]))
            label = to_env_chunk(expert.act(observation, info), env, info)
            append_query(rows, obs, info, label, actor=env.unwrapped.task.actor.name)
            executed = label if rng.random() < dagger.beta else \
                to_env_chunk(learner.act(observation, info), env, info)
            obs, _, terminated, truncated, info = env.step(executed)
            if terminated or truncated:
                break
        add_episode(parts, rows, episode=first_episode + i, world_index=world_index,
                    condition=condition)
        success.append(bool(info["success"]))
        bar.set_postfix(samples=sum(len(p) for p in parts["episode"]),
                        success=f"{np.mean(success):.2f}")
    for env in envs.values():
        env.close()
    return stack_episodes(parts, success)


def concat_datasets(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Datasets appended in order (the arrays every part has, and ``success``)."""
    names = [k for k in parts[0] if all(k in p for p in parts)]
    return {k: np.concatenate([p[k] for p in parts]) for k in names}


def build_dagger_policy(out: Any, name: str, task: str, data: dict, demo_summary: dict,
                        config: TrainPoliciesConfig, *, resume: bool,
                        progress: bool = True) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) the DAgger rounds of recipe ``name``; its manifest.

    Stages, each written atomically and kept by ``resume`` when its inputs match:
    ``out/dagger/round<r>/<name>/<task>/rollouts.npz`` (+ ``.json``: config, counts,
    sha256, the weights rolled out) and the weights fine-tuned on the aggregate after it
    in the same folder; the last round's weights are copied to ``out/policies/<name>/<task>/``.
    """
    import shutil
    import time
    from pathlib import Path

    from bench.demo.demos import (
        aux_sha256,
        dataset_summary,
        load_dataset,
        save_dataset,
        select_episodes,
    )
    from bench.provenance import atomic_write_json, make_manifest

    dagger = config.dagger_config(name, task)
    base_config = config.policy_config(dagger.base, task)
    bc_config = dataclasses.replace(base_config, name=name)
    out = Path(out)
    root = out / "policies"  # round 0 rolls out the base recipe's weights
    current = read_json(root / dagger.base / task / "manifest.json")
    demos = select_episodes(data, base_config.episodes)
    aggregate, rounds = [demos], []
    first_episode = int(data["episode"].max()) + 1
    for r in range(dagger.rounds):
        stage_root = out / "dagger" / f"round{r}"
        stage = stage_root / name / task
        roll_key = {"dagger": dagger.to_json(), "round": r, "task": task,
                    "policy_weights_sha256": current["weights_sha256"]}
        summary = read_json(stage / "rollouts.json")
        rollouts = None
        if resume and summary is not None and summary["key"] == roll_key \
                and (stage / "rollouts.npz").is_file():
            rollouts = load_dataset(stage / "rollouts.npz")
            if dataset_summary(rollouts)["sha256"] != summary["sha256"]:
                rollouts = None
        if rollouts is None:
            start = time.perf_counter()
            rollouts = dagger_rollouts(root, name if r else dagger.base, task, dagger,
                                       round_index=r, first_episode=first_episode,
                                       progress=progress)
            save_dataset(stage / "rollouts.npz", rollouts)
            summary = {"key": roll_key, **dataset_summary(
                rollouts, seconds=time.perf_counter() - start),
                "learner_success": int(np.sum(rollouts["success"]))}
            atomic_write_json(stage / "rollouts.json", summary)
        first_episode += dagger.episodes
        aggregate.append(rollouts)
        rounds.append({k: summary[k] for k in ("samples", "episodes", "sha256", "aux_sha256",
                                               "learner_success")}
                      | {"rolled_out_weights_sha256": current["weights_sha256"]})
        merged = concat_datasets(aggregate)
        round_config = dataclasses.replace(bc_config, epochs=dagger.epochs, lr=dagger.lr,
                                           seed=base_config.seed + 1 + r)
        old = read_json(stage / "manifest.json")
        if resume and old is not None and old["params"] == round_config.to_json() \
                and old["data"]["rounds"] == rounds \
                and old["data"]["init_weights_sha256"] == current["weights_sha256"] \
                and (stage / "model.safetensors").is_file():
            current = old
        else:
            from safetensors.torch import load_file

            init = load_file(str(root / (name if r else dagger.base) / task
                                 / "model.safetensors"))
            state, log = train_policy(round_config, merged, select=False, init_state=init,
                                      progress=progress)
            current = make_manifest(
                tool=TOOL, params=round_config.to_json(), seed=round_config.seed,
                counts={"samples": int(len(merged["episode"])),
                        "episodes": int(len(merged["success"])),
                        "parameters": log["parameters"]},
                extra={"dagger": dagger.to_json(), "round": r, "data": {
                    "recording": demo_summary["config"],
                    "recording_sha256": demo_summary["sha256"],
                    "recording_aux_sha256": demo_summary.get("aux_sha256"),
                    "demo_episodes": base_config.episodes,
                    "demo_sha256": dataset_summary(demos)["sha256"],
                    "rounds": rounds, "samples": int(len(merged["episode"])),
                    "sha256": dataset_summary(merged)["sha256"],
                    "aux_sha256": aux_sha256(merged),
                    "init_weights_sha256": current["weights_sha256"]},
                    "training": log, "weights_sha256": weights_sha256(state)})
            save_policy(stage, round_config, state, current)
        root = stage_root
    final = out / "policies" / name / task
    final.mkdir(parents=True, exist_ok=True)
    for filename in ("model.safetensors", "config.json", "manifest.json"):
        shutil.copyfile(root / name / task / filename, final / f".{filename}.tmp")
        (final / f".{filename}.tmp").replace(final / filename)
    return current
