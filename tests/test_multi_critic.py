"""Multi-critic XPPO (reward groups): plain XPPO with one group, per-group GAE against a hand loop, independent heads,
save/load, logs, the RewardGroups wrapper, every bad input, and mo-lunar-lander-v3."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from helpers import params_equal
from reference import zscore_loop
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv, SimpleMultiObsEnv
from stable_baselines3.common.utils import explained_variance
from stable_baselines3.common.vec_env import DummyVecEnv

import sb3_xppo
from sb3_xppo import XPPO, MultiCriticPolicy, MultiCriticRolloutBuffer, RewardGroups
from sb3_xppo.multi_critic import (
    MultiCriticCnnPolicy,
    MultiCriticDictRolloutBuffer,
    MultiCriticMultiInputPolicy,
    SeparateCritics,
)

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, device="cpu")


class GroupEnv(gym.Env):
    """
    Obs ``[t / 10, u]`` with ``u ~ U(-1, 1)``, two actions, three reward terms in ``info["vector_reward"]``
    (a constant, the action, ``-u**2``; the scalar reward is their sum); ends with probability ``terminate_prob``
    at each step, and surely after ``horizon`` steps when one is given.
    """

    observation_space = spaces.Box(-1.0, 10.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, terminate_prob: float = 0.1, key: str = "vector_reward", horizon: int | None = None) -> None:
        self.terminate_prob, self.key, self.horizon = terminate_prob, key, horizon

    def _obs(self) -> np.ndarray:
        self.u = self.np_random.uniform(-1, 1)
        return np.array([self.t / 10, self.u], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        vector = np.array([1.0, float(action), -(self.u**2)], dtype=np.float32)
        self.t += 1
        terminated = bool(self.np_random.random() < self.terminate_prob) or self.t == self.horizon
        info = {self.key: vector, "reward_task": float(vector[0]), "reward_action": float(vector[1])}
        return self._obs(), float(vector.sum()), terminated, False, info


class VectorFromReward(gym.Wrapper):
    """Puts the scalar reward as a vector of one into the info (multi-critic XPPO with one group)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["vector_reward"] = np.array([reward], dtype=np.float32)
        return obs, reward, terminated, truncated, info


class _TermsInInfo(gym.Wrapper):
    """Reports two reward terms in the info (SimpleMultiObsEnv has none)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "a": reward, "b": -0.5}


# --- one group is plain XPPO -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_one_group_equals_xppo_exactly(env_id):
    # Episodes cut at 40 steps: the truncation bootstrap is exercised too
    def env():
        return make_vec_env(env_id, n_envs=2, seed=0, wrapper_class=VectorFromReward, env_kwargs=dict(max_episode_steps=40))

    kwargs = dict(TINY, policy_kwargs=dict(net_arch=[16]), seed=3)
    plain = XPPO("MlpPolicy", env(), **kwargs).learn(256)
    grouped = XPPO("MlpPolicy", env(), reward_groups=1, group_weights=[1], normalize_groups=False, **kwargs).learn(256)
    assert isinstance(grouped.policy, MultiCriticPolicy) and isinstance(grouped.rollout_buffer, MultiCriticRolloutBuffer)
    assert grouped.rollout_buffer.values.shape == (2 * 32, 1)
    assert params_equal(plain.policy, grouped.policy)


# --- per-group GAE against a hand loop ---------------------------------------------------------------------------------


class RolloutRecorder(BaseCallback):
    """Records each step's raw group rewards and truncations, and a copy of the buffer at the end of the rollout."""

    def _on_rollout_start(self) -> None:
        self.raw, self.dones, self.truncated, self.terminal_values = [], [], [], []

    def _on_step(self) -> bool:
        infos, dones = self.locals["infos"], self.locals["dones"]
        self.raw.append(np.stack([info["vector_reward"] for info in infos]))
        truncated = [bool(done and info.get("TimeLimit.truncated", False)) for done, info in zip(dones, infos)]
        self.truncated.append(truncated)
        self.dones.append(dones.copy())
        values = np.zeros((len(infos), 3), dtype=np.float32)
        for idx, cut in enumerate(truncated):
            if cut:
                obs = th.as_tensor(infos[idx]["terminal_observation"])[None]
                values[idx] = self.model.policy.predict_values(obs)[0].detach().numpy()
        self.terminal_values.append(values)
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        names = ("observations", "rewards", "values", "episode_starts", "returns", "group_advantages", "advantages")
        self.buffer = {name: getattr(buffer, name).copy() for name in names}
        # every critic's value of every stored observation, before train() changes the policy
        obs = th.as_tensor(buffer.observations).reshape(-1, *buffer.obs_shape)
        self.values = self.model.policy.predict_values(obs).detach().numpy().reshape(buffer.values.shape)
        self.last_values = self.locals["values"].detach().numpy().copy()
        self.last_dones = self.locals["dones"].copy()


