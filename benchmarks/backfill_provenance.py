"""
Backfill the behavioural fingerprint of learning runs cached before runs recorded one (``benchmarks/provenance.py``).

A run's JSON entered the repository in one commit; the package at that commit is taken as the code that made it. For
each such commit, the package is checked out in a temporary git worktree and, in a subprocess that imports it in
place of the working tree's, each run's configuration is rebuilt with today's benchmark harness (``learning.py``)
and fingerprinted at seed 0. A configuration is rebuilt from the run's own record (env, budget, contender, seed)
and the evaluation settings of the report that cited it; it counts only when the rebuilt cache key is the key the
run recorded, so a run that cannot be rebuilt exactly stays unverified. The fingerprint goes into the run's JSON
with ``code = dict(commit=<that commit>, backfilled=True)``; a report then compares it with today's code as for any
run (stale or current). Multi-critic runs (their own runner) are not backfilled.

usage: python benchmarks/backfill_provenance.py [--results benchmarks/results] [--limit N]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import Any

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.dirname(BENCHMARKS)
RESULTS = os.path.join(BENCHMARKS, "results")
#: the report JSON's ``args`` that enter a task's key besides the run's own record
EVAL_ARGS = ("n_evals", "eval_episodes", "final_episodes", "clip_range_vf")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True, check=True).stdout.strip()


def adding_commit(path: str) -> str | None:
    """The commit that added ``path`` to the repository (the oldest one that has it), or None if untracked."""
    commits = git("log", "--diff-filter=A", "--format=%H", "--", os.path.relpath(path, REPOSITORY)).split()
    return commits[-1] if commits else None


def eval_settings(results: str) -> list[dict[str, Any]]:
    """Every distinct set of evaluation settings the learning reports were written with."""
    settings = []
    for path in sorted(glob.glob(os.path.join(results, "learning_*.json"))):
        with open(path) as f:
            args = json.load(f).get("args", {})
        setting = {k: args[k] for k in EVAL_ARGS if k in args}
        if len(setting) == len(EVAL_ARGS) and setting not in settings:
            settings.append(setting)
    return settings or [dict(n_evals=20, eval_episodes=10, final_episodes=20, clip_range_vf=0.2)]


def worker(paths: list[str], settings: list[dict[str, Any]], commit: str) -> None:
    """In the subprocess: fingerprint each run's configuration with the package importable here (that commit's)."""
    sys.path.insert(0, BENCHMARKS)
    import learning

    for path in paths:
        with open(path) as f:
            run = json.load(f)
        task = None
        for setting in settings:
            contender = learning.for_env(learning.parse_contender(run["contender"]), run["env"])
            candidate = learning.Task(
                run["env"],
                run["budget"],
                contender,
                run["seed"],
                setting["n_evals"],
                setting["eval_episodes"],
                setting["final_episodes"],
                setting["clip_range_vf"],
            )
            if candidate.key() == run["key"]:
                task = candidate
                break
        if task is None:
            print(f"not rebuilt (key differs): {path}", flush=True)
            continue
        run["fingerprint"] = learning.fingerprint(task)
        run["code"] = dict(commit=commit, backfilled=True)
        learning.save_run(run, path)
        print(f"{run['fingerprint']} {path}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--limit", type=int, default=None, help="at most this many commits (the newest first)")
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--commit", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    settings = eval_settings(args.results)
    if args.worker is not None:
        worker(args.worker, settings, args.commit)
        return
    by_commit: dict[str, list[str]] = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(args.results, "learning_runs", "**", "seed*.json"), recursive=True)):
        with open(path) as f:
            if "fingerprint" in json.load(f):
                continue
        commit = adding_commit(path)
        if commit is not None:
            by_commit[commit].append(path)
    order = git("log", "--format=%H").split()  # newest first
    commits = sorted(by_commit, key=order.index)[: args.limit]
    print(f"{sum(len(by_commit[c]) for c in commits)} runs from {len(commits)} commits to fingerprint", flush=True)
    for commit in commits:
        with tempfile.TemporaryDirectory() as folder:
            tree = os.path.join(folder, "tree")
            git("worktree", "add", "--detach", tree, commit)
            try:
                env = dict(os.environ, PYTHONPATH=tree)
                command = [sys.executable, __file__, "--results", args.results, "--commit", commit, "--worker"]
                subprocess.run([*command, *by_commit[commit]], cwd=REPOSITORY, env=env, check=False)
            finally:
                git("worktree", "remove", "--force", tree)


if __name__ == "__main__":
    main()
