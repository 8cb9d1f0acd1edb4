"""The other libraries' private state the package writes, checked against those libraries as installed: SB3's Monitor and
gymnasium's TimeLimit (``sb3_xppo/vec_env/lean.py``, ``EnvStack``) and torch's Adam (``sb3_xppo/core/fast_paths.py``,
``FlatAdam``). Each test fails naming the attribute whose meaning changed, rather than letting a number drift."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker
from stable_baselines3.common.monitor import Monitor

from sb3_xppo.core.fast_paths import ADAM_OPTIONS, ADAM_STATE_KEYS
from sb3_xppo.resume.envs import VEC_ENV_STATE
from sb3_xppo.vec_env.lean import (
    ENV_CHECKER_STATE,
    MONITOR_STATE,
    ORDER_ENFORCING_STATE,
    TIME_LIMIT_STATE,
    EnvStack,
    gymnasium_time_limit,
)

MAX_STEPS = 30


def stack() -> Monitor:
    """CartPole as ``make_vec_env`` wraps it: Monitor over the registered stack, its time limit short."""
    env = Monitor(gym.make("CartPole-v1", max_episode_steps=MAX_STEPS))
    env.reset(seed=0)
    env.action_space.seed(0)
    return env


def wrappers(env: gym.Env) -> dict[str, gym.Env]:
    """The stack's wrappers by the name of the class whose state the package keeps (rl-zoo3, once imported, makes
    every TimeLimit its PatchedTimeLimit subclass)."""
    kinds = {"Monitor": Monitor, "TimeLimit": gymnasium_time_limit(), "OrderEnforcing": OrderEnforcing}
    kinds["PassiveEnvChecker"] = PassiveEnvChecker
    found = {}
    while isinstance(env, gym.Wrapper):
        found[next((name for name, kind in kinds.items() if isinstance(env, kind)), type(env).__name__)] = env
        env = env.env
    return found


DECLARED = [
    *[("Monitor", name) for name in MONITOR_STATE],
    *[("TimeLimit", name) for name in TIME_LIMIT_STATE],
    *[("OrderEnforcing", name) for name in ORDER_ENFORCING_STATE],
    *[("PassiveEnvChecker", name) for name in ENV_CHECKER_STATE],
]


@pytest.mark.parametrize("wrapper, name", DECLARED, ids=[f"{w}.{n}" for w, n in DECLARED])
def test_declared_attributes_exist(wrapper, name) -> None:
    env = stack()
    assert hasattr(wrappers(env)[wrapper], name), f"{wrapper}.{name}, which sb3_xppo/vec_env/lean.py uses, is gone"


def test_the_wrapper_classes_are_the_ones_skipped() -> None:
    assert (gymnasium_time_limit().__module__, gymnasium_time_limit().__name__) == ("gymnasium.wrappers.common", "TimeLimit")
    assert set(wrappers(stack())) == {"Monitor", "TimeLimit", "OrderEnforcing", "PassiveEnvChecker"}


def comparable(env: gym.Env) -> dict[str, object]:
    """Every wrapper's own attributes, the clock's left out (``t_start``, ``episode_times``: their count kept)."""
    state = {}
    for name, wrapper in wrappers(env).items():
        for key, value in vars(wrapper).items():
            if key in ("env", "t_start"):
                continue
            if key == "episode_times":
                value = len(value)
            state[f"{name}.{key}"] = value
    return state


def same(x: object, y: object) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.array_equal(x, y)
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(same(u, v) for u, v in zip(x, y, strict=True))
    return bool(x == y)


def first_difference(a: dict[str, object], b: dict[str, object]) -> str | None:
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            return f"{key} (set by one side only)"
        x, y = a[key], b[key]
        if not same(x, y):
            return f"{key}: {x!r} by the wrappers' own step, {y!r} by EnvStack"
    return None


def test_envstack_leaves_every_wrapper_as_its_own_step_does() -> None:
    """A step by the wrappers and one by ``EnvStack`` leave every attribute of every wrapper the same; an attribute that
    Monitor or TimeLimit start to write (or to write differently) is named."""
    own, lean = stack(), stack()
    envstack = EnvStack(lean)
    actions = [own.action_space.sample() for _ in range(200)]
    for step, action in enumerate(actions):
        a, b = own.step(action), envstack.step(action)
        assert a[1:4] == b[1:4], f"step {step}"
        difference = first_difference(comparable(own), comparable(lean))
        assert difference is None, f"step {step}: {difference}"
        if a[2] or a[3]:
            own.reset(seed=step)
            lean.reset(seed=step)
    assert envstack.ready and len(own.get_episode_rewards()) >= 200 // MAX_STEPS  # the skipping path, truncations


def test_difference_check_can_fail() -> None:
    """Negative control: a Monitor attribute EnvStack did not keep is named."""
    own, lean = stack(), stack()
    own.step(0)
    EnvStack(lean).step(0)
    lean.total_steps += 1
    assert first_difference(comparable(own), comparable(lean)).startswith("Monitor.total_steps")


def test_adam_state_is_what_flat_adam_writes() -> None:
    p = th.nn.Parameter(th.zeros(3))
    optimizer = th.optim.Adam([p])
    p.grad = th.ones(3)
    optimizer.step()
    state = optimizer.state[p]
    assert set(state) == ADAM_STATE_KEYS, (
        f"torch's Adam state is now {sorted(state)}: FlatAdam writes {sorted(ADAM_STATE_KEYS)}"
    )
    assert isinstance(state["step"], th.Tensor) and state["step"].ndim == 0, "Adam's state['step'] is no longer a 0-d tensor"
    for key in ("exp_avg", "exp_avg_sq"):
        assert state[key].shape == p.shape, f"Adam's state[{key!r}] is no longer one tensor per parameter"


def test_adam_options_are_known_to_flat_adam() -> None:
    group = th.optim.Adam([th.nn.Parameter(th.zeros(1))]).param_groups[0]
    unknown = sorted(set(group) - ADAM_OPTIONS)
    assert not unknown, f"torch's Adam has options FlatAdam does not know: {unknown} (it steps aside for them)"


def test_the_vec_env_state_a_checkpoint_keeps_is_sb3s() -> None:
    """``sb3_xppo/resume/envs.py``: the seeds and options a VecEnv's next ``reset()`` passes on, set by ``seed()``."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)
    venv.seed(7)
    venv.set_options({"a": 1})
    assert [getattr(venv, name) for name in VEC_ENV_STATE] == [[7, 8], [{"a": 1}, {"a": 1}]]
    venv.reset()
    assert [getattr(venv, name) for name in VEC_ENV_STATE] == [[None, None], [{}, {}]]


