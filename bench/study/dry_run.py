"""``bench study run --dry-run``: the resolved plan of a study, measured, with nothing written.

The plan lists the scenes, conditions (and where each comes from), cells,
rollouts (simulated and "real"), retrainings (kept / total frames) and an
estimate of the CPU time: one rollout per task is run in memory on the first
scene's clean bundle (policy pi_1, the first simulated start) and timed, and
for coverage retrainings two training iterations on the first scene's capture
are timed; the estimate is those costs times the counts. Quality scoring and
OBS-Policy scoring are not included (said in the output).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.study.plan import count_rollouts, init_index, rollout_cells
from bench.study.spec import CLEAN, CONTROL, StudySpec


@dataclass
class StudyPlan:
    """What a study would run."""

    scenes: list[str]
    conditions: dict[str, str]  # condition -> source kind
    cells: int
    sim_rollouts: int
    real_rollouts: int
    trainings: list[tuple[str, str, int, int]]
    real_source: str
    test_sources: dict[str, str]
    seconds_per_rollout: dict[str, float] = field(default_factory=dict)
    seconds_per_iteration: float | None = None
    train_iters: int = 0

    @property
    def estimated_seconds(self) -> float:
        """Estimated wall time of the whole study, seconds (rollouts plus retrainings)."""
        per_task = self.seconds_per_rollout
        mean = sum(per_task.values()) / len(per_task) if per_task else 0.0
        train = (self.seconds_per_iteration or 0.0) * self.train_iters * len(self.trainings)
        return mean * (self.sim_rollouts + self.real_rollouts) + train

    def lines(self) -> list[str]:
        """The plan as printed lines (``bench study run --dry-run``)."""
        out = [f"scenes: {', '.join(self.scenes)}",
               "conditions: " + ", ".join(f"{c} ({k})" for c, k in self.conditions.items()),
               f"real domain: {self.real_source}",
               "test references: " + ", ".join(f"{s}: {v}" for s, v in self.test_sources.items()),
               f"cells (scene x condition x task x policy): {self.cells}",
               f"rollouts: {self.sim_rollouts} simulated + {self.real_rollouts} simulated-real",
               f"retrainings: {len(self.trainings)}"]
        out += [f"  {s}/{c}: {k}/{n} frames kept, {self.train_iters} iterations"
                for s, c, k, n in self.trainings]
        timing = ", ".join(f"{t} {v:.2f} s" for t, v in self.seconds_per_rollout.items())
        out.append(f"measured per rollout: {timing or 'not measured'}")
        if self.seconds_per_iteration is not None:
            out.append(f"measured per training iteration: {self.seconds_per_iteration:.3f} s")
        out.append(f"estimated CPU time: {self.estimated_seconds / 60:.1f} min (rollouts + "
                   "retrainings; quality scoring not included)")
        return out


def _condition_kinds(spec: StudySpec) -> dict[str, str]:
    kinds = {c: "given bundle" if c == CLEAN else "artifact preset" for c in spec.conditions}
    if CONTROL in kinds:
        kinds[CONTROL] = (f"control: the clean bundle from starts "
                          f"{spec.control_condition_offset}+")
    kinds.update({c: "prepared bundle" for c in spec.extra_conditions})
    kinds.update({c: "retrained coverage" for c in spec.coverage})
    return kinds


def _first_clean_bundle(spec: StudySpec) -> Any:
    import dataclasses

    from bench.scene.bundle import load_scene
    from bench.scene.sample import make_sample_scene

    scene = spec.scene_names[0]
    if scene in spec.sample_scenes:
        made = make_sample_scene(seed=spec.sample_scenes[scene], n_gaussians=spec.sample_gaussians)
        return scene, dataclasses.replace(made, name=scene)
    return scene, load_scene(spec.scenes[scene])


def measure_rollouts(spec: StudySpec) -> dict[str, float]:
    """Seconds of one rollout per task (first scene, clean, pi_1, first simulated start)."""
    import bench.policies.visual  # noqa: F401 - registers the visual policies
    import bench.sim
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    scene, bundle = _first_clean_bundle(spec)
    seconds = {}
    for task in spec.tasks:
        overrides = {"image_size": spec.image_size, "max_frames": spec.frames_limit(scene, task),
                     "render_backend": spec.render_backend}
        if spec.real_domain == "world":  # the world's rig in the simulated domain too
            from bench.study.world_domain import make_domain_env

            env = make_domain_env(spec, scene=scene, task=task, domain="sim", bundle=bundle,
                                  overrides=overrides)
        else:
            env = bench.sim.make_env(task, bundle, **overrides)
        try:
            label = spec.policies[task][0]  # a registry name or the label of an entry point
            if label in spec.policy_refs:
                from bench.policies.entry import build_ref

                policy = build_ref(spec.policy_refs[label], env, seed=spec.seed)
            else:
                policy = make_policy(label, env, seed=spec.seed)
            start = time.perf_counter()
            run_episode(env, policy, init_index=init_index(spec, "sim", 0), episode=0)
            seconds[task] = time.perf_counter() - start
        finally:
            env.close()
    return seconds


def measure_training(spec: StudySpec) -> float:
    """Seconds per training iteration on the first scene's capture (2 timed iterations)."""
    import dataclasses

    from bench.recon.capture import CaptureManifest
    from bench.recon.train import train
    from bench.study.coverage import training_config

    manifest = CaptureManifest.load(spec.captures[spec.scene_names[0]])
    config = dataclasses.replace(training_config(spec), iters=2, eval_every=10**9)
    start = time.perf_counter()
    train(manifest, config=config)
    return (time.perf_counter() - start) / 2


def make_plan(spec: StudySpec, *, measure: bool = True) -> StudyPlan:
    """The resolved plan of ``spec`` (validated; nothing is written)."""
    from bench.study.coverage import planned_trainings, training_config

    trainings = planned_trainings(spec)
    source = "ground-truth-world" if spec.real_domain == "world" else "simulated-real"
    if spec.real_results is not None:
        from bench.study.real_results import read_real_results

        source = read_real_results(spec).label
    tests = {s: (f"captures:{Path(spec.captures[s]).name}" if s in spec.captures else
                 "synthetic-capture" if s in spec.sample_scenes else "renders-only")
             for s in spec.scene_names}
    plan = StudyPlan(
        scenes=spec.scene_names, conditions=_condition_kinds(spec),
        cells=sum(len(c.policies) for c in rollout_cells(spec) if c.domain == "sim"),
        sim_rollouts=count_rollouts(spec, "sim"), real_rollouts=count_rollouts(spec, "real"),
        trainings=trainings, real_source=source,
        test_sources=tests, train_iters=training_config(spec).iters if trainings else 0)
    if measure:
        plan.seconds_per_rollout = measure_rollouts(spec)
        if trainings:
            plan.seconds_per_iteration = measure_training(spec)
    return plan
