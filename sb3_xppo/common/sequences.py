"""
Whole-sequence LSTM passes for the padded sequence minibatches of sb3-contrib's ``RecurrentPPO`` (the
``sequence_batching`` option of :class:`~sb3_xppo.RecurrentXPPO` and :class:`~sb3_xppo.MaskableRecurrentXPPO`).

sb3-contrib's ``RecurrentActorCriticPolicy._process_sequence`` runs the LSTM one step at a time whenever a minibatch
holds an episode start, which nearly every minibatch does: its sequences are cut at episode starts, so most of them
begin with one. Here the LSTM runs once over each stretch of time steps in which no sequence starts an episode after
the stretch's first step, the state of every sequence that starts one there reset to zero first: one call per
minibatch on the rollout buffer's sequences, whose episode starts are all at their first step (sb3-contrib PR #118,
"whole sequence batching", and issue #113 ask for this). The hidden states are those of the step-by-step loop; the
floating-point sums are not in the same order (the input projections of all steps in one product, the gradients
accumulated over time inside the LSTM's backward), so the results agree to float tolerance, not bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch as th
from torch import nn


def check_sequence_batching(sequence_batching: Any) -> bool:
    """
    :param sequence_batching: the constructor's ``sequence_batching``
    :return: it, as a bool
    :raises TypeError: for anything but True or False
    """
    if not isinstance(sequence_batching, (bool, np.bool_)):
        raise TypeError(f"sequence_batching must be True or False, got {sequence_batching!r}")
    return bool(sequence_batching)


def restart_columns(episode_starts: th.Tensor) -> list[int]:
    """
    The time steps at which the LSTM must start a new call: the first, and every later one where some sequence starts
    an episode.

    :param episode_starts: ``(length, n_seq)``, nonzero where an episode starts
    :return: the sorted time indices, 0 first
    """
    later = th.nonzero((episode_starts[1:] != 0).any(dim=1)).flatten() + 1
    return [0, *later.tolist()]


def lstm_over_sequences(
    features: th.Tensor,
    lstm_states: tuple[th.Tensor, th.Tensor],
    episode_starts: th.Tensor,
    lstm: nn.LSTM,
) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
    """
    ``RecurrentActorCriticPolicy._process_sequence`` (sb3-contrib) with whole-sequence LSTM calls: the same outputs
    to float tolerance, one ``lstm`` call per stretch between the time steps of :func:`restart_columns`, the states of
    the sequences that start an episode at a stretch's first step reset to zero.

    :param features: ``(n_seq * length, features_dim)``, sequence after sequence
    :param lstm_states: the hidden and cell states at each sequence's start, ``(n_layers, n_seq, hidden)`` each
    :param episode_starts: ``(n_seq * length,)``, 1 where an episode starts (the state is reset before that step)
    :param lstm: the LSTM
    :return: the LSTM's outputs ``(n_seq * length, hidden)`` and its states after the last step
    """
    n_seq = lstm_states[0].shape[1]
    # (n_seq * length, features_dim) -> (length, n_seq, features_dim), as sb3-contrib
    features_sequence = features.reshape((n_seq, -1, lstm.input_size)).swapaxes(0, 1)
    starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)  # (length, n_seq)
    columns = restart_columns(starts)
    hidden, cell = lstm_states
    outputs = []
    for begin, end in zip(columns, [*columns[1:], starts.shape[0]], strict=True):
        # Reset the states of the sequences that start an episode here (sb3-contrib's product)
        keep = (1.0 - starts[begin]).view(1, n_seq, 1)
        output, (hidden, cell) = lstm(features_sequence[begin:end], (keep * hidden, keep * cell))
        outputs.append(output)
    lstm_output = outputs[0] if len(outputs) == 1 else th.cat(outputs)
    # (length, n_seq, hidden) -> (n_seq * length, hidden)
    return th.flatten(lstm_output.transpose(0, 1), start_dim=0, end_dim=1), (hidden, cell)


class SequenceBatchingMixin:
    """
    Whole-sequence LSTM passes (:func:`lstm_over_sequences`) for sb3-contrib's LSTM policies, inside
    :meth:`whole_sequences` blocks only: put it first, ``class RecurrentXPPOActorCriticPolicy(SequenceBatchingMixin,
    XPPOPolicyMixin, RecurrentActorCriticPolicy)``. Outside such a block the policy is its parent, bit for bit.
    """

    #: run the LSTMs over whole sequences; set only inside :meth:`whole_sequences`
    batch_sequences: bool = False

    @contextmanager
    def whole_sequences(self, batch_sequences: bool = True) -> Iterator[None]:
        """
        Within the block, the policy runs its LSTMs over whole sequences (``evaluate_actions`` and every other call
        that reads a sequence). XPPO's ``train()`` uses it with ``sequence_batching=True``; the rollout stays step by
        step.

        :param batch_sequences: False leaves the step-by-step loop on (a no-op block)
        """
        previous = self.batch_sequences
        self.batch_sequences = batch_sequences
        try:
            yield
        finally:
            self.batch_sequences = previous

    def _process_sequence(
        self,
        features: th.Tensor,
        lstm_states: tuple[th.Tensor, th.Tensor],
        episode_starts: th.Tensor,
        lstm: nn.LSTM,
    ) -> tuple[th.Tensor, th.Tensor]:
        # sb3-contrib's is a staticmethod, called as self._process_sequence(...): this one reads the block's switch
        if self.batch_sequences:
            return lstm_over_sequences(features, lstm_states, episode_starts, lstm)  # type: ignore[return-value]
        return super()._process_sequence(features, lstm_states, episode_starts, lstm)  # type: ignore[misc]