def test_buffer_group_gae_equals_hand_loop_with_truncation_and_bootstrap():
    n_steps, n_envs, gamma, lam, weights = 24, 2, 0.9, 0.8, [2.0, 0.5, 1.0]
    env = DummyVecEnv([lambda: TimeLimit(GroupEnv(terminate_prob=0.15), max_episode_steps=5)] * n_envs)
    env.seed(1)
    model = XPPO("MlpPolicy", env, reward_groups=3, group_weights=weights, n_steps=n_steps, batch_size=48, gamma=gamma,
                 gae_lambda=lam, policy_kwargs=dict(net_arch=[16]), seed=1, device="cpu")  # fmt: skip
    recorder = RolloutRecorder()
    model.learn(n_steps * n_envs, callback=recorder)
    buf, raw = recorder.buffer, np.asarray(recorder.raw)
    truncated, dones = np.asarray(recorder.truncated), np.asarray(recorder.dones)
    assert truncated.any() and (dones & ~truncated).any(), "the rollout must hold truncated and terminated episodes"
    # the buffer's (n_steps, n_envs, G) values are the critics' values of the stored observations
    np.testing.assert_allclose(buf["values"], recorder.values, atol=1e-6)

    advantages = np.zeros((n_steps, n_envs, 3))
    for e in range(n_envs):
        for g in range(3):
            running = 0.0
            for t in reversed(range(n_steps)):
                reward = float(raw[t, e, g])
                if truncated[t, e]:
                    # a truncated episode bootstraps each group from its own value of the terminal observation
                    reward += gamma * float(recorder.terminal_values[t][e, g])
                if t == n_steps - 1:
                    not_done, next_value = 1.0 - float(recorder.last_dones[e]), float(recorder.last_values[e, g])
                else:
                    not_done, next_value = 1.0 - float(buf["episode_starts"][t + 1, e]), float(buf["values"][t + 1, e, g])
                delta = reward + gamma * next_value * not_done - float(buf["values"][t, e, g])
                running = delta + gamma * lam * not_done * running
                advantages[t, e, g] = running
    np.testing.assert_allclose(
        buf["rewards"], raw + gamma * np.asarray(recorder.terminal_values) * truncated[..., None], atol=1e-6
    )
    np.testing.assert_allclose(buf["group_advantages"], advantages, atol=1e-5)
    np.testing.assert_allclose(buf["returns"], advantages + buf["values"], atol=1e-5)
    # combined: each group z-scored over the rollout, then the weighted mean
    normalized = [zscore_loop(list(advantages[..., g].ravel()), [1.0] * advantages[..., g].size) for g in range(3)]
    combined = sum(w * np.asarray(z) for w, z in zip(weights, normalized)) / sum(weights)
    np.testing.assert_allclose(buf["advantages"].ravel(), combined, atol=1e-4)


