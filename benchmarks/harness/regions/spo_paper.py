"""
The SPO paper's claim in its own setting (issue 69, docs/guide/xppo.md "SPO in the paper's setting"): the campaign of
kind ``spo-paper`` (``benchmarks/spo_paper.yml``, :mod:`harness.spo_paper`). Per env, each contender's return at the
end of its runs, the training episodes' (the paper's metric) and the deterministic evaluations' (the harness's), the
paper's published returns beside them, and two verdicts over seeds: SPO against PPO's clip at the deep actor, and
PPO's clip at the deep actor against the shallow one (whether PPO loses to depth here at all).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import train_episodes
from harness.layout import CAMPAIGNS
from harness.regions import results
from harness.regions.figures import budget, interval, seed_robust_verdict, seeds
from harness.regions.results import link, the_campaign
from harness.reports import resumed_runs
from harness.spo_paper import CONTENDERS, KIND, PAPER_RETURNS, PAPER_STEPS
from harness.train_logs import PLOT as RATIO_PLOT

#: The campaign's envs: the paper's largest gaps
ENVS = tuple(PAPER_RETURNS)
#: Seeds per env and contender, and the campaign's runs
SEEDS = 5
RUNS = SEEDS * len(ENVS) * len(CONTENDERS)
#: The contenders' roles in words
ROLE_WORDS = {"clip": "PPO's clip, deep actor", "spo": "SPO, deep actor", "shallow": "PPO's clip, 64-64 actor"}


def rows() -> dict[str, dict[str, dict[str, Any]]]:
    """
    Per env and role: the training-episode summary row (``train_episodes`` of the report) with the evaluations' final
    IQM beside it (``eval``: the summary's row), for the contenders with finished runs.
    """
    found = the_campaign(KIND)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    if found is None:
        return out
    data = found[1]
    for env_id in ENVS:
        episodes = data.get("train_episodes", {}).get(env_id, {})
        evaluations = data["summary"].get(env_id, {}).get("contenders", {})
        for role, name in CONTENDERS.items():
            if name in episodes and name in evaluations:
                out.setdefault(env_id, {})[role] = {**episodes[name], "eval": evaluations[name]}
    return out


def runs_done() -> int:
    """How many of the campaign's runs its report holds."""
    return sum(len(row["seeds"]) for env in rows().values() for row in env.values())


def missing() -> list[tuple[str, str, list[int]]]:
    """The runs still to make: ``(env, role, seeds)`` for each env and contender with seeds left."""
    found, out = rows(), []
    for env_id in ENVS:
        for role in CONTENDERS:
            done = set(found.get(env_id, {}).get(role, {}).get("seeds", []))
            if left := [s for s in range(SEEDS) if s not in done]:
                out.append((env_id, role, left))
    return out


def remaining() -> list[str]:
    """The runs still to make, per env and contender, in words ("Ant-v5: SPO, deep actor, seeds 1-4")."""
    return [f"{env_id}: {ROLE_WORDS[role]}, seeds {seeds(left)}" for env_id, role, left in missing()]


def cost_words() -> str:
    """
    What the campaign costs: each env and contender's mean ``learn()`` time over its finished runs, and the runs left
    at those means (an env and contender without a run yet at its contender's mean over the envs, else at the mean of
    every run).
    """
    found = rows()
    finished = {(env_id, role): row for env_id, by_role in found.items() for role, row in by_role.items()}
    if not finished:
        return ""

    def mean(env_id: str, role: str) -> float:
        if (env_id, role) in finished:
            return finished[env_id, role]["eval"]["learn_seconds"]
        same = [row for (_, r), row in finished.items() if r == role] or list(finished.values())
        return sum(row["eval"]["learn_seconds"] * len(row["seeds"]) for row in same) / sum(len(row["seeds"]) for row in same)

    each = "; ".join(
        f"{env_id}, {ROLE_WORDS[role]}: {row['eval']['learn_seconds'] / 60:.0f} min ({len(row['seeds'])} run"
        f"{'s' * (len(row['seeds']) != 1)})"
        for (env_id, role), row in finished.items()
    )
    left = missing()
    hours = sum(mean(env_id, role) * len(seeds_left) for env_id, role, seeds_left in left) / 3600
    n = sum(len(seeds_left) for _, _, seeds_left in left)
    tail = f" The {n} runs left: about {hours:.0f} core-hours at those means." if n else ""
    return (
        "**Cost:** each run's `learn()` time on a 2-core machine, one torch thread and one core per run, the mean over "
        f"the finished runs: {each}.{tail}"
    )


def per_seed(row: dict[str, Any]) -> dict[int, float]:
    """A row's final training return by seed (the seeds whose last episodes ended within the budget's end share)."""
    return {s: v for s, v in zip(row["seeds"], row["final_per_seed"], strict=True) if v is not None}


def verdicts(env_id: str) -> dict[str, dict[str, Any]] | None:
    """
    SPO against PPO's clip at the deep actor (``spo``) and the deep actor against the shallow one under PPO's clip
    (``depth``), on the final training return over seeds (:func:`~harness.regions.figures.seed_robust_verdict`); None
    until every seed of the three contenders is in.
    """
    found = rows().get(env_id, {})
    if len(found) < len(CONTENDERS) or any(len(per_seed(row)) < SEEDS for row in found.values()):
        return None
    return {
        "spo": seed_robust_verdict(per_seed(found["spo"]), per_seed(found["clip"])),
        "depth": seed_robust_verdict(per_seed(found["clip"]), per_seed(found["shallow"])),
    }


def reproduced(found: dict[str, Any]) -> bool:
    """
    The paper's claim holds on an env: SPO ahead of PPO's clip by the rank test with every seed and without any one,
    and the IQM difference's 95% interval above 0 (the paper's direction). The interval then stays above 0 without
    any one seed as well: at 4 seeds a side the exact test is "ahead" only where every SPO seed beats every clip seed,
    and a resample's IQM lies within its sample's range.
    """
    return found["verdict"] == "ahead" and found["difference"][1] > 0


def _difference(found: dict[str, Any]) -> str:
    difference, low, high = found["difference"]
    return f"{difference:+.0f} [{low:+.0f}, {high:+.0f}], {found['verdict']} (p = {found['p']:.3f})"


def returns_table() -> list[str]:
    """Per env: the paper's returns, each contender's at the end of its runs, and the two verdicts."""
    lines = [
        f"| env (budget) | the paper at {budget(PAPER_STEPS)}: clip / spo | "
        + " | ".join(f"{ROLE_WORDS[role]}: training / evaluation" for role in CONTENDERS)
        + " | spo - clip, deep [95%] | deep - shallow, clip [95%] |",
        "| --- " * (len(CONTENDERS) + 4) + "|",
    ]
    by_env = rows()
    # every env, with the paper's returns, also before its first run is in
    for env_id, paper in PAPER_RETURNS.items():
        found = by_env.get(env_id, {})
        cells = []
        for role in CONTENDERS:
            row = found.get(role)
            if row is None or row.get("final_iqm") is None:
                cells.append("-")
                continue
            n = len(row["seeds"])
            cells.append(f"{interval(row, 'final')} / {interval(row['eval'], 'final')} ({n} seed{'s' * (n != 1)})")
        verdict = verdicts(env_id)
        said = [_difference(verdict[key]) for key in ("spo", "depth")] if verdict else ["pending", "pending"]
        env = f"{env_id} ({budget(next(iter(found.values()))['budget'])})" if found else env_id
        lines.append(f"| {env} | {paper['clip']:.0f} / {paper['spo']:.0f} | {' | '.join(cells)} | {' | '.join(said)} |")
    return lines


def decided() -> dict[str, dict[str, dict[str, Any]]]:
    """The envs with every run of the three contenders in, with their :func:`verdicts`, in the campaign's order."""
    return {env_id: found for env_id in ENVS if (found := verdicts(env_id)) is not None}


def findings(by_env: dict[str, dict[str, dict[str, Any]]]) -> str:
    """
    What the envs with every run in say (``by_env``: their :func:`verdicts`, not empty): the envs where SPO pays, the
    budget, and whether PPO lost to depth there.
    """
    names = list(by_env)
    which = "any of the three" if len(names) == len(ENVS) else ", ".join(names)
    pays = [e for e, v in by_env.items() if reproduced(v["spo"])]
    lost = [e for e, v in by_env.items() if v["depth"]["verdict"] == "behind"]
    steps = budget(next(iter(rows()[names[0]].values()))["budget"])
    lead = f"Reproduced on {', '.join(pays)} at {steps} steps" if pays else f"Not reproduced on {which} at {steps} steps"
    if pays and len(pays) < len(names):
        lead += f", not on {', '.join(e for e in names if e not in pays)}"
    depth = f"PPO's clip lost to depth on {', '.join(lost)}" if lost else f"PPO's clip did not lose to depth on {which}"
    return f"{lead}; {depth} (deep actor against 64-64, seeds {seeds(list(range(SEEDS)))})"


def answer() -> str:
    """
    The campaign's answer: the envs where SPO pays, the budget, and whether PPO lost to depth; while runs remain, the
    answer of the envs with every run in, the envs pending, and the command that resumes the rest.
    """
    found = the_campaign(KIND)
    if found is None:
        return "The campaign has not reported yet."
    done = decided()
    pending = [env_id for env_id in ENVS if env_id not in done]
    if not pending:
        return f"{findings(done)}."
    so_far = f". {findings(done)}; pending on {', '.join(pending)}" if done else "; verdict pending"
    return (
        f"{runs_done()} of {RUNS} runs done{so_far}. The rest ({'; '.join(remaining())}) resume with "
        f"`{found[1]['command']}` (a run killed mid-way goes on from its last checkpoint)."
    )


def spo_paper_claim() -> str | None:
    """The decision table's evidence for ``actor_loss='spo'`` once the campaign is complete, else None."""
    if runs_done() < RUNS:
        return None
    return f"in the paper's own setting: {answer()}"


def when_words() -> str:
    """
    The decision table's "when" for ``actor_loss='spo'``: the envs where the campaign found that it pays, as soon as
    one env's runs are all in and it pays there, with the envs still under test; else that no setting is shown yet
    (or, once every env is answered, found).
    """
    paper = "the SPO paper, Simple Policy Optimization, Xie et al. 2025, claims it for deep networks: a 6-hidden-layer actor"
    done = decided()
    pays = [env_id for env_id, found in done.items() if reproduced(found["spo"])]
    testing = [env_id for env_id in ENVS if env_id not in done]
    if not pays:
        if testing:
            return f"no setting shown yet where it pays ({paper}; its own setting under test)"
        return f"no setting found where it pays ({paper}; not reproduced in its own setting)"
    still = f"; {', '.join(testing)} under test" if testing else ""
    return (
        f"a 6-hidden-layer actor on {', '.join(pays)} (the SPO paper's setting: Xie et al. 2025, Simple Policy "
        f"Optimization{still})"
    )


def progress_words() -> str:
    """The campaign's progress, for the decision table while it runs, with what the envs with every run in say."""
    progress = f"the paper's own setting: {runs_done()} of {RUNS} runs done"
    if not (done := decided()):
        return progress
    said = findings(done)
    return f"{progress}, so far {said[:1].lower()}{said[1:]}"


def resumed_words() -> str:
    """The runs resumed mid-way from a checkpoint, per env, in words ("" when none)."""
    parts = [
        f"{env_id}: {said}"
        for env_id, by_role in rows().items()
        if (said := resumed_runs({ROLE_WORDS[role]: row["eval"] for role, row in by_role.items()}))
    ]
    return f"Resumed from its checkpoint by a later invocation: {'; '.join(parts)}." if parts else ""


def render_spo_paper(page: Path) -> str:
    """The setup, the returns beside the paper's, the plots and the answer."""
    found = the_campaign(KIND)
    text = (
        "Walker2d-v5, HalfCheetah-v5 and Ant-v5, the paper's largest gaps, in its authors' MuJoCo setup "
        "(`benchmarks/spo_paper.yml`: a 256-256-128-128-64-64 tanh actor, a 64-64 critic, 8 envs x 256 steps, "
        "4 minibatches, 10 epochs, lr 3e-4 to 0, clip 0.2, the value clipped): PPO's clip and SPO at that actor, and "
        f"PPO's clip at a 64-64 actor, seeds 0-{SEEDS - 1}. The paper trains {budget(PAPER_STEPS)} steps and reads "
        "the training episodes' returns; its returns below are read off its figure by eye. A training return is the mean "
        f"over the episodes that ended in the last {train_episodes.FINAL_SHARE:.0%} of the run; an evaluation, the "
        "harness's deterministic episodes at the end. IQMs over seeds with 95% intervals (rliable); a verdict is the "
        "exact rank test over seeds, which must hold without any one seed too, with the difference of the IQMs and its "
        "bootstrap interval; *reproduced* needs SPO ahead and that interval above 0.\n\n"
    )
    text += "\n".join(returns_table())
    if found is not None:
        folder = results.RESULTS / CAMPAIGNS / found[0]
        for name, label in (
            (train_episodes.PLOT, "Training-episode returns over training, the paper's at its end (stars)"),
            (RATIO_PLOT, "Mean |r - 1| and clip fraction per train() over training"),
        ):
            if (folder / name).is_file():
                text += f"\n\n![{label}]({link(page, folder / name)})"
    if cost := cost_words():
        text += f"\n\n{cost}"
    if resumed := resumed_words():
        text += f" {resumed}"
    return text + f"\n\n**Answer:** {answer()}"


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"spo-paper": render_spo_paper}
