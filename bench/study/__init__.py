"""Studies: the spec, its rollout plan, the runner, executors and the results store.

Floors, bottom first. A module imports only modules on a lower floor, at module level or
inside a function (``tests/bench/study/test_study_floors.py`` reads this list and checks
it), so the package has no import cycle:

1. ``plan``: the rollout plan (cells, counts, each trial's start); imports nothing.
2. ``lock``, ``store``, ``faults``, ``deployment``, ``world_domain``, ``coverage``,
   ``real_results``, ``captures``, ``obs_policy``: the parts of a study (output lock,
   results store, fault log, deployment knobs, ground-truth worlds, coverage retrainings,
   real outcomes, held-out captures, OBS-Policy frames); they read a spec by attribute.
3. ``spec``: :class:`~bench.study.spec.StudySpec` and its checks.
4. ``preflight``, ``analysis``, ``compare``, ``dry_run``: what reads a spec or a store:
   the refusals before ``--out`` exists, the verdicts, the comparison of two studies,
   the ``--dry-run`` plan.
5. ``work_unit``: a few rollouts of one (scene, condition, task, domain), in a worker.
6. ``executors``: where the work units run (``serial``, ``process``, ``ray``, plugins).
7. ``spec_file``, ``rollouts``: a spec file read once into the spec and its executor;
   the rollout stage (the driver commits every outcome).
8. ``sequential``, ``report``, ``reuse``: the rollout stage with sequential stopping; the
   HTML report of a finished study output (``bench study report``); an earlier study's
   rows reused after a spot check (``--reuse-from``).
9. ``runner``: a study end to end (bundles, quality, rollouts, analysis).
10. ``compare_cli``: ``bench study compare``.
11. ``cli``: ``bench study`` (``run``, ``export``, ``report``; adds ``compare``).
"""
