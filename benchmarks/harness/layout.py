"""
Where the benchmarks' results go, by kind, under ``benchmarks/results/``:

- ``campaigns/<name>/``: a campaign's ``report.json``, ``report.md`` and ``plot.png`` (multi-critic campaigns under
  ``campaigns/multi_critic/<name>/``);
- ``single/``: the result files of the single benchmarks (``speed.json``, ``overhead.json``, ``gae.json``...);
- ``runs/``: the run cache, one JSON per training run, found by its key; reports name the runs they cite by their
  path relative to the results folder;
- ``partial/<key>-<fingerprint>/``: the resumable checkpoints of a run under way (not committed), from which a
  campaign killed at a session's end resumes it bit for bit; removed once its JSON is in the cache.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: ``benchmarks/``
BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The repository's root
ROOT = os.path.dirname(BENCHMARKS)
#: ``benchmarks/results/``: the default results folder of every script
RESULTS = os.path.join(BENCHMARKS, "results")
#: The folders of a results folder, by kind
CAMPAIGNS, SINGLE, RUNS, PARTIAL = "campaigns", "single", "runs", "partial"


def campaign_dir(results: str, name: str) -> str:
    """The folder of campaign ``name`` (``"confirmation"``, ``"multi_critic/styles"``) under ``results``."""
    return os.path.join(results, CAMPAIGNS, name)


def single_file(name: str, results: str = RESULTS) -> str:
    """The path of a single benchmark's result file ``name`` (``"speed.json"``) under ``results``."""
    return os.path.join(results, SINGLE, name)


def run_cache(results: str) -> str:
    """The run cache under ``results``."""
    return os.path.join(results, RUNS)


def partial_runs(results: str) -> str:
    """The folder of the runs under way under ``results``: each run's resumable checkpoints, by its key."""
    return os.path.join(results, PARTIAL)


def write_result(path: str, record: dict[str, Any], indent: int = 1) -> None:
    """Write a single benchmark's result file ``path`` (its folder made), and say so."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(record, f, indent=indent)
    print(f"wrote {path}")
