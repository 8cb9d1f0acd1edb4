"""
:class:`ActionRecorder`: what rebuilds an env's state by replay (docs/guide/resume.md). A Box2D or MuJoCo world
cannot be pickled, but a gymnasium env is deterministic given the state of its ``np_random`` at its last reset, the
reset's seed and options, and the actions since. The recorder, a pass-through wrapper the package's env builders put
directly beneath SB3's ``Monitor`` (or above the wrappers over it, where there are some), records those;
:meth:`ActionRecorder.replay` resets the env beneath it from them and steps the actions again, checking each reward
and the observations bit for bit on the way.

Layer 1: imports nothing else of the package.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor


class ReplayMismatchError(ValueError):
    """An env did not replay to the state it was in at the checkpoint (a non-deterministic env, a changed version)."""


def copied(observation: Any) -> Any:
    """:return: a copy of an observation that the env's later steps cannot change (arrays copied, dicts and tuples walked)"""
    if isinstance(observation, np.ndarray):
        return observation.copy()
    if isinstance(observation, dict):
        return {key: copied(value) for key, value in observation.items()}
    if isinstance(observation, tuple):
        return tuple(copied(value) for value in observation)
    return deepcopy(observation)


def found_in_stack(env: Any, cls: type) -> Any:
    """:return: the first of ``env`` and the wrappers beneath it that is a ``cls``, or None"""
    while not isinstance(env, cls):
        if not isinstance(env, gym.Wrapper):
            return None
        env = env.env
    return env


