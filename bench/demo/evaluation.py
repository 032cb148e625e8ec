"""The measured "real" success rates of the demo's learned policies.

Each (recipe, task) is rolled out in the ground-truth worlds at the real-domain settings
(:func:`evaluate_policy`, :data:`bench.worlds.real.REAL_DOMAIN`), summarised with Wilson
intervals and the demo's pair per task compared by Fisher's exact test
(:func:`write_evaluation`: ``eval_trials.csv``, ``eval.{csv,md}``, ``eval_pairs.{csv,md}``,
``eval_config.json``).
"""

from __future__ import annotations

from typing import Any

from bench.policies.bc_recipes import ALL_RECIPES, recipe_tasks

EVAL_CONDITION_OFFSET = 9000  # fresh starts: past the demos (5000+) and the study (100+, 1000+)


def evaluate_policy(name: str, task: str, *, trials: int,
                    condition_offset: int = EVAL_CONDITION_OFFSET,
                    worlds: tuple[str, ...] | None = None, root: Any = None,
                    progress: bool = True) -> list[dict[str, Any]]:
    """Roll a learned policy out in the ground-truth worlds at the real-domain settings.

    Trial ``t`` runs in ``worlds[t % len(worlds)]`` from condition ``condition_offset + t``
    with :data:`bench.worlds.real.REAL_DOMAIN` (the study's rollout loop,
    :func:`bench.sim.rollout.run_episode`). Returns one row per trial.
    """
    from bench.demo.demos import WORLD_IDS
    from bench.policies.learned import LearnedPolicy
    from bench.progress import progress as progress_bar
    from bench.sim.rollout import run_episode
    from bench.worlds.real import REAL_DOMAIN

    worlds = tuple(worlds or WORLD_IDS)
    envs: dict[str, Any] = {}
    rows = []
    for trial in progress_bar(range(trials), desc=f"eval {name}/{task}", unit="ep",
                              disable=not progress, mininterval=5.0):
        world = worlds[trial % len(worlds)]
        if world not in envs:
            envs[world] = REAL_DOMAIN.make_env(world, task)
        env = envs[world]
        policy = LearnedPolicy(env.unwrapped, name=name, root=root)
        record, _, _ = run_episode(env, policy, init_index=condition_offset + trial,
                                   episode=trial, policy_name=name)
        rows.append({"policy": name, "task": task, "world": world, "trial": trial,
                     "condition": condition_offset + trial, "success": bool(record.success),
                     "frames": int(record.frames), "status": str(record.status)})
    for env in envs.values():
        env.close()
    return rows