def test_the_callback_counters_a_checkpoint_keeps_are_sb3s_and_rl_zoo3s(tmp_path) -> None:
    """``sb3_xppo/resume/callbacks.py``: the counters of SB3's and rl-zoo3's callbacks, set by their constructor or setup."""
    from rl_zoo3.callbacks import RawStatisticsCallback
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import (
        CallbackList,
        EvalCallback,
        EveryNTimesteps,
        StopTrainingOnMaxEpisodes,
        StopTrainingOnNoModelImprovement,
    )
    from stable_baselines3.common.logger import configure

    from sb3_xppo.resume.callbacks import COUNTERS

    patience = StopTrainingOnNoModelImprovement(max_no_improvement_evals=1)
    built = [
        EveryNTimesteps(n_steps=4, callback=CallbackList([])),
        StopTrainingOnMaxEpisodes(max_episodes=100),
        patience,
        RawStatisticsCallback(),
    ]
    by_path = {f"{type(callback).__module__}.{type(callback).__qualname__}": callback for callback in built}
    assert set(by_path) == set(COUNTERS)
    evaluation = EvalCallback(gym.make("CartPole-v1"), eval_freq=8, n_eval_episodes=1, callback_after_eval=patience)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, device="cpu")
    model.set_logger(configure(str(tmp_path), ["tensorboard"]))  # (RawStatisticsCallback asks for a TensorBoard output)
    model.learn(16, callback=[*built[:2], built[3], evaluation])
    missing = [(path, name) for path, names in COUNTERS.items() for name in names if name not in vars(by_path[path])]
    assert not missing, f"SB3's or rl-zoo3's callbacks no longer have the counters a checkpoint keeps: {missing}"
