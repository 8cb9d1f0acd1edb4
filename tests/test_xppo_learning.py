"""XPPO with its defaults solves CartPole-v1 within rl-zoo3's PPO budget (100k steps), with rl-zoo3's hyperparameters."""

import os

import numpy as np
import pytest
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_xppo import XPPO

rl_zoo3 = pytest.importorskip("rl_zoo3")
yaml = pytest.importorskip("yaml")
from rl_zoo3.utils import linear_schedule  # noqa: E402

SOLVED = 475.0


def zoo_hyperparams(env_id: str) -> dict:
    """rl-zoo3's tuned PPO hyperparameters of ``env_id`` (hyperparams/ppo.yml), as XPPO keywords."""
    with open(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml")) as f:
        params = dict(yaml.load(f, Loader=yaml.UnsafeLoader)[env_id])
    for key in ("learning_rate", "clip_range"):
        if isinstance(params.get(key), str):  # "lin_0.001": linear decay to 0, rl-zoo3's convention
            params[key] = linear_schedule(params[key].split("_")[1])
    return params


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_xppo_defaults_solve_cartpole(seed):
    params = zoo_hyperparams("CartPole-v1")
    n_timesteps, n_envs = int(params.pop("n_timesteps")), params.pop("n_envs")
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)
    model = XPPO(params.pop("policy"), env, seed=seed, device="cpu", **params)

    # Deterministic evaluation every 8k steps; training stops once the mean return reaches SOLVED
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=seed + 100)
    stop = StopTrainingOnRewardThreshold(reward_threshold=SOLVED)
    eval_callback = EvalCallback(eval_env, callback_on_new_best=stop, n_eval_episodes=10, eval_freq=1000, verbose=0)
    model.learn(n_timesteps, callback=eval_callback)

    assert model.num_timesteps <= n_timesteps
    mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    assert mean_return >= SOLVED, f"seed {seed}: mean deterministic return {mean_return} after {model.num_timesteps} steps"
    assert np.isfinite(mean_return)
