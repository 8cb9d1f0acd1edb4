"""
What XPPO's algorithms over sb3-contrib's ``RecurrentPPO`` share (:class:`~sb3_xppo.RecurrentXPPO`,
:class:`~sb3_xppo.MaskableRecurrentXPPO`): their options (:class:`~sb3_xppo.common.options.RecurrentXPPOOptions`),
the rollout buffer of padded sequences, how a minibatch's actions are evaluated (the LSTM run over each sequence from
the state stored at its start) and which samples count (not the padding), and, with ``sequence_batching``, the
whole-sequence LSTM passes of ``train()`` (:mod:`sb3_xppo.common.sequences`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.buffers import RecurrentDictRolloutBuffer, RecurrentRolloutBuffer

from sb3_xppo.common.buffers import XPPORecurrentDictRolloutBuffer, XPPORecurrentRolloutBuffer
from sb3_xppo.common.options import RecurrentXPPOOptions, XPPOOptions
from sb3_xppo.common.sequences import SequenceBatchingMixin
from sb3_xppo.core.algorithm import XPPOCoreMixin
from sb3_xppo.core.rollout import PolicyCalls, RecurrentPolicyCalls


class RecurrentCoreMixin(XPPOCoreMixin):
    """
    XPPO's core on sb3-contrib's ``RecurrentPPO``: put it first in the bases, ``class RecurrentXPPO(RecurrentCoreMixin,
    RecurrentPPO)``. Minibatches are sequences padded on the right; every mean is over the valid steps only
    (``x[mask].mean()``, as ``RecurrentPPO``).
    """

    options_class: ClassVar[type[XPPOOptions]] = RecurrentXPPOOptions
    policy_calls_class: ClassVar[type[PolicyCalls]] = RecurrentPolicyCalls
    #: the rollout buffers of padded sequences for (Box, Dict) observations: ``RecurrentPPO`` builds its own buffer
    #: in ``_setup_model``, which this one's replaces (the same data, XPPO's GAE)
    sequence_buffer_classes: ClassVar[tuple[type[RecurrentRolloutBuffer], type[RecurrentDictRolloutBuffer]]] = (
        XPPORecurrentRolloutBuffer,
        XPPORecurrentDictRolloutBuffer,
    )
    options: RecurrentXPPOOptions
    n_steps: int
    n_envs: int
    gamma: float
    gae_lambda: float

    def _setup_model(self) -> None:
        super()._setup_model()
        if self.options.sequence_batching and not isinstance(self.policy, SequenceBatchingMixin):
            raise ValueError(
                "sequence_batching=True needs an LSTM policy that runs whole sequences (a subclass of "
                f"sb3_xppo.common.sequences.SequenceBatchingMixin, as 'MlpLstmPolicy', ...), got "
                f"{type(self.policy).__name__}"
            )
        buffer = self.rollout_buffer
        box, dict_obs = self.sequence_buffer_classes
        buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self.rollout_buffer = buffer_class(
            self.n_steps,
            self.observation_space,
            self.action_space,
            buffer.hidden_state_shape,
            self.device,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            n_envs=self.n_envs,
        )

    def _evaluate_actions(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        # RecurrentPPO's: the LSTM runs over each padded sequence from the state stored at its start
        with self._sequence_passes():
            return self.policy.evaluate_actions(
                rollout_data.observations, actions, rollout_data.lstm_states, rollout_data.episode_starts
            )

    def _sequence_passes(self) -> AbstractContextManager[None]:
        """The block of a minibatch's policy calls: whole-sequence LSTM passes with ``sequence_batching``."""
        return self.policy.whole_sequences() if self.options.sequence_batching else nullcontext()

    def _valid_samples(self, rollout_data: Any) -> th.Tensor:
        # The padding that makes sequences of equal length does not count (RecurrentPPO's mask)
        return rollout_data.mask > 1e-8