@pytest.mark.parametrize("reduce", ["sum", "max", "min"])
def test_buffer_group_reduce_and_no_normalization(reduce):
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=["a", "b", "c"], group_weights=[1.0, 0.0, 3.0], group_reduce=reduce,
                 normalize_groups=False, **TINY)  # fmt: skip
    model.learn(32, callback=(recorder := RolloutRecorder()))
    weighted = recorder.buffer["group_advantages"] * np.array([1.0, 0.0, 3.0], dtype=np.float32)
    expected = dict(sum=weighted.sum(-1), max=weighted.max(-1), min=weighted.min(-1))[reduce]
    np.testing.assert_allclose(recorder.buffer["advantages"], expected, rtol=1e-6, atol=1e-6)


# --- the heads -------------------------------------------------------------------------------------------------------


def _value_loss_grads(policy: MultiCriticPolicy, group: int) -> dict[str, th.Tensor]:
    obs = th.randn(8, 2)
    values, _, _ = policy.evaluate_actions(obs, th.zeros(8, dtype=th.long))
    policy.zero_grad()
    ((values[:, group] - 1.0) ** 2).mean().backward()
    return {name: param.grad for name, param in policy.named_parameters()}


def test_separate_critics_gradient_reaches_only_its_head():
    env = GroupEnv()
    policy = MultiCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3, n_groups=3, separate_critics=True,
                               net_arch=dict(pi=[8], vf=[16, 16]))  # fmt: skip
    assert isinstance(policy.value_net, SeparateCritics)
    for group in range(3):
        grads = _value_loss_grads(policy, group)
        critic = {name: grad for name, grad in grads.items() if name.startswith("value_net.")}
        assert len(critic) == 6  # weights and biases of 3 layers, stacked over the groups
        for name, grad in critic.items():
            assert grad is not None and grad[group].abs().sum() > 0, name
            others = [g for g in range(3) if g != group]
            assert th.all(grad[others] == 0), f"group {group}'s loss reached another critic through {name}"
        # nor the actor
        assert all(grad is None or th.all(grad == 0) for name, grad in grads.items() if not name.startswith("value_net."))


def test_shared_critic_has_one_output_per_group():
    env = GroupEnv()
    policy = MultiCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3, n_groups=3, net_arch=[16])
    assert policy.value_net.out_features == 3
    grads = _value_loss_grads(policy, 1)
    # group 1's loss trains its output row and the shared critic trunk, not the other rows
    assert th.all(grads["value_net.weight"][[0, 2]] == 0) and grads["value_net.weight"][1].abs().sum() > 0
    assert grads["mlp_extractor.value_net.0.weight"].abs().sum() > 0
    assert grads["action_net.weight"] is None or th.all(grads["action_net.weight"] == 0)
    # the optimizer holds the parameters the policy has
    assert {id(p) for group in policy.optimizer.param_groups for p in group["params"]} == {id(p) for p in policy.parameters()}


