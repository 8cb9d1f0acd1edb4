"""
What a maskable or recurrent policy reads besides the observation (:class:`PolicyInput`: the action masks, the LSTM
state it saw and where episodes start), which policies read it, and the layout of the LSTM state.
"""

from __future__ import annotations

from typing import Any

import torch as th
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

from sb3_xppo.common.policies import ActionMaskingMixin
from sb3_xppo.dagger_distill.pytree import Tree


class PolicyInput(dict):
    """
    What a policy reads besides the observation, for the states of a maskable or recurrent student: a dict (a pytree,
    so the aggregated dataset stores and indexes it as any other state) whose entries all have the batch first:

    - ``obs``: the observation (a tensor or a dict of tensors);
    - ``action_masks``: ``(b, mask size)`` bool, MaskablePPO's masks (:func:`.mask_size` entries per state);
    - ``lstm_states``: ``(hidden, cell)`` of the actor's LSTM, each ``(b, n_lstm_layers, lstm_hidden_size)``: the
      state the policy saw *before* acting on ``obs``;
    - ``episode_starts``: ``(b)`` float, 1 where ``obs`` starts an episode (the LSTM state is then reset to 0 first).

    Its type tells it apart from a Dict observation: :class:`.PolicyAdapter` reads the entries its policy uses and
    ignores the others (a feed-forward teacher reads ``obs`` alone).
    """


def obs_of(states: Tree) -> Tree:
    """
    :param states: a batch of observations or a :class:`PolicyInput`
    :return: the observations
    """
    return states["obs"] if isinstance(states, PolicyInput) else states


def is_recurrent(policy: Any) -> bool:
    """Whether ``policy`` is sb3-contrib's LSTM policy (RecurrentPPO, RecurrentXPPO, MaskableRecurrentXPPO)."""
    return isinstance(policy, RecurrentActorCriticPolicy)


def is_maskable(policy: Any) -> bool:
    """Whether ``policy`` takes action masks (MaskablePPO, MaskableXPPO, MaskableRecurrentXPPO)."""
    return isinstance(policy, (MaskableActorCriticPolicy, ActionMaskingMixin))


def initial_lstm_states(policy: RecurrentActorCriticPolicy, n: int, device: th.device | str) -> tuple[th.Tensor, th.Tensor]:
    """
    The actor's LSTM state at the start (zeros), batch first as :class:`PolicyInput` holds it.

    :param policy: the recurrent policy
    :param n: batch size (number of envs)
    :param device: device of the tensors
    :return: ``(hidden, cell)``, each ``(n, n_lstm_layers, lstm_hidden_size)``
    """
    layers, _, size = policy.lstm_hidden_state_shape
    return th.zeros(n, layers, size, device=device), th.zeros(n, layers, size, device=device)


def batch_first_lstm_states(states: tuple[th.Tensor, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
    """
    SB3's ``(n_lstm_layers, b, size)`` LSTM states as :class:`PolicyInput` holds them, ``(b, n_lstm_layers, size)``,
    and back (the same transpose).

    :param states: ``(hidden, cell)``
    :return: ``(hidden, cell)`` with the first two dims swapped
    """
    hidden, cell = states
    return hidden.transpose(0, 1).contiguous(), cell.transpose(0, 1).contiguous()
