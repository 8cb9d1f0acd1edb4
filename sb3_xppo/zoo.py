"""
XPPO in the RL Baselines3 Zoo (rl-zoo3).

rl-zoo3 looks algorithms up by name in ``rl_zoo3.ALGOS`` and their optuna search spaces in
``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER`` / ``HYPERPARAMS_CONVERTER``; :func:`register` adds XPPO
to all three under the name ``"xppo"``, ``MaskableXPPO`` as ``"xppo_mask"`` and ``RecurrentXPPO`` as
``"xppo_lstm"``, the way rl-zoo3's own ``train_sbx.py`` / ``enjoy_sbx.py`` plug in the SBX algorithms.
Everything else (configs, eval, checkpoints, tensorboard, optuna, enjoy) is rl-zoo3's own code, called
unchanged by ``python -m sb3_xppo.train`` / ``python -m sb3_xppo.enjoy``, but for one thing rl-zoo3 cannot
do: give a maskable model its env's action masks when it evaluates or watches it (:func:`masked_evaluation`).

Only the command-line entry points import this module: it imports rl-zoo3 and optuna, which the
rest of the package does not need.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor

from sb3_xppo.envs import GRID_MAZE_ID
from sb3_xppo.ppo_mask import MaskableXPPO
from sb3_xppo.ppo_recurrent import RecurrentXPPO
from sb3_xppo.xppo import XPPO

if TYPE_CHECKING:
    import optuna
    from stable_baselines3.common.vec_env import VecEnv

ALGO_NAME = "xppo"
MASK_ALGO_NAME = "xppo_mask"
LSTM_ALGO_NAME = "xppo_lstm"
#: The packaged default configs (rl-zoo3's yaml format), one per algorithm; ``setup.py`` ships them as package data.
CONFIG_PATHS = {
    name: Path(__file__).resolve().parent / "zoo_configs" / f"{name}.yml"
    for name in (ALGO_NAME, MASK_ALGO_NAME, LSTM_ALGO_NAME)
}
CONFIG_PATH = CONFIG_PATHS[ALGO_NAME]
#: The environment ``python -m sb3_xppo.train`` / ``enjoy`` use when no ``--env`` is given, for XPPO and for
#: any algorithm not in :data:`DEFAULT_ENVS`.
DEFAULT_ENV = "LunarLander-v3"
#: The default environment of each of the package's algorithms: a masked one for ``xppo_mask``, a partially
#: observable one (rl-zoo3's CartPole without velocities) for ``xppo_lstm``.
DEFAULT_ENVS = {ALGO_NAME: DEFAULT_ENV, MASK_ALGO_NAME: GRID_MAZE_ID, LSTM_ALGO_NAME: "CartPoleNoVel-v1"}
#: Name of the learning-curve figure written next to each trained model.
CURVE_FILENAME = "learning_curve.png"

# XPPO's own search space, sampled on top of rl-zoo3's PPO space (the names are optuna parameter names).
ACTOR_LOSSES = ("clip", "spo", "asymmetric_spo")
VALUE_LOSSES = ("mse", "sb3", "clipped", "improved")
NORMALIZE_ADVANTAGE = {"minibatch": "minibatch", "rollout": "rollout", "off": False}
DUAL_CLIP_THRESHOLDS = (None, 2.0, 3.0, 5.0)
CLIP_RANGE_VF = (0.1, 0.2, 0.5, 1.0)
XPPO_SEARCH_KEYS = ("actor_loss", "value_loss", "clip_range_vf", "dual_clip", "delightful", "normalize_advantage")


def add_xppo_choices(trial: optuna.Trial, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """
    Draw XPPO's loss choices in an optuna trial and add them to the keywords a PPO-family sampler drew.

    Every trial draws the actor loss (PPO clip, Schulman et al. 2017; SPO, Xie et al. 2025; asymmetric SPO), the
    value loss (plain MSE, SB3's clipping, the max-form clipping of Schulman et al. 2017, improved clipping of
    Lee & Chung 2024) with its ``clip_range_vf``, dual clipping (Ye et al. 2020; used with the clip loss only), the
    delightful gate (Osband 2026) and where advantages are normalized. All of them are drawn in every trial (no
    conditional parameters), so that rl-zoo3's multivariate TPE sampler models them jointly.

    :param trial: the optuna trial
    :param hyperparams: the keywords drawn by a sampler of rl-zoo3's for the parent algorithm (PPO, RecurrentPPO)
    :return: ``hyperparams`` updated with XPPO's keywords
    """
    sampled = {
        "actor_loss": trial.suggest_categorical("actor_loss", ACTOR_LOSSES),
        "value_loss": trial.suggest_categorical("value_loss", VALUE_LOSSES),
        "clip_range_vf": trial.suggest_categorical("clip_range_vf", CLIP_RANGE_VF),
        "dual_clip": trial.suggest_categorical("dual_clip", DUAL_CLIP_THRESHOLDS),
        "delightful": trial.suggest_categorical("delightful", (False, True)),
        "normalize_advantage": trial.suggest_categorical("normalize_advantage", tuple(NORMALIZE_ADVANTAGE)),
    }
    hyperparams.update(_convert_xppo_choices(sampled))
    return hyperparams


def sample_xppo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """
    Optuna sampler for XPPO and MaskableXPPO: rl-zoo3's PPO search space plus XPPO's loss choices
    (:func:`add_xppo_choices`).

    The PPO part is rl-zoo3's ``sample_ppo_params`` (batch size, n_steps, gamma, GAE lambda, learning rate,
    entropy coefficient, clip range, epochs, gradient clipping, network). rl-zoo3 has no sampler of its own for
    sb3-contrib's MaskablePPO, whose keywords are PPO's: ``xppo_mask`` searches this same space.

    The signature is the one rl-zoo3 calls every ``HYPERPARAMS_SAMPLER`` entry with.

    :param trial: the optuna trial
    :param n_actions: size of a continuous action (unused, part of rl-zoo3's signature)
    :param n_envs: number of parallel envs (unused, part of rl-zoo3's signature)
    :param additional_args: rl-zoo3's extra arguments (unused, part of rl-zoo3's signature)
    :return: keyword arguments for the ``XPPO`` (``MaskableXPPO``) constructor
    """
    from rl_zoo3.hyperparams_opt import sample_ppo_params

    return add_xppo_choices(trial, sample_ppo_params(trial, n_actions, n_envs, additional_args))


def sample_xppo_lstm_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """
    Optuna sampler for RecurrentXPPO: rl-zoo3's RecurrentPPO search space (``sample_ppo_lstm_params``) plus XPPO's
    loss choices (:func:`add_xppo_choices`). Same signature as :func:`sample_xppo_params`.

    :param trial: the optuna trial
    :param n_actions: size of a continuous action (unused, part of rl-zoo3's signature)
    :param n_envs: number of parallel envs (unused, part of rl-zoo3's signature)
    :param additional_args: rl-zoo3's extra arguments (unused, part of rl-zoo3's signature)
    :return: keyword arguments for the ``RecurrentXPPO`` constructor
    """
    from rl_zoo3.hyperparams_opt import sample_ppo_lstm_params

    return add_xppo_choices(trial, sample_ppo_lstm_params(trial, n_actions, n_envs, additional_args))


def convert_xppo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    Turn the raw parameters of an optuna trial drawn by :func:`sample_xppo_params` or :func:`sample_xppo_lstm_params`
    into keywords of ``XPPO``, ``MaskableXPPO`` or ``RecurrentXPPO``.

    rl-zoo3 calls it when it loads a trial from a study (``--storage ... --study-name ... --trial-id N``).
    The PPO part goes through rl-zoo3's own ``convert_onpolicy_params`` (its converter for PPO and RecurrentPPO).

    :param sampled_params: ``trial.params``
    :return: keyword arguments for the ``XPPO`` constructor
    """
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    ppo_params = {key: value for key, value in sampled_params.items() if key not in XPPO_SEARCH_KEYS}
    xppo_params = {key: value for key, value in sampled_params.items() if key in XPPO_SEARCH_KEYS}
    return {**convert_onpolicy_params(ppo_params), **_convert_xppo_choices(xppo_params)}


def _convert_xppo_choices(sampled: dict[str, Any]) -> dict[str, Any]:
    hyperparams = dict(sampled)
    if "normalize_advantage" in hyperparams:
        hyperparams["normalize_advantage"] = NORMALIZE_ADVANTAGE[hyperparams["normalize_advantage"]]
    if hyperparams.get("value_loss") == "mse":
        # plain MSE does not clip: the sampled clip range would be unused
        hyperparams["clip_range_vf"] = None
    if hyperparams.get("actor_loss", "clip") != "clip":
        # XPPO refuses dual clipping with SPO (it removes SPO's restoring gradient): the drawn threshold is dropped
        hyperparams["dual_clip"] = None
    return hyperparams


def register() -> None:
    """
    Make ``xppo``, ``xppo_mask`` and ``xppo_lstm`` known to rl-zoo3: the algorithms, their optuna samplers and
    converters. Idempotent.

    The package's own environments (``sb3_xppo/GridMaze-v0``) are registered with gymnasium when this module
    is imported. This also imports MO-Gymnasium when it is installed, so that its environments
    (``mo-lunar-lander-v3``) are in gymnasium's registry, the way rl-zoo3's ``import_envs`` does for other env
    packages.
    """
    import rl_zoo3
    import rl_zoo3.enjoy
    import rl_zoo3.exp_manager
    import rl_zoo3.hyperparams_opt
    import rl_zoo3.train
    import rl_zoo3.utils

    algorithms = {ALGO_NAME: XPPO, MASK_ALGO_NAME: MaskableXPPO, LSTM_ALGO_NAME: RecurrentXPPO}
    samplers = {ALGO_NAME: sample_xppo_params, MASK_ALGO_NAME: sample_xppo_params, LSTM_ALGO_NAME: sample_xppo_lstm_params}
    # train, exp_manager and enjoy import ALGOS (and exp_manager the optuna tables) by name. Today they all
    # bind the dicts defined in rl_zoo3.utils / rl_zoo3.hyperparams_opt, so this writes one dict each; writing
    # through every module keeps it right if a module ever binds its own copy.
    for module in (rl_zoo3, rl_zoo3.utils, rl_zoo3.train, rl_zoo3.exp_manager, rl_zoo3.enjoy):
        module.ALGOS.update(algorithms)
    for module in (rl_zoo3.hyperparams_opt, rl_zoo3.exp_manager):
        module.HYPERPARAMS_SAMPLER.update(samplers)
        module.HYPERPARAMS_CONVERTER.update(dict.fromkeys(algorithms, convert_xppo_params))

    with contextlib.suppress(ImportError):
        import mo_gymnasium  # noqa: F401  (registers the MO-Gymnasium environments)


def default_env(algo: str) -> str:
    """
    :param algo: an rl-zoo3 algorithm name
    :return: the environment ``python -m sb3_xppo.train`` / ``enjoy`` use for it when no ``--env`` is given
    """
    return DEFAULT_ENVS.get(algo, DEFAULT_ENV)


@contextlib.contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """Set ``owner.name = value`` for the duration of the block, then put back exactly what was there."""
    had_own = name in vars(owner)
    saved = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had_own:
            setattr(owner, name, saved)
        else:
            delattr(owner, name)


@contextlib.contextmanager
def masked_evaluation() -> Iterator[None]:
    """
    While the block runs, a maskable model (``MaskableXPPO``, or any sb3-contrib ``MaskablePPO``) acts on its
    env's action masks wherever rl-zoo3 evaluates or watches it; rl-zoo3 itself calls ``model.predict(obs)``
    without masks, and a model trained with masks has never learnt to avoid the invalid actions.

    - evaluation during training (rl-zoo3's ``EvalCallback``, and ``TrialEvalCallback`` under ``-optimize``): SB3's
      ``EvalCallback`` calls ``evaluate_policy`` through ``stable_baselines3.common.callbacks``; there it is
      replaced by sb3-contrib's masked ``evaluate_policy`` (the one of its ``MaskableEvalCallback``) for a maskable
      model on an env with ``action_masks()``, and is SB3's own for everything else;
    - ``enjoy`` and ``record_video``: rl-zoo3 builds their env with ``create_test_env`` and then calls
      ``model.predict`` in its own loop; the env is noted, and ``MaskablePPO.predict`` called without masks takes
      that env's current masks (``get_action_masks``).

    Everything is put back when the block ends.
    """
    import rl_zoo3.enjoy
    import rl_zoo3.utils
    import stable_baselines3.common.callbacks as sb3_callbacks
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_with_masks
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    evaluate_policy = sb3_callbacks.evaluate_policy
    create_test_env = rl_zoo3.utils.create_test_env
    predict = MaskablePPO.predict
    test_envs: list[VecEnv] = []

    def evaluate(model: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(model, MaskablePPO) and is_masking_supported(env):
            return evaluate_with_masks(model, env, *args, **kwargs)
        return evaluate_policy(model, env, *args, **kwargs)

    def create_noted_test_env(*args: Any, **kwargs: Any) -> VecEnv:
        env = create_test_env(*args, **kwargs)
        test_envs.append(env)
        return env

    def predict_with_masks(
        self: MaskablePPO,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        if action_masks is None and test_envs and is_masking_supported(test_envs[-1]):
            action_masks = get_action_masks(test_envs[-1])
        return predict(self, observation, state, episode_start, deterministic, action_masks)

    with contextlib.ExitStack() as stack:
        stack.enter_context(_replaced(sb3_callbacks, "evaluate_policy", evaluate))
        # enjoy bound create_test_env when it was imported; record_video imports it from rl_zoo3.utils when it runs
        stack.enter_context(_replaced(rl_zoo3.enjoy, "create_test_env", create_noted_test_env))
        stack.enter_context(_replaced(rl_zoo3.utils, "create_test_env", create_noted_test_env))
        stack.enter_context(_replaced(MaskablePPO, "predict", predict_with_masks))
        yield


def run_with_argv(command: Callable[[], None], args: Sequence[str]) -> None:
    """
    Run one of rl-zoo3's command functions (they parse ``sys.argv``) on the given arguments.

    :param command: ``rl_zoo3.train.train`` or ``rl_zoo3.enjoy.enjoy``
    :param args: the command-line arguments, without the program name
    """
    saved = sys.argv
    sys.argv = [saved[0] if saved else "sb3_xppo", *args]
    try:
        command()
    finally:
        sys.argv = saved


def prepare_storage(storage: str, attempts: int = 5) -> None:
    """
    Create optuna's tables in the RDB storage of a distributed search before rl-zoo3 opens it.

    optuna creates its tables the first time a process opens a database. Workers started together on a
    fresh PostgreSQL database all try to, and all but one fail (a duplicate key in ``pg_type``), so that
    one worker of a search started on every machine at once would die at start. Here a worker that loses
    that race tries again: its attempt was rolled back, and by then the winner's tables are in place.

    :param storage: rl-zoo3's ``--storage``: an optuna RDB URL. A journal file (``*.log``) has no tables
        and is left alone.
    :param attempts: how many times to try before the error is raised
    """
    if storage.endswith(".log"):
        return
    import optuna
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(attempts):
        try:
            optuna.storages.RDBStorage(storage).engine.dispose()
            return
        except (IntegrityError, ProgrammingError):  # a concurrent creator won: its tables exist now
            if attempt == attempts - 1:
                raise
            time.sleep(0.1 * (attempt + 1))


def linear_reward(env: gym.Env, weight: Sequence[float] | None = None) -> gym.Env:
    """
    ``env_wrapper`` for MO-Gymnasium environments in an rl-zoo3 config: scalarize the reward vector with
    ``mo_gymnasium.wrappers.LinearReward``, which also puts the vector in ``info["vector_reward"]`` where
    multi-critic XPPO reads its reward groups.

    rl-zoo3 applies ``env_wrapper`` on top of the ``Monitor`` it puts on every env, but SB3's ``Monitor``
    can only log a scalar reward; so when ``env`` is a ``Monitor``, ``LinearReward`` goes beneath it and the
    Monitor logs the scalarized return.

    :param env: the environment (as rl-zoo3 passes it: wrapped in a ``Monitor``)
    :param weight: one weight per reward term (default: all ones)
    :return: the wrapped environment
    """
    from mo_gymnasium.wrappers import LinearReward

    weights = None if weight is None else np.asarray(weight, dtype=np.float32)
    if isinstance(env, Monitor):
        env.env = LinearReward(env.env, weights)
        return env
    return LinearReward(env, weights)


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
