"""RecurrentXPPO: sb3-contrib's RecurrentPPO (LSTM policies) with XPPO's losses and loss hook."""

from typing import ClassVar

from sb3_contrib import RecurrentPPO
from stable_baselines3.common.policies import BasePolicy

from sb3_xppo.common.policies import (
    RecurrentXPPOActorCriticCnnPolicy,
    RecurrentXPPOActorCriticPolicy,
    RecurrentXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.core.recurrent import RecurrentCoreMixin


class RecurrentXPPO(RecurrentCoreMixin, RecurrentPPO):
    """
    XPPO with LSTM policies: sb3-contrib's :class:`~sb3_contrib.RecurrentPPO` trained by XPPO's core, so XPPO's losses
    work under partial observability. Minibatches are sequences padded on the right; every mean is taken over the
    valid steps only (``x[mask].mean()``, as ``RecurrentPPO``), so that with PPO's options (``actor_loss='clip'``,
    ``value_loss=None``) it reproduces ``RecurrentPPO`` bit for bit.

    Multi-critic (``reward_groups``) is not available with recurrent policies yet: the LSTM policies have one value
    output.

    :param policy: The policy model to use (MlpLstmPolicy, CnnLstmPolicy, MultiInputLstmPolicy)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param args: the parent's further arguments, positionally (``learning_rate``, ``n_steps``, ...)
    :param options: its options, :class:`~sb3_xppo.RecurrentXPPOOptions`; each is also a plain keyword, which wins
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    :param kwargs: every keyword of :class:`~sb3_contrib.RecurrentPPO`, in its meaning and with its defaults
        (``clip_range`` also takes a ``(low, high)`` pair, ``normalize_advantage`` also ``'rollout'``)
    """

    # sb3-contrib's LSTM policies with XPPO's options (the same networks with the defaults)
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpLstmPolicy": RecurrentXPPOActorCriticPolicy,
        "CnnLstmPolicy": RecurrentXPPOActorCriticCnnPolicy,
        "MultiInputLstmPolicy": RecurrentXPPOMultiInputActorCriticPolicy,
    }
