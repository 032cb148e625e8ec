"""Does a policy react to damage? Paired simulated outcomes, clean vs an artifact, held out.

Issue 33 item 4 asks for policy pairs that *both* depend on what they see: each must change
at least 2 of 30 paired simulated outcomes under ``hole-90`` vs clean, and the pair's real
success rates must differ by 15-40 percentage points. This module measures both for any
learned recipe, before a study runs, on starts no study uses (so a pair is chosen on held-out
starts, never on the study's own outcome tables):

- trial ``t`` runs in room ``("duo", "flat", "g2")[t % 3]`` from start
  ``condition_offset + t`` (default 8000+: past the demonstrations' 5000+, DAgger's 6000+ and
  the time limits' 7000+, before the evaluation's 9000+, disjoint from the study's 100+,
  1000+ and 2000+);
- three rollouts per trial, each in the env the study itself builds
  (:func:`bench.study.work_unit.make_study_env`, the demo profile's image size, rig, time
  limit and deployment): the ground-truth world ("real"), the room's clean reconstruction,
  and the study's ``preset`` edit of it (``apply_perturbation(clean, preset, seed)``);
- per (task, policy): real and simulated successes, the paired changes (``worse``: clean
  success lost under the preset; ``better``: gained) and McNemar's exact p.

``bench demo reaction --out DIR --tasks cup,tape,pen`` (:func:`bench.demo.cli.run_reaction`:
the reference numerics of ``bench demo``) writes ``reaction_trials.csv``, ``reaction.{csv,md}``
and ``reaction_config.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REACTION_CONDITION_OFFSET = 8000
SCENES = ("duo", "flat", "g2")
#: The demo profile whose envs every policy screen runs (reaction, evaluation, probe, lights,
#: swap, visibility): the default until issue 33 item 7, its settings now ``cup``.
SCREEN_PROFILE = "cup"
MIN_CHANGED = 2  # paired outcomes a reacting policy changes under the preset (issue 33 item 4)
REAL_GAP_PP = (15.0, 40.0)  # the pair's real success gap, percentage points (issue 33 item 4)


@dataclass(frozen=True)
class ReactionConfig:
    """One reaction screen.

    Attributes:
        trials: Paired trials per (task, policy) (cycled over the three rooms).
        condition_offset: Start of the held-out block of starts.
        preset: The artifact compared with clean.
        profile: Demo profile whose study settings the envs use (image size, time limits).
        seed: Editor and policy seed (the demo's).
        background_color: ``shipped`` / ``none`` instead of the profile's colour alignment
            of the simulated backgrounds (:attr:`bench.demo.run.DemoProfile.background_color`);
            None: the profile's.
    """

    trials: int = 30
    condition_offset: int = REACTION_CONDITION_OFFSET
    preset: str = "hole-90"
    profile: str = SCREEN_PROFILE
    seed: int = 0
    background_color: str | None = None

    def __post_init__(self) -> None:
        if self.trials < 1 or self.condition_offset < 0:
            raise ValueError("trials must be >= 1 and condition_offset >= 0")


def screen_spec(task: str, *, profile: str, seed: int, background_color: str | None = None
                ) -> Any:
    """The study spec whose envs a screen of ``task`` runs in (the demo profile's)."""
    from bench.demo.run import DemoConfig

    return DemoConfig(out=Path("."), profile=profile, tasks=(task,), seed=seed,
                      background_color=background_color).study_spec()


def paired_trials(task: str, policy: str, *, trials: int, condition_offset: int, seed: int,
                  columns: tuple[tuple[str, str], ...], make_env: Callable[[str, str], Any],
                  desc: str, progress: bool = True) -> list[dict[str, Any]]:
    """One row per trial: ``policy``'s success from one start under every variant.

    Trial ``t`` runs in room ``SCENES[t % 3]`` from start ``condition_offset + t``; for each
    ``(variant, column)`` the env ``make_env(scene, variant)`` (built once per pair, closed at
    the end) runs one episode and ``row[column]`` is its success (0 / 1).
    """
    import bench.policies.visual  # noqa: F401 - registers the visual policies
    from bench.policies import make_policy
    from bench.progress import progress as progress_bar
    from bench.sim.rollout import run_episode

    envs: dict[tuple[str, str], Any] = {}
    policies: dict[tuple[str, str], Any] = {}
    rows = []
    try:
        for trial in progress_bar(range(trials), desc=desc, unit="trial",
                                  disable=not progress, mininterval=5.0):
            scene = SCENES[trial % len(SCENES)]
            start = condition_offset + trial
            row: dict[str, Any] = {"task": task, "policy": policy, "scene": scene,
                                   "trial": trial, "start": start}
            for variant, column in columns:
                key = (scene, variant)
                if key not in envs:
                    envs[key] = make_env(scene, variant)
                    policies[key] = make_policy(policy, envs[key], seed=seed)
                record, _, _ = run_episode(envs[key], policies[key], init_index=start,
                                           episode=trial, policy_name=policy)
                if record.status != "ok":
                    raise RuntimeError(f"{policy}/{task} trial {trial} ({variant}): "
                                       f"{record.error}")
                row[column] = int(record.success)
            rows.append(row)
    finally:
        for env in envs.values():
            env.close()
    return rows


def screen_policy(task: str, policy: str, config: ReactionConfig = ReactionConfig(), *,
                  progress: bool = True) -> list[dict[str, Any]]:
    """One row per trial: real, clean-simulated and preset-simulated success of ``policy``."""
    from bench.scene.bundle import load_scene
    from bench.study.work_unit import make_study_env
    from perturbations import apply_perturbation

    spec = screen_spec(task, profile=config.profile, seed=config.seed,
                       background_color=config.background_color)

    def make_env(scene: str, variant: str) -> Any:
        bundle = None
        if variant != "real":
            bundle = load_scene(spec.scenes[scene])
            if variant != "clean":
                bundle = apply_perturbation(bundle, variant, seed=config.seed).bundle
        domain = "real" if variant == "real" else "sim"
        return make_study_env(spec, scene=scene, task=task, domain=domain, bundle=bundle)

    return paired_trials(
        task, policy, trials=config.trials, condition_offset=config.condition_offset,
        seed=config.seed, make_env=make_env, desc=f"reaction {policy}/{task}",
        columns=(("real", "real"), ("clean", "sim_clean"), (config.preset, "sim_preset")),
        progress=progress)


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, policy): successes, the paired changes and McNemar's exact p."""
    from protocols.stats import mcnemar_exact_p

    out = []
    for key in dict.fromkeys((r["task"], r["policy"]) for r in rows):
        sel = [r for r in rows if (r["task"], r["policy"]) == key]
        worse = sum(r["sim_clean"] and not r["sim_preset"] for r in sel)
        better = sum(r["sim_preset"] and not r["sim_clean"] for r in sel)
        out.append({"task": key[0], "policy": key[1], "trials": len(sel),
                    "real": sum(r["real"] for r in sel),
                    "sim_clean": sum(r["sim_clean"] for r in sel),
                    "sim_preset": sum(r["sim_preset"] for r in sel),
                    "worse": worse, "better": better, "changed": worse + better,
                    "mcnemar_p": round(float(mcnemar_exact_p(worse, better)), 4),
                    "reacts": worse + better >= MIN_CHANGED})
    return out


def write_reaction(out: Path, rows: list[dict[str, Any]], config: ReactionConfig, *,
                   command: str = "") -> list[dict]:
    """``reaction_trials.csv``, ``reaction.{csv,md}`` and ``reaction_config.json`` in ``out``."""
    from bench.demo.evaluation import write_screen

    table = summarise(rows)
    preset = config.preset
    lines = [f"| task | policy | real | sim clean | sim {preset} | worse / better | McNemar p | "
             f"reacts (>= {MIN_CHANGED} changed) |", "|---|---|---|---|---|---|---|---|"]
    for r in table:
        n = r["trials"]
        lines.append(f"| {r['task']} | {r['policy']} | {r['real']}/{n} | {r['sim_clean']}/{n} | "
                     f"{r['sim_preset']}/{n} | {r['worse']} / {r['better']} | "
                     f"{r['mcnemar_p']:.2g} | {'yes' if r['reacts'] else 'no'} |")
    write_screen(out, "reaction", rows, table, lines, {
        **asdict(config), "scenes": list(SCENES), "min_changed": MIN_CHANGED,
        "real_gap_pp": list(REAL_GAP_PP),
        "command": command})
    return table