def same_bits(a: Any, b: Any) -> bool:
    """:return: whether two observations are equal bit for bit (dtype, shape and bytes; -0.0 is not 0.0)"""
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and all(same_bits(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(map(same_bits, a, b))
    x, y = np.asarray(a), np.asarray(b)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


class ActionRecorder(gym.Wrapper):
    """
    A pass-through wrapper that records, for the episode under way, the reset's seed, options and the state of the
    env's ``np_random`` before it (where no seed reseeds it), the reset's observation, the actions since and the
    latest observation. The observations and rewards it passes on are the env's own; it consumes no random numbers
    (where the env has no ``np_random`` yet, reading it makes one from fresh entropy, as the env's reset would).

    The actions are kept as given, not copied (a copy per step costs a tenth of a lean CartPole step): SB3's rollout
    hands each step a new array. A caller that changes an action array in place after the step breaks the record,
    and the replay's check then names the env and step.

    :class:`~sb3_xppo.vec_env.LeanVecEnv` steps the env beneath it directly and calls :meth:`record_step` (the same
    record).

    At the top of a stack with another recorder beneath (the package's builders with a ``wrapper_class``), a reset
    that does not reset the env beneath that recorder (Atari's ``EpisodicLifeEnv`` after a lost life steps instead)
    does not start a new record: it joins the one under way, and the replay makes it again at the same step, so that
    the wrappers between go through the same calls.

    :param env: the env, as built (``gym.make``'s stack), beneath SB3's ``Monitor``; or the top of the stack, where
        wrappers sit above the ``Monitor``
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.reset_record: dict[str, Any] | None = None
        self.recorded_actions: list[np.ndarray] = []
        #: the resets since the record's that did not reset the env beneath: (actions before it, seed, options)
        self.inner_resets: list[tuple[int, int | None, dict[str, Any] | None]] = []
        self.reset_observation: Any = None
        self.last_observation: Any = None
        #: how many times this recorder's env was reset (what a recorder above reads)
        self.resets = 0

    def recorder_beneath(self) -> ActionRecorder | None:
        """:return: the next recorder down the stack (one beneath the ``Monitor``, where this one is at the top), or None"""
        return found_in_stack(self.env, ActionRecorder)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        beneath = self.recorder_beneath()
        resets_beneath = beneath.resets if beneath is not None else 0
        rng_state = None if seed is not None else self.env.unwrapped.np_random.bit_generator.state
        # options only where given, as SB3's DummyVecEnv passes them: many envs' reset() takes a seed and no options
        observation, info = self.env.reset(seed=seed, **({} if options is None else {"options": options}))
        self.resets += 1
        self.last_observation = observation
        if beneath is not None and beneath.resets == resets_beneath and self.reset_record is not None:
            self.inner_resets.append((len(self.recorded_actions), seed, deepcopy(options)))
            return observation, info
        self.reset_record = {"seed": seed, "options": options, "rng_state": rng_state}
        self.recorded_actions, self.inner_resets = [], []
        self.reset_observation = copied(observation)
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        self.recorded_actions.append(action)
        result = self.env.step(action)
        self.last_observation = result[0]
        return result

    def record_step(self, action: Any, observation: Any) -> None:
        """What :meth:`step` records, for a caller that stepped the env beneath (:class:`~sb3_xppo.vec_env.LeanVecEnv`)."""
        self.recorded_actions.append(action)
        self.last_observation = observation

    def replay_snapshot(self) -> dict[str, Any] | None:
        """
        :return: the record of the episode under way: ``reset`` (seed, options, ``rng_state``), ``actions`` (stacked,
            ``(steps, *action_shape)``), ``inner_resets`` (the resets since that did not reset the env beneath: the
            actions before each, its seed and options), ``reset_observation`` and ``last_observation``; None before
            the first reset (an env built afresh is in that state)
        """
        if self.reset_record is None:
            return None
        space = self.env.action_space
        actions = (
            np.stack(self.recorded_actions)
            if self.recorded_actions
            else np.empty((0, *(space.shape or ())), dtype=space.dtype or np.float64)
        )
        return {
            "reset": deepcopy(self.reset_record),
            "actions": actions,
            "inner_resets": [{"step": step, "seed": seed, "options": options} for step, seed, options in self.inner_resets],
            "reset_observation": copied(self.reset_observation),
            "last_observation": copied(self.last_observation),
        }

    def monitor_beneath(self) -> Monitor | None:
        """:return: the ``Monitor`` beneath the recorder (one at the top of the stack), or None"""
        return found_in_stack(self.env, Monitor)

    def restore_monitor(self, counters: dict[str, Any]) -> None:
        """
        Put the counters of the ``Monitor`` beneath back after a replay, which stepped it (a recorder at the top of
        the stack; one beneath the ``Monitor`` leaves them to its VecEnv's ``set_attr``).

        :param counters: attribute name -> value
        :raises ValueError: where there is no ``Monitor`` beneath
        """
        monitor = self.monitor_beneath()
        if monitor is None:
            raise ValueError("the ActionRecorder has no Monitor beneath it to restore")
        for name, value in counters.items():
            setattr(monitor, name, value)

    def replay(self, snapshot: dict[str, Any] | None, rewards: list[float] | None = None, env_index: int = 0) -> None:
        """
        Put the env beneath back where ``snapshot`` was taken: reset it as it was reset (its ``np_random`` set to the
        recorded state first), then step the recorded actions. Checked bit for bit: the reset's observation, each
        step's reward (against ``rewards``, the Monitor's rewards of the episode, where given and where no wrapper
        between the Monitor and the recorder may change them) and the last observation.

        :param snapshot: what :meth:`replay_snapshot` returned (None: nothing to do)
        :param rewards: the rewards of the episode under way, step by step (SB3's ``Monitor.rewards``), or None
        :param env_index: the env's index in its VecEnv, for the error
        :raises ReplayMismatchError: naming the env and the step where the replay first differs
        """
        if snapshot is None:
            return
        monitor = self.monitor_beneath()
        if monitor is not None and monitor is not self.env:
            rewards = None  # (a wrapper between them, e.g. a reward clip, may give the recorder other rewards)
        record, actions = snapshot["reset"], snapshot["actions"]
        if record["rng_state"] is not None:
            self.env.unwrapped.np_random.bit_generator.state = record["rng_state"]
        observation, _ = self.reset(seed=record["seed"], options=record["options"])

        def mismatch(step: int, what: str) -> ReplayMismatchError:
            return ReplayMismatchError(
                f"env {env_index} does not replay exactly: at step {step} of the {len(actions)} since its last reset, "
                f"{what} differs from the one it had when the checkpoint was written (a non-deterministic env, or a "
                "changed env version). Resume with exact=False to reset the envs afresh, as Stable-Baselines3 does."
            )

        if not same_bits(observation, snapshot["reset_observation"]):
            raise mismatch(0, "the reset's observation")
        inner_resets = list(snapshot.get("inner_resets", []))
        for step in range(len(actions) + 1):
            while inner_resets and inner_resets[0]["step"] == step:  # (made again after as many actions, in order)
                reset = inner_resets.pop(0)
                observation, _ = self.reset(seed=reset["seed"], options=reset["options"])
            if step == len(actions):
                break
            observation, reward, *_ = self.step(actions[step])
            if rewards is not None and step < len(rewards) and float(reward) != rewards[step]:
                raise mismatch(step + 1, f"the reward ({float(reward)!r}, was {rewards[step]!r})")
        if len(self.inner_resets) != len(snapshot.get("inner_resets", [])):
            raise mismatch(len(actions), "the resets that did not reset the env beneath")
        if not same_bits(observation, snapshot["last_observation"]):
            raise mismatch(len(actions), "the observation")
