"""
RecurrentXPPO on a partially observable task: CartPole without its velocities.

usage: python examples/recurrent_cartpole_no_velocity.py [--timesteps 100000] [--seed 0] [--quick]

``CartPoleNoVel-v1`` (registered by rl-zoo3) shows the cart's position and the pole's angle but not their
velocities, which a policy has to infer from the observations it has seen. RecurrentXPPO (sb3-contrib's
RecurrentPPO, trained by XPPO's core) keeps that memory in an LSTM; here with the SPO actor loss (Xie et al. 2025)
and rl-zoo3's tuned RecurrentPPO hyperparameters for this env (``zoo_configs/xppo_lstm.yml``). For comparison, XPPO
with a feed-forward policy trains on the same observations with rl-zoo3's tuned PPO values for CartPole-v1. Both are
evaluated deterministically; ``evaluate_policy`` carries the LSTM state from step to step and resets it at each
episode start. ``--quick`` runs 2,048 steps, to check that everything works (it does not learn the task).
"""

from __future__ import annotations

import argparse

import rl_zoo3.import_envs  # noqa: F401  (registers CartPoleNoVel-v1)
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn

from sb3_xppo import XPPO, RecurrentXPPO

ENV_ID = "CartPoleNoVel-v1"


def evaluate(model: XPPO | RecurrentXPPO, seed: int, n_episodes: int) -> tuple[float, float]:
    """:return: mean and std of the deterministic return, on an env normalized with the training statistics"""
    env = VecNormalize(make_vec_env(ENV_ID, n_envs=1, seed=seed), training=False, norm_reward=False)
    env.obs_rms = model.get_env().obs_rms
    return evaluate_policy(model, env, n_eval_episodes=n_episodes, deterministic=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=100_000, help="training budget in env steps (the zoo's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a 2,048-step smoke run")
    args = parser.parse_args()
    timesteps = 2_048 if args.quick else args.timesteps
    n_episodes = 5 if args.quick else 20

    # rl-zoo3's tuned values for CartPoleNoVel-v1 (ppo_lstm.yml) and CartPole-v1 (ppo.yml): the same but for the LSTM
    common = dict(
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=LinearSchedule(1e-3, 0.0, 1.0),
        clip_range=LinearSchedule(0.2, 0.0, 1.0),
        actor_loss="spo",
        seed=args.seed,
        verbose=0,
    )
    recurrent = RecurrentXPPO(
        "MlpLstmPolicy",
        VecNormalize(make_vec_env(ENV_ID, n_envs=8, seed=args.seed)),
        policy_kwargs=dict(
            ortho_init=False,
            activation_fn=nn.ReLU,
            lstm_hidden_size=64,
            enable_critic_lstm=True,
            net_arch=dict(pi=[64], vf=[64]),
        ),
        **common,
    )
    recurrent.learn(total_timesteps=timesteps)
    feed_forward = XPPO("MlpPolicy", VecNormalize(make_vec_env(ENV_ID, n_envs=8, seed=args.seed)), **common)
    feed_forward.learn(total_timesteps=timesteps)

    for name, model in (("RecurrentXPPO (LSTM)", recurrent), ("XPPO (no memory)", feed_forward)):
        mean_return, std_return = evaluate(model, args.seed + 1000, n_episodes)
        print(f"{name} on {ENV_ID} after {timesteps} steps: eval return {mean_return:.1f} +/- {std_return:.1f}")


if __name__ == "__main__":
    main()
