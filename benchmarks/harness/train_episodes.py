"""
The returns of a run's training episodes (:class:`TrainEpisodes`): the stochastic policy's episodes as the training
envs' ``Monitor`` ends them, each with the env step it ended at. The SPO paper's metric (its curves are these
returns over training), beside the deterministic evaluations every run records. A run's record keeps them per
rollout (their mean and count), so that a 5M-step run's record stays small; a campaign's report summarizes them per
contender (:func:`summarize`: a final return per seed, :func:`final_return`, and the curve) and plots them
(:func:`plot`), beside a paper's published returns where it has them.
"""

from __future__ import annotations

import itertools
import textwrap
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from harness.contenders import Contender
from harness.reports import iqm_with_ci

#: The decimals a run's record keeps of each return (``Monitor`` keeps 6)
DECIMALS = 2
#: The end share of a run's budget whose training episodes give its final training return (:func:`final_return`)
FINAL_SHARE = 0.05
#: The points of a summary's curve: the means of that many equal spans of the budget
CURVE_POINTS = 50
#: The plot's file in the campaign's folder
PLOT = "train_episodes.png"


class TrainEpisodes(BaseCallback):
    """
    Each training episode's return (``info["episode"]["r"]``, the raw reward's sum: ``Monitor`` sits under
    ``VecNormalize``) and the model's ``num_timesteps`` at the step that ended it. Reads only: a run trains the same
    with it. Resumable: a run that spans sessions keeps the episodes of the earlier ones. On ranks, a rank's own envs.
    """

    def __init__(self) -> None:
        super().__init__()
        #: ``num_timesteps`` at each episode's end, in the order they ended
        self.steps: list[int] = []
        #: their returns
        self.returns: list[float] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.steps.append(int(self.num_timesteps))
                self.returns.append(float(info["episode"]["r"]))
        return True

    def resumable_state(self) -> dict[str, Any]:
        return {"steps": self.steps, "returns": self.returns}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.steps, self.returns = [int(s) for s in state["steps"]], [float(r) for r in state["returns"]]

    def record(self, rollout: int) -> dict[str, list[Any]]:
        """
        :param rollout: the env steps of one rollout (``n_steps * n_envs``)
        :return: per rollout in which training episodes ended: ``steps``, the env step at its end; ``returns``, the
            mean return of those episodes (to :data:`DECIMALS`); ``episodes``, how many
        """
        buckets: dict[int, list[float]] = {}
        for step, episode_return in zip(self.steps, self.returns, strict=True):
            buckets.setdefault(-(-step // rollout) * rollout, []).append(episode_return)
        return {
            "steps": list(buckets),
            "returns": [round(sum(returns) / len(returns), DECIMALS) for returns in buckets.values()],
            "episodes": [len(returns) for returns in buckets.values()],
        }


def final_return(record: dict[str, list[Any]], budget: int, share: float) -> float | None:
    """
    The mean return of the training episodes that ended in the last ``share`` of ``budget`` steps (each rollout's mean
    weighted by its episodes): the paper's end point of a curve. None where none ended there.

    :param record: a run's ``train_episodes`` (:meth:`TrainEpisodes.record`)
    :param budget: the run's budget
    :param share: the share of the budget at its end
    """
    start = budget * (1.0 - share)
    kept = [(r, n) for s, r, n in zip(record["steps"], record["returns"], record["episodes"], strict=True) if s > start]
    if not kept:
        return None
    return sum(r * n for r, n in kept) / sum(n for _, n in kept)


def curve(record: dict[str, list[Any]], budget: int, points: int) -> list[float | None]:
    """The mean training-episode return in each of ``points`` equal spans of ``budget`` (None where none ended)."""
    width = budget / points
    sums, counts = np.zeros(points), np.zeros(points)
    for step, mean, n in zip(record["steps"], record["returns"], record["episodes"], strict=True):
        span = min(max(int(np.ceil(step / width)) - 1, 0), points - 1)
        sums[span] += mean * n
        counts[span] += n
    return [float(s / c) if c else None for s, c in zip(sums, counts, strict=True)]


def summarize(
    runs: list[dict[str, Any]],
    contenders: list[Contender],
    reps: int = 2000,
    share: float = FINAL_SHARE,
    points: int = CURVE_POINTS,
) -> dict[str, Any]:
    """
    Per env and contender, over the runs that recorded their training episodes: the seeds, each seed's final
    training return (:func:`final_return`) with their IQM and its 95% CI (rliable, as the report's final returns),
    and the curve per seed and its mean over seeds (:func:`curve`).

    :param runs: a campaign's runs
    :param contenders: its contenders
    :param reps: the bootstrap's resamples
    :param share: the end share of the budget the final return reads
    :param points: the curve's points
    :return: ``{env: {contender: {"seeds", "budget", "share", "final_per_seed", "final_iqm", "final_iqm_ci", "steps",
        "curve", "curve_per_seed"}}}``, empty when no run recorded its training episodes
    """
    summary: dict[str, Any] = {}
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for c in contenders:
            rs = sorted(
                (r for r in runs if r["env"] == env_id and r["contender"] == c.name and r.get("train_episodes")),
                key=lambda r: int(r["seed"]),
            )
            if not rs:
                continue
            budget = int(rs[0]["budget"])
            per_seed = [curve(r["train_episodes"], budget, points) for r in rs]
            mean = [[v for v in values if v is not None] for values in zip(*per_seed, strict=True)]
            finals = [final_return(r["train_episodes"], budget, share) for r in rs]
            kept = np.array([f for f in finals if f is not None])
            iqm, low, high = iqm_with_ci({c.name: kept}, reps)[c.name] if len(kept) else (None, None, None)
            summary.setdefault(env_id, {})[c.name] = dict(
                seeds=[r["seed"] for r in rs],
                budget=budget,
                share=share,
                final_per_seed=finals,
                final_iqm=iqm,
                final_iqm_ci=[low, high],
                steps=[round(budget / points * (i + 1)) for i in range(points)],
                curve=[float(np.mean(v)) if v else None for v in mean],
                curve_per_seed=per_seed,
            )
    return summary


def plot(
    summary: dict[str, Any],
    path: str,
    title: str = "",
    reference: dict[str, dict[str, tuple[str, float]]] | None = None,
    reference_steps: int | None = None,
) -> None:
    """
    Per env (a panel, also for the envs that only the reference has yet): each contender's training-episode return
    over training (the mean over its seeds, each seed faint), and the reference's points (a paper's published returns)
    at ``reference_steps``, on axes that reach them.

    :param summary: :func:`summarize`'s
    :param path: the PNG's path
    :param title: the figure's title
    :param reference: per env, per contender name: ``(label, return)``
    :param reference_steps: where the reference's returns were read
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys([*summary, *(reference or {})]))
    fig, axes = plt.subplots(1, len(envs), figsize=(4.6 * len(envs), 4.4), squeeze=False)
    points = (reference or {}) if reference_steps else {}
    # one colour per contender on every panel, its reference's star in the same colour
    names = list(dict.fromkeys(name for env_id in envs for name in [*summary.get(env_id, {}), *points.get(env_id, {})]))
    colors = dict(zip(names, itertools.cycle(plt.get_cmap("tab10").colors), strict=False))
    for ax, env_id in zip(axes[0], envs, strict=True):
        for name, row in summary.get(env_id, {}).items():
            color, steps = colors[name], np.array(row["steps"])
            for values in row["curve_per_seed"]:
                ax.plot(steps, [np.nan if v is None else v for v in values], color=color, lw=0.6, alpha=0.25)
            mean = [np.nan if v is None else v for v in row["curve"]]
            n = len(row["seeds"])
            ax.plot(steps, mean, color=color, lw=1.6, label=f"{name} ({n} seed{'s' * (n != 1)})")
        for name, (label, value) in points.get(env_id, {}).items():
            ax.scatter([reference_steps], [value], color=colors[name], marker="*", s=160, zorder=3, label=label)
        if reference_steps:
            ax.set_xlim(0, reference_steps * 1.04)
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_title(f"{env_id}: training-episode return", fontsize=12)
        ax.set_xlabel("environment steps", fontsize=10)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, width=int(55 * len(envs)))), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=70, pil_kwargs=dict(optimize=True))
    plt.close(fig)