def test_separate_critics_match_an_mlp_per_group():
    critics = SeparateCritics(4, [8], n_groups=2, activation_fn=th.nn.ReLU, ortho_init=False)
    x = th.randn(5, 4)
    for g in range(2):
        w0, b0, w1, b1 = critics.weights[0][g], critics.biases[0][g], critics.weights[1][g], critics.biases[1][g]
        expected = th.relu(x @ w0 + b0) @ w1 + b1
        th.testing.assert_close(critics(x)[:, g], expected[:, 0])
    # orthogonal init: each group's hidden weights have orthonormal rows scaled by sqrt(2)
    critics = SeparateCritics(4, [8], n_groups=2)
    for weight in critics.weights[0]:
        th.testing.assert_close(weight @ weight.T, 2 * th.eye(4), atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("separate_critics", [False, True])
def test_heads_learn_their_own_groups_returns(separate_critics):
    # Episodes of 10 steps: group "task" pays 1 a step (its value counts the steps left), group "cost" pays -u**2 with
    # u ~ U(-1, 1) drawn anew each step (its value follows u): neither depends on the actions, so both value
    # functions are known in closed form
    gamma, horizon = 0.9, 10
    env = make_vec_env(lambda: GroupEnv(terminate_prob=0.0, horizon=horizon), n_envs=4, seed=0)
    model = XPPO("MlpPolicy", env, reward_groups=["task", "action", "cost"], n_steps=64, batch_size=64, n_epochs=10,
                 learning_rate=3e-3, gamma=gamma, policy_kwargs=dict(net_arch=[32], separate_critics=separate_critics),
                 seed=0, device="cpu")  # fmt: skip
    model.learn(4_000)
    t, u = np.meshgrid(np.arange(horizon), np.linspace(-1, 1, 11), indexing="ij")
    v_task = (1 - gamma ** (horizon - t)) / (1 - gamma)
    v_cost = -(u**2) - (v_task - 1) / 3  # E[-u**2] = -1/3 at every later step
    with th.no_grad():
        values = model.policy.predict_values(th.as_tensor(np.stack([t / 10, u], -1).reshape(-1, 2), dtype=th.float32))

    def r2(predicted: th.Tensor, target: np.ndarray) -> float:
        return 1 - float(((predicted.numpy() - target.ravel()) ** 2).mean() / target.var())

    task, cost = values[:, 0], values[:, 2]
    assert r2(task, v_task) > 0.95 and r2(cost, v_cost) > 0.6, (r2(task, v_task), r2(cost, v_cost))
    # each head learned its own group's value, not the other's
    assert r2(task, v_cost) < 0 and r2(cost, v_task) < 0


# --- logs ------------------------------------------------------------------------------------------------------------


def test_logs_value_loss_and_explained_variance_per_named_group():
    names = ["task", "action", "cost"]
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=names, n_epochs=1, n_steps=32, batch_size=32, device="cpu")
    model.learn(32)
    logged = model.logger.name_to_value
    for i, name in enumerate(names):
        assert np.isfinite(logged[f"train/value_loss/{name}"])
        values, returns = model.rollout_buffer.values[:, i], model.rollout_buffer.returns[:, i]
        assert logged[f"train/explained_variance/{name}"] == pytest.approx(explained_variance(values, returns))
    # one minibatch: the value loss is the sum of the groups' (each the MSE of its head)
    assert logged["train/value_loss"] == pytest.approx(sum(logged[f"train/value_loss/{name}"] for name in names), rel=1e-5)


# --- save / load -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy, make_env, policy_kwargs",
    [
        ("MlpPolicy", GroupEnv, dict(net_arch=[8], separate_critics=True)),
        ("MlpPolicy", GroupEnv, dict(net_arch=[8])),
        ("MultiInputPolicy", lambda: RewardGroups(_TermsInInfo(SimpleMultiObsEnv()), ["a", "b"]), dict(net_arch=[8])),
    ],
)
def test_save_load_round_trip(tmp_path, policy, make_env, policy_kwargs):
    env = make_env()
    groups = env.group_names if isinstance(env, RewardGroups) else ["task", "action", "cost"]
    model = XPPO(policy, env, reward_groups=groups, group_weights=[1.0] * len(groups), group_reduce="sum",
                 normalize_groups=False, n_steps=16, batch_size=8, n_epochs=1, policy_kwargs=policy_kwargs,
                 seed=0)  # fmt: skip
    model.learn(16)
    observations = [env.observation_space.sample() for _ in range(5)]
    actions = [model.predict(obs, deterministic=True)[0] for obs in observations]
    model.save(tmp_path / "model")

    loaded = XPPO.load(tmp_path / "model", env=env, device="cpu")
    assert params_equal(model.policy, loaded.policy)
    assert type(loaded.policy) is type(model.policy) and type(loaded.rollout_buffer) is type(model.rollout_buffer)
    for obs, action in zip(observations, actions):
        assert np.array_equal(loaded.predict(obs, deterministic=True)[0], action)
    for key in ("reward_groups", "group_weights", "group_reduce", "normalize_groups", "vector_reward_key"):
        assert getattr(loaded.options, key) == getattr(model.options, key), key
    assert loaded.policy.n_groups == len(groups)
    assert loaded.policy.separate_critics == policy_kwargs.get("separate_critics", False)
    loaded.learn(16)


