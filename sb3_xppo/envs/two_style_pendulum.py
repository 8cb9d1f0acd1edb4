"""
TwoStylePendulum: Pendulum-v1 with two conflicting styles of 100x different scale, one per episode, the test bed of
multi-critic groups with disjoint support (Mysore et al. 2022, Multi-Critic Actor Learning: one critic per style,
each sample belonging to one style).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.pendulum import PendulumEnv, angle_normalize

#: The styles, in the order of the reward vector (pass them as XPPO's ``reward_groups``)
STYLE_NAMES = ("swing_up", "hang_down")
#: The scale of style 1's reward against style 0's
HANG_DOWN_SCALE = 0.01


class TwoStylePendulum(PendulumEnv):
    """
    Gymnasium's Pendulum-v1 whose episodes each have one of two styles, drawn at reset (each with probability 1/2)
    and shown to the agent as a fourth observation entry:

    - style 0, ``swing_up``: Pendulum-v1's own reward, ``-(theta**2 + 0.1 * theta_dot**2 + 0.001 * u**2)`` (upright
      is ``theta = 0``), between about -16.3 and 0 per step;
    - style 1, ``hang_down``: the opposite goal, hang still at the bottom, ``-0.01 * ((pi - |theta|)**2 +
      0.1 * theta_dot**2 + 0.001 * u**2)``: a reward 100x smaller.

    The scalar reward is the active style's. ``info["vector_reward"]`` holds one entry per style, 0 for the
    inactive one, and ``info["vector_reward_mask"]`` says which style is active (``[1, 0]`` or ``[0, 1]``), so that
    multi-critic XPPO (``reward_groups=STYLE_NAMES``) gives each style its own critic and takes each style's
    advantage statistics over its own samples only. ``info["style"]`` is the style's index.

    Observation: ``[cos(theta), sin(theta), theta_dot, style]``. Actions: Pendulum-v1's torque in ``[-2, 2]``.
    Registered as ``sb3_xppo/TwoStylePendulum-v0`` with Pendulum-v1's limit of 200 steps.

    :param render_mode: Pendulum-v1's render modes
    :param g: gravity, as Pendulum-v1
    :param style: None (default) draws the style of each episode; 0 or 1 fixes it (e.g. to train a single-style
        expert, or to evaluate one style). ``reset(options={"style": s})`` fixes it for one episode.
    """

    def __init__(self, render_mode: str | None = None, g: float = 10.0, style: int | None = None) -> None:
        super().__init__(render_mode=render_mode, g=g)
        self.fixed_style = check_style(style, "style")
        self.style = 0
        high = np.array([1.0, 1.0, self.max_speed, 1.0], dtype=np.float32)
        low = np.array([-1.0, -1.0, -self.max_speed, 0.0], dtype=np.float32)
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """
        Pendulum-v1's reset, then the episode's style.

        :param seed: seeds the state and the style, drawn from the same generator
        :param options: Pendulum-v1's, and ``"style"``: 0 or 1 fixes this episode's style
        :return: the observation and the info ``{"style": style}``
        """
        super().reset(seed=seed, options=options)
        style = check_style((options or {}).get("style", self.fixed_style), "options['style']")
        # Drawn after the state, from the same generator: one seed fixes both
        self.style = int(self.np_random.integers(2)) if style is None else style
        return self._get_obs(), {"style": self.style}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """
        :param action: the torque, shape ``(1,)``, clipped to ``[-2, 2]`` as in Pendulum-v1
        :return: observation, the active style's reward, terminated, truncated (Pendulum-v1's) and info
            (``vector_reward``, ``vector_reward_mask``, ``style``)
        """
        # Pendulum-v1's reward is a cost of the state before the step and of the clipped torque
        theta, theta_dot = self.state
        u = np.clip(action, -self.max_torque, self.max_torque)[0]
        # Pendulum-v1's own expression, term for term (its reward, bit for bit)
        swing_up = angle_normalize(theta) ** 2 + 0.1 * theta_dot**2 + 0.001 * (u**2)
        hang_down = (np.pi - abs(angle_normalize(theta))) ** 2 + 0.1 * theta_dot**2 + 0.001 * (u**2)
        rewards = np.array([-swing_up, -HANG_DOWN_SCALE * hang_down], dtype=np.float64)
        obs, _, terminated, truncated, _ = super().step(action)
        mask = np.arange(2) == self.style
        info = {
            "vector_reward": np.where(mask, rewards, 0.0).astype(np.float32),
            "vector_reward_mask": mask,
            "style": self.style,
        }
        return obs, float(rewards[self.style]), terminated, truncated, info

    def _get_obs(self) -> np.ndarray:
        return np.append(super()._get_obs(), np.float32(self.style))


def check_style(style: Any, name: str) -> int | None:
    """
    :param style: None, 0 or 1
    :param name: the argument's name, for the message
    :return: the style
    :raises ValueError: for anything else
    """
    if style is None or (isinstance(style, (int, np.integer)) and not isinstance(style, bool) and style in (0, 1)):
        return None if style is None else int(style)
    raise ValueError(f"{name} must be None (drawn per episode), 0 ({STYLE_NAMES[0]}) or 1 ({STYLE_NAMES[1]}), got {style!r}")


class FixedStyle(gym.Wrapper):
    """
    Fixes the style of every episode of a :class:`TwoStylePendulum` (beneath any other wrappers, e.g. a ``Monitor``):
    for an rl-zoo3 ``env_wrapper`` (``sb3_xppo.envs.two_style_pendulum.FixedStyle: {style: 1}``) that trains a
    single-style expert or evaluates one style.

    :param env: a :class:`TwoStylePendulum`, possibly wrapped
    :param style: 0 or 1
    """

    def __init__(self, env: gym.Env, style: int) -> None:
        super().__init__(env)
        fixed = check_style(style, "style")
        if fixed is None:
            raise ValueError("style must be 0 or 1 for FixedStyle, got None")
        if not isinstance(env.unwrapped, TwoStylePendulum):
            raise TypeError(f"FixedStyle wraps a TwoStylePendulum, got {type(env.unwrapped).__name__}")
        env.unwrapped.fixed_style = fixed
