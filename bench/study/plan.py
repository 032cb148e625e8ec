"""The rollout plan of a study: which rollouts it runs, in which order, from which starts.

The one definition of a study's rollouts; every count of them and every trial's initial
condition comes from here:

* :func:`domain_trials` - trials per (scene, condition, task, policy) cell of a domain:
  ``trials`` simulated; ``real_trials`` "real" when those are rollouts (``real_domain``
  ``simulated`` or ``world``), none with ``real_results`` (the robot's counts are data);
* :func:`rollout_cells` - every (domain, scene, condition, task) cell with its policies and
  trials, in execution order: per scene the "real" cells (clean, each task), then the
  simulated ones (each condition, each task);
* :func:`rollout_plan` - those cells expanded into (domain, scene, condition, task, trial)
  blocks (each run once per policy of the task);
* :func:`count_rollouts` - rollouts of the plan, counted per cell without listing them (a
  spec of 10^9 trials is refused by its count at once);
* :func:`init_index` - trial ``t``'s initial-condition index: ``sim_condition_offset + t``
  in every simulated condition (paired), ``real_condition_offset + t`` in the "real" domain,
  ``control_condition_offset + t`` in the control condition :data:`CONTROL`.

The control ``clean-repeat`` is the clean bundle again on a disjoint block of starts: its
transitions against clean are what chance alone (other starts, same scene) produces, the
noise floor the other conditions' transitions are read against.

The bottom floor of :mod:`bench.study`: it imports nothing; ``spec`` is a
:class:`bench.study.spec.StudySpec`, read by attribute.
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: The reference condition: the undamaged scene every other condition is compared with (the
#: "real" domain's trials run on it).
CLEAN = "clean"
#: The control condition: the clean bundle on its own block of starts (disjoint from every
#: other condition's), so it differs from clean by chance alone.
CONTROL = "clean-repeat"
#: Rollout domains: the simulated conditions, and the "real" domain (a stand-in or a world).
DOMAINS = ("sim", "real")


class RolloutCell(NamedTuple):
    """One (domain, scene, condition, task) cell of the plan: its policies and trials."""

    domain: str
    scene: str
    condition: str
    task: str
    policies: tuple[str, ...]
    trials: int  # per policy

    @property
    def rollouts(self) -> int:
        """Rollouts of the cell: every trial of every policy."""
        return len(self.policies) * self.trials


def domain_trials(spec: Any, domain: str) -> int:
    """Trials per (scene, condition, task, policy) cell of ``domain`` (0: none run)."""
    if domain == "sim":
        return spec.trials
    if domain == "real":  # with real_results the robot's counts are data
        return spec.real_trials if spec.rolls_out_real else 0
    raise ValueError(f"unknown rollout domain {domain!r}; one of {list(DOMAINS)}")


def init_index(spec: Any, domain: str, trial: int, condition: str | None = None) -> int:
    """Initial-condition index of ``trial``: the same in every condition of a domain (paired).

    The control condition (:data:`CONTROL`) takes its own block, ``control_condition_offset
    + trial``, disjoint from the others' (the spec checks it).
    """
    if domain == "real":
        return spec.real_condition_offset + trial
    if condition == CONTROL:
        return spec.control_condition_offset + trial
    return spec.sim_condition_offset + trial


def rollout_cells(spec: Any) -> list[RolloutCell]:
    """Every (domain, scene, condition, task) cell with trials, in execution order."""
    real, sim = domain_trials(spec, "real"), domain_trials(spec, "sim")
    cells = []
    for scene in spec.scene_names:
        if real:
            cells += [RolloutCell("real", scene, CLEAN, task, tuple(spec.policies[task]), real)
                      for task in spec.tasks]
        cells += [RolloutCell("sim", scene, cond, task, tuple(spec.policies[task]), sim)
                  for cond in spec.all_conditions for task in spec.tasks]
    return cells


def rollout_plan(spec: Any) -> list[tuple[str, str, str, str, int]]:
    """Every (domain, scene, condition, task, trial) block, in execution order."""
    return [(c.domain, c.scene, c.condition, c.task, trial)
            for c in rollout_cells(spec) for trial in range(c.trials)]


def count_rollouts(spec: Any, domain: str | None = None) -> int:
    """Rollouts of :func:`rollout_plan` (each block once per policy), of ``domain`` or all."""
    return sum(c.rollouts for c in rollout_cells(spec) if domain in (None, c.domain))
