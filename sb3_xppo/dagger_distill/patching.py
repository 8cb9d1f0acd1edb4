"""
:class:`StudentPatch`: how :class:`~sb3_xppo.DaggerCallback` steers a stock SB3 student (PPO, A2C, TRPO, MaskablePPO,
RecurrentPPO, SAC, TD3, ...), which offers no action hook, during one ``learn()``. It is the package's one place that
sets attributes on a model or policy it does not own; students of the XPPO family need none of it (their
``register_action_hook`` and ``register_loss_hook``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.utils import obs_as_tensor

from sb3_xppo.core import ActionHook

_MISSING = object()


class StudentPatch:
    """
    Steers a stock SB3 student as XPPO's action hooks steer XPPO's: at every rollout step ``hook(model, obs, actions,
    action_masks)`` may replace the actions the policy chose, and the stored log-probabilities stay the policy's own of
    the executed actions. It does so with instance attributes on the model and its policy, under one lifecycle:

    - :meth:`attach` (at training start) sets them all: guards on the model's ``collect_rollouts`` and ``train`` (and
      an on-policy model's ``dump_logs``); the step's action choice calling ``hook``: the policy's ``forward``
      (on-policy) or the model's ``_sample_action`` (off-policy); ``_excluded_save_params`` leaving every one of them
      out of ``model.save()`` (a ``CheckpointCallback`` saving during ``learn()``).
    - :meth:`detach` removes them all, exactly: each attribute that an instance attribute shadowed gets it back, the
      others are deleted, so ``vars(model)`` and ``vars(model.policy)`` are as before :meth:`attach`. It runs at
      training end, when an exception leaves a guarded call (``KeyboardInterrupt`` in ``env.step``, an error in a
      callback or in ``train()``), when a guarded ``collect_rollouts`` is not run with ``callback`` (a later
      ``learn()`` without it: the model's own method then runs), and first thing in :meth:`attach`.

    Both are idempotent. The only exit no guard sees is an exception raised by ``learn()`` between guarded calls
    (another callback's ``on_training_start``): the attributes stay until the model's next ``collect_rollouts`` or
    the callback's next :meth:`attach`; meanwhile ``hook`` decides whether to act (it returns None outside the rollouts
    of the ``learn()`` it serves).

    :param model: the student, an SB3 algorithm
    :param callback: the callback whose ``learn()`` the patch serves
    :param hook: ``hook(model, obs, actions, action_masks) -> actions or None``, the contract of
        :meth:`~sb3_xppo.core.XPPORolloutMixin.register_action_hook`; an off-policy student's actions are the
        replay buffer's (a Box's scaled to [-1, 1], as its squashing policy outputs them)
    """

    def __init__(self, model: Any, callback: BaseCallback, hook: ActionHook) -> None:
        self.model = model
        self.callback = callback
        self.hook = hook
        # (owner, name, the instance attribute it shadowed or _MISSING), in the order they were set
        self._applied: list[tuple[Any, str, Any]] = []
        self._attached = False
        self._depth = 0  # guarded calls in progress

    @property
    def busy(self) -> bool:
        """Whether a guarded call is in progress (the ``learn()`` this patch serves is running)."""
        return self._depth > 0

    def attach(self) -> None:
        """Set every attribute (see the class docstring), after :meth:`detach`."""
        self.detach()
        self._attached = True
        model = self.model
        try:
            self._guard("collect_rollouts")
            self._guard("train")
            off_policy = isinstance(model, OffPolicyAlgorithm)
            if not off_policy and hasattr(model, "dump_logs"):
                self._guard("dump_logs")
            if off_policy:
                self._set(model, "_sample_action", self._steered_sampling(model._sample_action))
            else:
                self._set(model.policy, "forward", self._steered_forward(model.policy.forward))
            self._exclude_from_save()
        except BaseException:
            self.detach()
            raise

    def detach(self) -> None:
        """Remove every attribute :meth:`attach` set, newest first (idempotent)."""
        self._attached = False
        while self._applied:
            owner, name, previous = self._applied.pop()
            if previous is _MISSING:
                vars(owner).pop(name, None)
            else:
                vars(owner)[name] = previous

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self._applied.append((owner, name, vars(owner).get(name, _MISSING)))
        vars(owner)[name] = value

    def _guard(self, name: str) -> None:
        """``model.<name>``, detaching when an exception leaves it or when the call is not the served learn()'s."""
        original = getattr(self.model, name)
        signature = inspect.signature(original)  # follows __wrapped__: another guard has the method's

        @functools.wraps(original)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if not self._attached or (name == "collect_rollouts" and not self._serves(signature, args, kwargs)):
                self.detach()
                return original(*args, **kwargs)
            self._depth += 1
            try:
                return original(*args, **kwargs)
            except BaseException:
                self.detach()
                raise
            finally:
                self._depth -= 1

        self._set(self.model, name, guarded)

    def _serves(self, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether a ``collect_rollouts`` call is run with the callback this patch serves."""
        try:
            callback = signature.bind(*args, **kwargs).arguments.get("callback")
        except TypeError:
            return False
        return _holds(callback, self.callback)

    def _steered_forward(self, forward: Any) -> Any:
        """
        The policy's ``forward`` with ``hook`` applied: PPO's ``(obs, deterministic) -> (actions, values, log_prob)``,
        MaskablePPO's with ``action_masks``, RecurrentPPO's ``(obs, lstm_states, episode_starts, deterministic) ->
        (..., lstm_states)``. The values and the new LSTM states are the policy's (the LSTM reads observations only).
        """
        model, policy, hook = self.model, self.model.policy, self.hook
        signature = inspect.signature(forward)

        def steered_forward(obs: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
            out = forward(obs, *args, **kwargs)
            arguments = signature.bind(obs, *args, **kwargs).arguments
            masks = arguments.get("action_masks")
            with th.no_grad():
                actions = hook(model, obs, out[0], masks)
                if actions is None:
                    return out
                # The policy's own log-probabilities of the executed actions, under the same LSTM state or masks
                if "lstm_states" in arguments:
                    distribution, _ = policy.get_distribution(obs, arguments["lstm_states"].pi, arguments["episode_starts"])
                elif masks is not None:
                    distribution = policy.get_distribution(obs, action_masks=masks)
                else:
                    distribution = policy.get_distribution(obs)
                return (actions, out[1], distribution.log_prob(actions), *out[3:])

        return steered_forward

    def _steered_sampling(self, sample_action: Any) -> Any:
        """The off-policy model's ``_sample_action -> (action, buffer_action)`` with ``hook`` applied."""
        model, hook = self.model, self.hook

        def steered_sample_action(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
            action, buffer_action = sample_action(*args, **kwargs)
            with th.no_grad():
                obs = obs_as_tensor(model._last_obs, model.device)
                replaced = hook(model, obs, th.as_tensor(buffer_action, device=model.device), None)
            if replaced is None:
                return action, buffer_action
            buffer_action = replaced.cpu().numpy().reshape(buffer_action.shape).astype(buffer_action.dtype, copy=False)
            # The env receives a Box's actions in its bounds, the replay buffer stores them scaled to [-1, 1]
            action = (
                model.policy.unscale_action(buffer_action) if isinstance(model.action_space, spaces.Box) else buffer_action
            )
            return action, buffer_action

        return steered_sample_action

    def _exclude_from_save(self) -> None:
        """``model.save()`` stores the model's ``__dict__``: the attributes set on the model are left out of it."""
        model = self.model
        original = model._excluded_save_params

        def excluded_save_params() -> list[str]:
            return [*original(), *sorted({name for owner, name, _ in self._applied if owner is model})]

        self._set(model, "_excluded_save_params", excluded_save_params)


def _holds(callback: Any, target: BaseCallback) -> bool:
    """Whether ``callback`` (as learn() holds it: a CallbackList, an event callback, ...) is or contains ``target``."""
    if callback is target:
        return True
    if isinstance(callback, CallbackList):
        return any(_holds(child, target) for child in callback.callbacks)
    child = getattr(callback, "callback", None)  # EventCallback (EveryNTimesteps, ...)
    return isinstance(child, BaseCallback) and _holds(child, target)