def test_policy_and_buffer_variants_selected():
    model = XPPO("MultiInputPolicy", RewardGroups(_TermsInInfo(SimpleMultiObsEnv()), ["a", "b"]), reward_groups=2,
                 n_steps=16, batch_size=8)  # fmt: skip
    assert isinstance(model.policy, MultiCriticMultiInputPolicy) and isinstance(
        model.rollout_buffer, MultiCriticDictRolloutBuffer
    )
    model.learn(16)
    assert model.rollout_buffer.returns.shape == (16, 2)
    image_env = FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True)
    model = XPPO("CnnPolicy", image_env, reward_groups=2, n_steps=16, batch_size=8)
    assert isinstance(model.policy, MultiCriticCnnPolicy) and model.policy.value_net.out_features == 2
    assert sb3_xppo.MultiCriticPolicy is MultiCriticPolicy


# --- the RewardGroups wrapper ------------------------------------------------------------------------------------------


def test_reward_groups_wrapper_builds_the_vector():
    env = RewardGroups(GroupEnv(), {"task": "reward_task", "both": ["reward_task", "reward_action"]}, remainder="rest")
    assert env.group_names == ["task", "both", "rest"]
    env.reset(seed=0)
    for action in (0, 1, 1):
        _, reward, _, _, info = env.step(action)
        task, act = info["reward_task"], info["reward_action"]
        np.testing.assert_allclose(info["vector_reward"], [task, task + act, reward - task - (task + act)], rtol=1e-6)
    model = XPPO("MlpPolicy", env, reward_groups=env.group_names, **TINY)
    model.learn(32)
    assert "train/value_loss/rest" in model.logger.name_to_value


def test_reward_groups_wrapper_errors():
    with pytest.raises(ValueError, match=r"group 'x' needs info\['reward_missing'\]"):
        env = RewardGroups(GroupEnv(), {"x": "reward_missing"})
        env.reset(seed=0)
        env.step(0)
    with pytest.raises(ValueError, match="remainder='task' is already a group name"):
        RewardGroups(GroupEnv(), ["task"], remainder="task")
    with pytest.raises(TypeError, match="groups must be a list of info keys"):
        RewardGroups(GroupEnv(), "reward_task")
    with pytest.raises(ValueError, match="groups must name at least one group"):
        RewardGroups(GroupEnv(), [])


# --- bad input -------------------------------------------------------------------------------------------------------


class BadInfoEnv(GroupEnv):
    """GroupEnv whose info goes wrong at step ``bad_step``."""

    def __init__(self, fault: str, bad_step: int = 3) -> None:
        super().__init__(terminate_prob=0.0)
        self.fault, self.bad_step = fault, bad_step

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t == self.bad_step:
            if self.fault == "missing":
                del info["vector_reward"]
            elif self.fault == "length":
                info["vector_reward"] = info["vector_reward"][:2]
            elif self.fault == "nan":
                info["vector_reward"][1] = np.nan
            elif self.fault == "inf":
                info["vector_reward"][2] = -np.inf
            elif self.fault == "text":
                info["vector_reward"] = "1, 2, 3"
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize(
    "fault, match",
    [
        ("missing", r"env 1: info\['vector_reward'\] is missing"),
        ("length", r"env 1: info\['vector_reward'\] must hold 3 rewards.*shape \(2,\)"),
        ("nan", r"env 1: info\['vector_reward'\] has a non-finite reward"),
        ("inf", r"env 1: info\['vector_reward'\] has a non-finite reward"),
        ("text", r"env 1: info\['vector_reward'\] must be 3 numbers"),
    ],
)
def test_bad_reward_vector_raises_at_its_step(fault, match):
    env = DummyVecEnv([GroupEnv, lambda: BadInfoEnv(fault, bad_step=3)])
    model = XPPO("MlpPolicy", env, reward_groups=3, **TINY)
    with pytest.raises(ValueError, match=match):
        model.learn(64)
    assert model.num_timesteps == (3 - 1) * 2  # raised at the third step, not later


