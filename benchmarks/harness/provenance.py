"""
What made a benchmark run, so that a cached run is never cited for code that would no longer produce it.

- :func:`code_record`: the package's version and git commit (and whether the tree had uncommitted changes), and the
  versions of the libraries that decide the numbers (torch, SB3, sb3-contrib, gymnasium, rl-zoo3, NumPy).
- :func:`behaviour_fingerprint`: a hash of the model's parameters (and its ``VecNormalize`` statistics) after the
  first rollout and update of ``learn()``, with the run's own keywords, env and budget, at seed 0. The same code and
  libraries give the same bits, so a change that keeps every number (a faster exact path) keeps the fingerprint,
  and a change of behaviour in the first update changes it. A change that shows only later in training (e.g. at
  the end of a schedule) is not seen: the fingerprint is a tripwire, not a proof.

A report recomputes the fingerprint of each configuration it cites and compares it with the one its runs recorded
(``benchmarks/learning.py``): a run whose fingerprint differs is stale, and one made before fingerprints were
recorded is unverified; neither is mixed silently into a table.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import subprocess
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from harness.layout import ROOT

#: the distributions whose versions a run records
PACKAGES = ("sb3-xppo", "torch", "stable-baselines3", "sb3-contrib", "gymnasium", "rl-zoo3", "numpy")
REPOSITORY = ROOT


def git_state(repository: str = REPOSITORY) -> tuple[str | None, bool | None]:
    """
    :param repository: the checkout
    :return: the commit of ``HEAD`` and whether tracked files differ from it (None, None outside a git checkout)
    """
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repository, capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "sb3_xppo", "benchmarks/*.py"],
            cwd=repository,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, bool(changes.strip())


def code_record() -> dict[str, Any]:
    """The code that makes a run: the package's commit (``dirty``: the package or the scripts changed since) and versions."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    commit, dirty = git_state()
    return dict(commit=commit, dirty=dirty, versions=versions)


class StopAtSecondRollout(BaseCallback):
    """Ends ``learn()`` at the first step of its second rollout: one rollout and one ``train()`` call have run."""

    def __init__(self) -> None:
        super().__init__()
        self.rollouts = 0

    def _on_rollout_start(self) -> None:
        self.rollouts += 1

    def _on_step(self) -> bool:
        return self.rollouts < 2


def parameters_hash(model: Any) -> str:
    """
    A hash of the model's policy parameters and buffers, and of its ``VecNormalize`` statistics if any.

    :param model: an SB3 model
    :return: 16 hex digits
    """
    digest = hashlib.sha256()
    for name, tensor in model.policy.state_dict().items():
        array = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{array.dtype}:{tuple(array.shape)}".encode())
        digest.update(array.numpy().tobytes() if array.dtype != th.bfloat16 else array.float().numpy().tobytes())
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is not None:
        for stats in (getattr(vec_normalize, "obs_rms", None), getattr(vec_normalize, "ret_rms", None)):
            if stats is None:
                continue
            for part in (stats.mean, stats.var):
                if isinstance(part, dict):  # Dict observations: one set of statistics per key
                    for key in sorted(part):
                        digest.update(np.ascontiguousarray(part[key]).tobytes())
                else:
                    digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()[:16]


def behaviour_fingerprint(model: Any, budget: int, callbacks: list[BaseCallback] | None = None) -> str:
    """
    Run ``model.learn(budget)`` up to the first step of its second rollout (one rollout, one update, the schedules
    as at the start of the real run) and hash what it learned (:func:`parameters_hash`).

    :param model: a fresh model, built as the run builds it, at seed 0
    :param budget: the run's ``learn()`` budget
    :param callbacks: the run's own callbacks that change training (e.g. rl-zoo3's), if any
    :return: 16 hex digits
    """
    model.learn(budget, callback=[*(callbacks or []), StopAtSecondRollout()])
    return parameters_hash(model)
