"""
The ratio statistics every algorithm logs, the same for every actor loss: ``train/ratio_deviation`` (``mean |r - 1|``)
and ``train/clip_fraction`` (the share of samples with ``1 - r > clip_low`` or ``r - 1 > clip_high``, SB3's
``mean(|r - 1| > clip_range)`` with one range), on minibatches whose ratios the test sets.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from reference import ratio_statistics_loop
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_xppo import XPPO, MaskableRecurrentXPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.core.records import minibatch_ratio_statistics

#: The ratios the tests give the samples, in turn: |r - 1| = 0.5, 0.05, 0.05, 0.5
RATIOS = (0.5, 0.95, 1.05, 1.5)
#: By hand: mean |r - 1| = (0.5 + 0.05 + 0.05 + 0.5) / 4
DEVIATION = 0.275
#: By hand, per clip range: the share of ratios outside it. 0.2: 0.5 and 1.5; (0.6, 0.3), the range [0.4, 1.3]: 1.5
CLIP_FRACTIONS = {0.2: 0.5, (0.6, 0.3): 0.25}
ACTOR_LOSSES = ("clip", "spo", "asymmetric_spo", "hpo")


# --- the statistics themselves ---------------------------------------------------------------------------------------


def test_statistics_of_two_minibatches_with_padding_by_hand_and_loop():
    # two minibatches: the first all valid, the second with two padded samples (one NaN) that must not count
    first = [0.5, 0.95, 1.05, 1.5]
    second = [0.7, 1.25, 0.01, float("nan")]
    valid = [None, th.tensor([True, True, False, False])]
    stats = minibatch_ratio_statistics(
        [th.log(th.tensor(first)), th.log(th.tensor(second))], [th.ones(4), th.ones(4)], 0.2, 0.2, None, valid=valid
    )
    # by hand: minibatch 1 as above; minibatch 2: |r - 1| = 0.3, 0.25, both outside 0.2
    assert stats["ratio_deviation"] == pytest.approx([0.275, 0.275], rel=1e-6)
    assert stats["clip_fraction"].tolist() == [0.5, 1.0]
    assert stats["clip_fraction_low"].tolist() == [0.25, 0.5] and stats["clip_fraction_high"].tolist() == [0.25, 0.5]
    flags = [[1, 1, 1, 1], [1, 1, 0, 0]]
    deviation, fraction = ratio_statistics_loop([first, second], flags, 0.2, 0.2)
    assert stats["ratio_deviation"].mean() == pytest.approx(deviation, rel=1e-6)
    assert stats["clip_fraction"].mean() == pytest.approx(fraction)
    # negative control: the padding counted changes both
    unmasked = minibatch_ratio_statistics(
        [th.log(th.tensor(first)), th.log(th.tensor(second[:3] + [1.0]))], [th.ones(4), th.ones(4)], 0.2, 0.2, None
    )
    assert unmasked["ratio_deviation"][1] != pytest.approx(0.275) and unmasked["clip_fraction"][1] != 1.0


@pytest.mark.parametrize("clip", [0.2, (0.6, 0.3), (0.05, 0.6)])
def test_decoupled_ranges_count_each_side_once(clip):
    low, high = clip if isinstance(clip, tuple) else (clip, clip)
    ratios = [0.3, 0.5, 0.9, 0.97, 1.0, 1.1, 1.4, 1.7]
    stats = minibatch_ratio_statistics([th.log(th.tensor(ratios))], [th.ones(8)], low, high, None)
    _, fraction = ratio_statistics_loop([ratios], [[1] * 8], low, high)
    assert stats["clip_fraction"][0] == pytest.approx(fraction)
    assert stats["clip_fraction"][0] == stats["clip_fraction_low"][0] + stats["clip_fraction_high"][0]


def test_a_negative_range_counts_a_sample_once_as_sb3():
    # A linear schedule ends below 0: every |r - 1| > -0.1, and SB3 counts each sample once
    stats = minibatch_ratio_statistics([th.log(th.tensor([0.95, 1.0, 1.05]))], [th.ones(3)], -0.1, -0.1, None)
    assert stats["clip_fraction"][0] == 1.0
    ratio = th.tensor([0.95, 1.0, 1.05])
    assert stats["clip_fraction"][0] == th.mean((th.abs(ratio - 1) > -0.1).float()).item()


def test_clip_fraction_is_sb3_ppos():
    # XPPO with PPO's settings trains PPO's parameters: over several minibatches and epochs, the same logged statistics
    kwargs = dict(n_steps=64, batch_size=16, n_epochs=4, learning_rate=3e-3, clip_range=0.05, seed=0, device="cpu")
    logs = [
        algo("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[16]), **kwargs).learn(128).logger.name_to_value
        for algo in (PPO, XPPO)
    ]
    assert logs[0]["train/clip_fraction"] > 0  # the test can tell
    assert logs[1]["train/clip_fraction"] == pytest.approx(logs[0]["train/clip_fraction"], rel=1e-6)
    assert logs[1]["train/approx_kl"] == pytest.approx(logs[0]["train/approx_kl"], rel=1e-5)


# --- train() of every algorithm, every actor loss --------------------------------------------------------------------


class CountingEnv(gym.Env):
    """
    Obs ``[t / 3, u]``, three actions (the last never allowed by ``action_masks``), a random reward and its two groups
    in ``info["vector_reward"]``; episodes of 3 and 2 steps in turn, so that recurrent minibatches hold padding.
    """

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.length = 3 if getattr(self, "length", 2) == 2 else 2
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.t / 3, self.np_random.uniform(-1, 1)], dtype=np.float32)

    def step(self, action):
        self.t += 1
        vector = self.np_random.normal(size=2).astype(np.float32)
        return self._obs(), float(vector.sum()), self.t == self.length, False, {"vector_reward": vector}

    def action_masks(self) -> np.ndarray:
        return np.array([True, True, False])


class SetRatios(BaseCallback):
    """
    At the rollout's end, sets the old log-probabilities so that each sample's ratio is ``RATIOS[i % 4]`` under the
    policy that collected it: the first (and only) minibatch of ``train()`` sees these ratios. The action head is
    zeroed (uniform over the allowed actions), so that the policy's log-probability is the same when ``train()``
    evaluates it again.
    """

    def _on_training_start(self) -> None:
        for param in self.model.policy.action_net.parameters():
            param.data.zero_()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        ratios = np.resize(np.array(RATIOS, dtype=np.float32), buffer.log_probs.size).reshape(buffer.log_probs.shape)
        self.ratios = ratios
        buffer.log_probs -= np.log(ratios)


def env() -> DummyVecEnv:
    return DummyVecEnv([CountingEnv, CountingEnv])


#: Each algorithm on the env: (class, policy, keywords); one rollout of 2 x 8 steps, one minibatch, one epoch
ALGORITHMS = {
    "XPPO": (XPPO, "MlpPolicy", {}),
    "XPPO, multi-critic": (XPPO, "MlpPolicy", dict(reward_groups=2)),
    "MaskableXPPO": (MaskableXPPO, "MlpPolicy", {}),
    "RecurrentXPPO": (RecurrentXPPO, "MlpLstmPolicy", dict(policy_kwargs=dict(lstm_hidden_size=4, net_arch=[8]))),
    "MaskableRecurrentXPPO": (
        MaskableRecurrentXPPO,
        "MlpLstmPolicy",
        dict(policy_kwargs=dict(lstm_hidden_size=4, net_arch=[8])),
    ),
}


def train_once(name: str, actor_loss: str, clip: float | tuple[float, float]) -> tuple[dict, SetRatios, object]:
    """One ``learn()`` of one rollout and one ``train()``: the logged values, the ratios set, the model."""
    algo, policy, kwargs = ALGORITHMS[name]
    kwargs = {"policy_kwargs": dict(net_arch=[8]), **kwargs}
    model = algo(policy, env(), n_steps=8, batch_size=16, n_epochs=1, actor_loss=actor_loss, clip_range=clip, seed=0, **kwargs)
    ratios = SetRatios()
    model.learn(16, callback=ratios)
    return model.logger.name_to_value, ratios, model


@pytest.mark.parametrize("clip", list(CLIP_FRACTIONS))
@pytest.mark.parametrize("actor_loss", ACTOR_LOSSES)
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_train_logs_the_statistics_by_hand(name, actor_loss, clip):
    logs, ratios, _ = train_once(name, actor_loss, clip)
    low, high = clip if isinstance(clip, tuple) else (clip, clip)
    # by hand: 16 samples, 4 of each ratio
    assert logs["train/ratio_deviation"] == pytest.approx(DEVIATION, rel=1e-5)
    assert logs["train/clip_fraction"] == pytest.approx(CLIP_FRACTIONS[clip])
    # the plain loop over the ratios the samples were given (one minibatch, every sample valid)
    deviation, fraction = ratio_statistics_loop([ratios.ratios.ravel().tolist()], [[1] * 16], low, high)
    assert logs["train/ratio_deviation"] == pytest.approx(deviation, rel=1e-5)
    assert logs["train/clip_fraction"] == pytest.approx(fraction)


@pytest.mark.parametrize("name", ["RecurrentXPPO", "MaskableRecurrentXPPO"])
def test_recurrent_minibatch_holds_padding(name):
    # The premise of the recurrent cases above: their minibatch pads the 2-step episodes to 3 steps, samples that
    # would move both statistics if they counted: their old log-probability is the padding's 0, and the uniform
    # policy's is log(1/3) or log(1/2), so their ratio would be at most 1/2 (|r - 1| >= 0.5, outside the range)
    _, _, model = train_once(name, "spo", 0.2)
    batch = next(model.rollout_buffer.get(batch_size=16))
    assert len(batch.old_log_prob) > 16 and int(batch.mask.sum()) == 16
    assert (batch.old_log_prob[~batch.mask.bool()] == 0).all()