def test_custom_vector_reward_key():
    model = XPPO("MlpPolicy", GroupEnv(key="rewards"), reward_groups=3, vector_reward_key="rewards", **TINY)
    model.learn(32)
    with pytest.raises(ValueError, match=r"env 0: info\['vector_reward'\] is missing"):
        XPPO("MlpPolicy", GroupEnv(key="rewards"), reward_groups=3, **TINY).learn(32)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(reward_groups=3, group_weights=[1.0, 2.0]), r"group_weights must have one weight per reward group \(3\)"),
        (dict(reward_groups=2, group_weights=[1.0, -0.5]), "group_weights must be finite and >= 0"),
        (dict(reward_groups=2, group_weights=[0.0, 0.0]), "at least one > 0"),
        (dict(reward_groups=2, group_weights=[1.0, np.nan]), "group_weights must be finite"),
        (dict(reward_groups=2, group_weights=["a", "b"]), "group_weights must be 2 numbers"),
        (dict(reward_groups=2, group_reduce="median"), r"group_reduce must be one of \('mean', 'sum', 'max', 'min'\)"),
        (dict(reward_groups=0), "reward_groups must be None, an int >= 1"),
        (dict(reward_groups=["a", "a"]), "reward_groups names must be distinct"),
        (dict(reward_groups=[]), "reward_groups must be None, an int >= 1"),
        (dict(reward_groups="task"), "reward_groups must be None, an int >= 1"),
        (dict(group_weights=[1.0]), "group_weights needs reward_groups"),
        (dict(reward_groups=2, vector_reward_key=""), "vector_reward_key must be a non-empty string"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        XPPO("MlpPolicy", GroupEnv(), **kwargs)


def test_single_critic_policy_class_refused():
    from stable_baselines3.common.policies import ActorCriticPolicy

    class OwnPolicy(ActorCriticPolicy):
        pass

    with pytest.raises(ValueError, match="reward_groups needs a multi-critic policy"):
        XPPO(OwnPolicy, GroupEnv(), reward_groups=3)
    with pytest.raises(ValueError, match="n_groups must be an int >= 1"):
        MultiCriticPolicy(GroupEnv.observation_space, GroupEnv.action_space, lambda _: 1e-3, n_groups=0)


# --- MO-Gymnasium ----------------------------------------------------------------------------------------------------


def test_mo_lunar_lander_smoke():
    mo_gymnasium = pytest.importorskip("mo_gymnasium")
    from mo_gymnasium.wrappers import LinearReward

    weights = np.array([1.0, 1.0, 0.3, 0.03], dtype=np.float32)
    env = make_vec_env(lambda: LinearReward(mo_gymnasium.make("mo-lunar-lander-v3"), weight=weights), n_envs=2, seed=0)
    names = ["outcome", "shaping", "main_engine", "side_engine"]
    model = XPPO("MlpPolicy", env, reward_groups=names, group_weights=weights, n_steps=64, batch_size=64, n_epochs=1,
                 policy_kwargs=dict(net_arch=[16], separate_critics=True), seed=0, device="cpu")  # fmt: skip
    model.learn(128)
    assert model.rollout_buffer.returns.shape == (128, 4)
    assert all(np.isfinite(model.logger.name_to_value[f"train/value_loss/{name}"]) for name in names)


@pytest.mark.skipif(not th.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("separate_critics", [False, True])
def test_cuda_multi_critic(separate_critics):
    env = make_vec_env(lambda: TimeLimit(GroupEnv(), max_episode_steps=5), n_envs=2, seed=0)
    model = XPPO("MlpPolicy", env, reward_groups=3, n_steps=32, batch_size=16, device="cuda",
                 policy_kwargs=dict(separate_critics=separate_critics))  # fmt: skip
    model.learn(128)
    assert model.policy.device.type == "cuda"
    assert np.isfinite(model.logger.name_to_value["train/loss"])
