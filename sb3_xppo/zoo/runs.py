"""
The runs rl-zoo3 writes under ``--log-folder``: which run folders exist, the learning-curve figure of one run and
the one-line summary of its evaluations.
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np

from sb3_xppo.zoo.algorithms import ALGO_NAME

#: Name of the learning-curve figure written next to each trained model.
CURVE_FILENAME = "learning_curve.png"


def find_run_dirs(log_folder: str, algo: str, env_id: str) -> set[str]:
    """
    :param log_folder: rl-zoo3's ``--log-folder``
    :param algo: the algorithm name
    :param env_id: the environment id
    :return: the run folders rl-zoo3 has created for this algorithm and environment so far
    """
    from huggingface_sb3 import EnvironmentName

    env_name = EnvironmentName(env_id)
    algo_folder = Path(log_folder) / algo
    if not algo_folder.is_dir():
        return set()
    return {str(path) for path in algo_folder.glob(f"{env_name}_*") if path.is_dir()}


def plot_learning_curve(run_dir: str, env_id: str, algo: str = ALGO_NAME, window: int = 100) -> str | None:
    """
    Plot the learning curve of one rl-zoo3 run into ``<run_dir>/learning_curve.png``: the training episode
    return from the ``Monitor`` logs (rolling mean over ``window`` episodes) and, when evaluation ran, the
    deterministic eval return (mean and std over the eval episodes, from ``evaluations.npz``).

    :param run_dir: a run folder, ``logs/<algo>/<env>_<n>``
    :param env_id: the environment id (for the title and the env's reward threshold)
    :param algo: the algorithm name (for the title)
    :param window: rolling-mean window of the training curve, in episodes
    :return: the path of the figure, or None when the run logged no episode and no evaluation
    """
    from matplotlib.figure import Figure
    from stable_baselines3.common.monitor import LoadMonitorResultsError, load_results
    from stable_baselines3.common.results_plotter import X_TIMESTEPS, ts2xy, window_func

    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    plotted = False

    try:
        episodes = load_results(run_dir)
    except LoadMonitorResultsError:
        episodes = None
    if episodes is not None and len(episodes) > 0:
        steps, returns = ts2xy(episodes, X_TIMESTEPS)
        smooth = max(1, min(window, len(returns)))
        steps, returns = window_func(steps, returns, smooth, np.mean)
        ax.plot(steps, returns, label=f"train (mean of {smooth} episodes)")
        plotted = True

    evaluations_path = os.path.join(run_dir, "evaluations.npz")
    if os.path.isfile(evaluations_path):
        with np.load(evaluations_path) as evaluations:
            steps, results = evaluations["timesteps"], evaluations["results"]
        if len(steps) > 0:
            mean, std = results.mean(axis=1), results.std(axis=1)
            ax.plot(steps, mean, marker="o", markersize=3, label=f"eval (mean of {results.shape[1]} episodes)")
            ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
            plotted = True

    if not plotted:
        return None
    threshold = gym.spec(env_id).reward_threshold
    if threshold is not None:
        ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"solved ({threshold:g})")
    ax.set_title(f"{algo.upper()} on {env_id}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    path = os.path.join(run_dir, CURVE_FILENAME)
    fig.savefig(path, dpi=100)
    return path


def summarize_evaluations(run_dir: str, env_id: str) -> str | None:
    """
    :param run_dir: a run folder with rl-zoo3's ``evaluations.npz``
    :param env_id: the environment id (for its reward threshold)
    :return: one line: the last and best mean eval return and the first step at which the mean reached the
        env's reward threshold; None when no evaluation ran
    """
    evaluations_path = os.path.join(run_dir, "evaluations.npz")
    if not os.path.isfile(evaluations_path):
        return None
    with np.load(evaluations_path) as evaluations:
        steps, mean = evaluations["timesteps"], evaluations["results"].mean(axis=1)
    if len(steps) == 0:
        return None
    best = int(np.argmax(mean))
    line = f"eval: last mean return {mean[-1]:.1f} at {steps[-1]} steps, best {mean[best]:.1f} at {steps[best]} steps"
    threshold = gym.spec(env_id).reward_threshold
    if threshold is not None:
        reached = np.flatnonzero(mean >= threshold)
        line += f", threshold {threshold:g} " + (
            f"first reached at {steps[reached[0]]} steps" if len(reached) else "not reached"
        )
    return line
