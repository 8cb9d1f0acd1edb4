"""
The result files the regions are rendered from, under :data:`RESULTS` (``benchmarks/results/``, laid out as
:mod:`harness.layout` says). Every path is made when it is read, so a test that points :data:`RESULTS` elsewhere
renders from its own files.

A campaign says what it is in its ``report.json``: ``kind`` (written by ``--kind`` of ``benchmarks/learning.py``,
``benchmarks/multi_critic.py`` and ``benchmarks/mask_memory.py``) names the claim of the pages it answers, and
:func:`campaigns_of` finds the campaigns of a kind. The kinds the regions read:

- ``recommended``: ``xppo_recommended`` against PPO at PPO's hyperparameters (the confirmation);
- ``defaults``: the screen's best loss option against PPO;
- ``zoo-entries``: XPPO's tuned zoo entries against the preset and PPO;
- ``screen`` and ``option-confirmation``: an option screened on 3 seeds, and confirmed on 10 fresh ones;
- ``envpool-equivalence``: PPO trained on EnvPool's envs against gymnasium's;
- ``must-win``: the multi-critic styles campaign;
- ``sequence-batching``: the recurrent contenders with ``sequence_batching=True``, against the step-by-step runs of
  the same seeds (``benchmarks/mask_memory.py --campaign``, ``benchmarks/learning.py``);
- ``distributed``: XPPO on ranks (``@ranks=N``, the global rollout and minibatch the entry's) against one process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness import layout

#: The repository's root
ROOT = Path(layout.ROOT)
#: The results folder the regions read
RESULTS = Path(layout.RESULTS)


def load(path: Path) -> dict[str, Any] | None:
    """The JSON at ``path``, or None when there is none."""
    if not path.is_file():
        return None
    with open(path) as f:
        return json.load(f)


def single(name: str) -> dict[str, Any] | None:
    """A single benchmark's result file (``"speed.json"``), or None when not written."""
    return load(RESULTS / layout.SINGLE / name)


def result_file(relative: str) -> dict[str, Any] | None:
    """A file named relative to the results folder, as a report names its runs (``"runs/.../seed0.json"``)."""
    return load(RESULTS / relative)


def report(campaign: str) -> dict[str, Any] | None:
    """The ``report.json`` of a campaign (``"confirmation"``, ``"multi_critic/styles"``), or None when not written."""
    return load(RESULTS / layout.CAMPAIGNS / campaign / "report.json")


#: The folder under the campaigns' in which campaigns no page region reads are kept (``archive/session1``): their
#: reports stay where the prose of the pages cites them, and only the ``campaigns`` table lists them
ARCHIVE = "archive"


def campaign_files(name: str, archived: bool = False) -> dict[str, dict[str, Any]]:
    """
    Every campaign's file ``name`` (``"report.json"``, ``"clip_ab.json"``), by campaign (``"multi_critic/styles"``).

    :param archived: the archived campaigns' instead (named ``"archive/session1"``); the regions read the live ones only
    """
    root = RESULTS / layout.CAMPAIGNS
    paths = [path for path in sorted(root.rglob(name)) if (path.relative_to(root).parts[0] == ARCHIVE) == archived]
    return {path.parent.relative_to(root).as_posix(): load(path) for path in paths}  # type: ignore[misc]


def campaign_reports(archived: bool = False) -> dict[str, dict[str, Any]]:
    """Every campaign's report, by campaign, in the order of their folders (the archived ones' with ``archived``)."""
    return campaign_files("report.json", archived)


def campaigns_of(kind: str) -> dict[str, dict[str, Any]]:
    """The reports whose ``kind`` is ``kind``, by campaign, in the order of their folders."""
    return {name: data for name, data in campaign_reports().items() if data.get("kind") == kind}


def the_campaign(kind: str) -> tuple[str, dict[str, Any]] | None:
    """The one campaign of ``kind`` and its report (None before it reports); two of one kind is an error."""
    found = campaigns_of(kind)
    if len(found) > 1:
        raise ValueError(f"campaigns {sorted(found)} all declare kind {kind!r}: a page quotes one")
    return next(iter(found.items()), None)


def campaign_with(reports: dict[str, dict[str, Any]], env_id: str, contender: str) -> str | None:
    """The first of ``reports`` (by campaign) that ran ``contender`` on ``env_id``, None while none has."""
    return next(
        (name for name, data in reports.items() if contender in data["summary"].get(env_id, {}).get("contenders", {})), None
    )


def link(page: Path, target: Path, anchor: str = "") -> str:
    """The relative link from ``page`` to ``target`` (a file, or a page and its ``#anchor``)."""
    return os.path.relpath(target, page.parent).replace(os.sep, "/") + (f"#{anchor}" if anchor else "")
