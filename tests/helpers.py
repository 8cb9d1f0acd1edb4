"""Helpers the test modules share (one copy each)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch as th
from gymnasium import spaces


def params_equal(a: th.nn.Module, b: th.nn.Module) -> bool:
    """Whether two modules' parameters and buffers are equal bit for bit."""
    return all(th.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


class ToDict(gym.Wrapper):
    """The observation as ``{"obs": obs}`` (a Dict space); the env's own methods (``action_masks()``) still reach it
    through ``get_wrapper_attr``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Dict({"obs": env.observation_space})

    def reset(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return {"obs": obs}, info

    def step(self, action: Any) -> tuple[dict[str, Any], Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return {"obs": obs}, reward, terminated, truncated, info