def summarise_rates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, task): successes, trials, rate and its 95 % Wilson interval."""
    from protocols.stats import wilson_interval

    out = []
    for key in sorted({(r["policy"], r["task"]) for r in rows}):
        sel = [r for r in rows if (r["policy"], r["task"]) == key]
        k, n = sum(r["success"] for r in sel), len(sel)
        interval = wilson_interval(k, n)
        out.append({"policy": key[0], "task": key[1], "successes": k, "trials": n,
                    "rate": round(k / n, 4), "wilson_low": round(interval.low, 4),
                    "wilson_high": round(interval.high, 4)})
    return out


def pair_tests(rates: list[dict[str, Any]], pairs: dict[str, tuple[str, str]]
               ) -> list[dict[str, Any]]:
    """Per task, the two policies of ``pairs[task]``: both rates and Fisher's exact p.

    Two-sided :func:`scipy.stats.fisher_exact` on the 2 x 2 table of successes and failures;
    tasks whose pair was not both evaluated are left out.
    """
    from scipy.stats import fisher_exact

    by_key = {(r["policy"], r["task"]): r for r in rates}
    out = []
    for task, (first, second) in pairs.items():
        if (first, task) not in by_key or (second, task) not in by_key:
            continue
        a, b = by_key[first, task], by_key[second, task]
        table = [[a["successes"], a["trials"] - a["successes"]],
                 [b["successes"], b["trials"] - b["successes"]]]
        out.append({"task": task, "policy_1": first, "policy_2": second,
                    "successes_1": a["successes"], "successes_2": b["successes"],
                    "trials": a["trials"], "fisher_p": round(float(fisher_exact(table)[1]), 4)})
    return out


def write_screen(out: Any, stem: str, rows: list[dict[str, Any]], table: list[dict[str, Any]],
                 markdown: list[str], config: dict[str, Any]) -> None:
    """Write a policy screen's four outputs in ``out``.

    ``{stem}_trials.csv`` (``rows``), ``{stem}.csv`` (``table``), ``{stem}.md`` (the
    ``markdown`` lines) and ``{stem}_config.json`` (``config``).
    """
    from pathlib import Path

    from bench.provenance import atomic_write_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows_csv(out / f"{stem}_trials.csv", rows)
    write_table(out, stem, table, markdown)
    atomic_write_json(out / f"{stem}_config.json", config)


def write_table(out: Any, stem: str, table: list[dict[str, Any]], markdown: list[str]) -> None:
    """``{stem}.csv`` (``table``) and ``{stem}.md`` (the ``markdown`` lines) in ``out``."""
    from pathlib import Path

    from bench.provenance import atomic_write_bytes

    write_rows_csv(Path(out) / f"{stem}.csv", table)
    atomic_write_bytes(Path(out) / f"{stem}.md", ("\n".join(markdown) + "\n").encode())


def write_rows_csv(path: Any, table: list[dict[str, Any]]) -> None:
    """``table`` (dicts with the same keys) as CSV at ``path``, written atomically."""
    import csv
    import io

    from bench.provenance import atomic_write_bytes

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    atomic_write_bytes(path, buffer.getvalue().encode())


def write_evaluation(out: Any, *, tasks: tuple[str, ...], trials: int,
                     policies: tuple[str, ...] = ALL_RECIPES, root: Any = None,
                     rows: list[dict[str, Any]] | None = None,
                     extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Evaluate every (policy, task) ``trials`` times; write ``eval_trials.csv``, ``eval.{csv,md}``.

    A recipe is evaluated on the tasks it is trained for (:func:`recipe_tasks`); the demo's
    pair per task (:data:`bench.policies.learned.DEMO_POLICIES`) is compared by Fisher's
    exact test in ``eval_pairs.{csv,md}``.

    Args:
        out: Output directory.
        tasks: Tasks evaluated.
        trials: Rollouts per (policy, task).
        policies: Recipe names.
        root: Policy asset root (default ``out/policies``, what was just trained).
        rows: Per-trial rows already computed by :func:`evaluate_policy` (e.g. in parallel
            processes; in the order tasks x policies), instead of evaluating here.
        extra: More fields for ``eval_config.json`` (e.g. how the rows were computed).
    """
    from pathlib import Path

    from bench.policies.learned import DEMO_POLICIES
    from bench.provenance import atomic_write_json
    from bench.worlds.real import REAL_DOMAIN

    out = Path(out)
    root = Path(root) if root is not None else out / "policies"
    if rows is None:
        rows = [row for task in tasks for name in policies if task in recipe_tasks(name)
                for row in evaluate_policy(name, task, trials=trials, root=root)]
    rates = summarise_rates(rows)
    write_rows_csv(out / "eval_trials.csv", rows)
    lines = ["| policy | task | successes / trials | rate | 95 % Wilson |", "|---|---|---|---|---|"]
    lines += [f"| {r['policy']} | {r['task']} | {r['successes']} / {r['trials']} | "
              f"{r['rate']:.2f} | {r['wilson_low']:.2f}-{r['wilson_high']:.2f} |" for r in rates]
    write_table(out, "eval", rates, lines)
    pairs = pair_tests(rates, {t: DEMO_POLICIES[t] for t in tasks})
    if pairs:
        lines = ["| task | demo pair | successes / trials | Fisher p (two-sided) |",
                 "|---|---|---|---|"]
        lines += [f"| {p['task']} | {p['policy_1']} vs {p['policy_2']} | {p['successes_1']} vs "
                  f"{p['successes_2']} / {p['trials']} | {p['fisher_p']:.3f} |" for p in pairs]
        write_table(out, "eval_pairs", pairs, lines)
    atomic_write_json(out / "eval_config.json", {
        "trials": trials, "condition_offset": EVAL_CONDITION_OFFSET, "tasks": list(tasks),
        "policies": list(policies), "demo_pairs": {t: list(DEMO_POLICIES[t]) for t in tasks},
        "real_domain": REAL_DOMAIN.to_json(), **(extra or {})})
    return rates
