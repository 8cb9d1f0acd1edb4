"""
What the probability ratio did over a run's training: the ``train()`` statistics each run records
(:class:`TrainLogs`), their summary over a campaign's seeds (:func:`summarize`) and their plot (:func:`plot`).

XPPO logs ``train/ratio_deviation`` (``mean |r - 1|``) and, as SB3's PPO, ``train/clip_fraction`` (the share of
samples with ``|r - 1|`` beyond the clip range), the same for every actor loss: how far the policy moved from the one
that collected the rollout (docs/guide/xppo.md, "When SPO pays").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from harness.contenders import Contender

#: The ``train()`` statistics a run records over training (those its algorithm logs: SB3's PPO has no
#: ``ratio_deviation``) and the clip range they are read against
TRAIN_LOG_KEYS = ("train/ratio_deviation", "train/clip_fraction", "train/approx_kl", "train/clip_range")
#: How many points of each a run records: the means of that many equal spans of its budget
TRAIN_LOG_POINTS = 100
#: The plot's file in the campaign's folder
PLOT = "train_logs.png"
#: The span of steps from the start over which :func:`summarize` also averages: runs of different budgets compare
#: over the same updates (a 100k-step run against the first 100k steps of a 1M-step one at a constant learning rate)
WINDOW = 100_000


class TrainLogs(BaseCallback):
    """
    The :data:`TRAIN_LOG_KEYS` of every ``train()`` call: read from the logger when the next rollout starts (SB3's
    ``learn()`` dumps the logger before ``train()``, so its values are still there) and when training ends. Reads
    only: a run trains the same with it. Resumable: a run that spans sessions keeps the calls of the earlier ones.
    """

    def __init__(self) -> None:
        super().__init__()
        #: ``(num_timesteps, {key: value})`` per ``train()`` call
        self.calls: list[tuple[int, dict[str, float]]] = []

    def _on_step(self) -> bool:
        return True

    def _read(self) -> None:
        # (the model's count: the callback's own is set at each step, and a resumed run's first event comes before one)
        steps = self.model.num_timesteps
        values = {key: float(self.logger.name_to_value[key]) for key in TRAIN_LOG_KEYS if key in self.logger.name_to_value}
        if values and (not self.calls or self.calls[-1][0] != steps):
            self.calls.append((steps, values))

    def resumable_state(self) -> dict[str, Any]:
        return {"calls": [[steps, values] for steps, values in self.calls]}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.calls = [(int(steps), dict(values)) for steps, values in state["calls"]]

    def _on_rollout_start(self) -> None:
        self._read()

    def _on_training_end(self) -> None:
        self._read()

    def record(self, budget: int, points: int = TRAIN_LOG_POINTS) -> dict[str, list[Any]]:
        """
        Each key's mean over the ``train()`` calls of each of ``points`` equal spans of ``budget`` steps (a call after
        ``t`` steps falls in span ``ceil(t * points / budget)``, counted from 1, the last span taking any overshoot);
        ``steps``: the spans' ends. None where a span had no call, or the algorithm does not log the key.

        :param budget: the run's budget
        :param points: how many spans
        """
        width = budget / points
        spans: list[list[dict[str, float]]] = [[] for _ in range(points)]
        for steps, values in self.calls:
            spans[min(max(int(np.ceil(steps / width)) - 1, 0), points - 1)].append(values)
        out: dict[str, list[Any]] = {"steps": [round(width * (i + 1)) for i in range(points)]}
        for key in TRAIN_LOG_KEYS:
            means = [[v[key] for v in span if key in v] for span in spans]
            out[key] = [float(np.mean(m)) if m else None for m in means]
        return out


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def summarize(runs: list[dict[str, Any]], contenders: list[Contender], window: int = WINDOW) -> dict[str, Any]:
    """
    Per env and contender, over the runs that recorded train logs: the seeds, each logged key's curve (the mean over
    seeds of each point) and, per seed and as the mean over seeds, its mean over the whole run and over the first
    ``window`` steps.

    :param runs: a campaign's runs
    :param contenders: its contenders
    :param window: the steps of the early mean
    :return: ``{env: {contender: {"seeds", "steps", "window", <key>: {"curve", "run", "early", "run_per_seed",
        "early_per_seed"}}}}``, empty when no run recorded train logs
    """
    summary: dict[str, Any] = {}
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for c in contenders:
            rs = sorted((r for r in runs if r["env"] == env_id and r["contender"] == c.name and "train_logs" in r), key=_seed)
            if not rs:
                continue
            steps = rs[0]["train_logs"]["steps"]
            early = [i for i, s in enumerate(steps) if s <= window]
            row: dict[str, Any] = dict(seeds=[r["seed"] for r in rs], steps=steps, window=min(window, steps[-1]))
            for key in TRAIN_LOG_KEYS:
                series = [r["train_logs"][key] for r in rs]
                if all(v is None for s in series for v in s):
                    continue
                per_run = [_mean(s) for s in series]
                per_early = [_mean([s[i] for i in early]) for s in series]
                row[key.removeprefix("train/")] = dict(
                    curve=[_mean([s[i] for s in series]) for i in range(len(steps))],
                    run=_mean(per_run),
                    early=_mean(per_early),
                    run_per_seed=per_run,
                    early_per_seed=per_early,
                )
            summary.setdefault(env_id, {})[c.name] = row
    return summary


def _seed(run: dict[str, Any]) -> int:
    return int(run["seed"])


def plot(summary: dict[str, Any], path: str, title: str = "") -> None:
    """
    Per env (a row): the mean ``|r - 1|`` (left) and the clip fraction (right) over training, a line per contender
    (the mean over its seeds), the clip range dashed: the paper's figure of the ratio's deviation. Two panels a row
    whatever the number of envs, so that the figure stays legible at a page's width.

    :param summary: :func:`summarize`'s
    :param path: the PNG's path
    :param title: the figure's title
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(summary)
    fig, axes = plt.subplots(len(envs), 2, figsize=(14.0, 4.0 * len(envs)), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    for (left, right), env_id in zip(axes, envs, strict=True):
        clip = None
        for i, (name, row) in enumerate(summary[env_id].items()):
            steps = np.array(row["steps"])
            label = f"{name} ({len(row['seeds'])})"
            for ax, key in ((left, "ratio_deviation"), (right, "clip_fraction")):
                if key in row:
                    curve = np.array([np.nan if v is None else v for v in row[key]["curve"]])
                    ax.plot(steps, curve, color=colors[i % len(colors)], lw=1.3, label=label)
            if "clip_range" in row:
                clip = row["clip_range"]["run"]
        if clip is not None:
            left.axhline(clip, color="gray", ls="--", lw=0.9, label=f"clip range {clip:g}")
        left.set_title(f"{env_id}: mean |r - 1| per train()", fontsize=12)
        right.set_title(f"{env_id}: clip fraction per train()", fontsize=12)
        for ax in (left, right):
            ax.set_xlabel("environment steps", fontsize=10)
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=13)
    fig.tight_layout()
    fig.savefig(path, dpi=70, pil_kwargs=dict(optimize=True))
    plt.close(fig)
