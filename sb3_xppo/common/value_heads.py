"""
The classification value head (Farebrother et al. 2024, Stop Regressing: Training Value Functions via Classification
for Scalable Deep RL, https://arxiv.org/abs/2403.03950): each critic output is a categorical distribution over a
fixed support, trained by cross-entropy against HL-Gauss targets, and read out as its expectation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch as th
from torch import nn

from sb3_xppo.functional.value_losses import hl_gauss_value, hl_gauss_value_loss_fn


@dataclass(frozen=True)
class HLGaussConfig:
    """
    The support and target spread of a classification critic, ``policy_kwargs=dict(hl_gauss=dict(...))``.

    The support is in the units the critic regresses: normalized returns with ``normalize_values=True`` (where the
    default ``[-10, 10]`` covers every return within ten running standard deviations of the mean), reward-normalized
    returns under ``VecNormalize(norm_reward=True)``, else the environment's own returns, where it must be given.

    :param n_bins: number of bins ``K``
    :param v_min: the support's lower end (targets below it are clamped to it)
    :param v_max: the support's upper end
    :param sigma_ratio: the HL-Gauss standard deviation in bin widths (the paper's 0.75)
    """

    n_bins: int = 101
    v_min: float = -10.0
    v_max: float = 10.0
    sigma_ratio: float = 0.75

    def __post_init__(self) -> None:
        if not isinstance(self.n_bins, int) or isinstance(self.n_bins, bool) or self.n_bins < 2:
            raise ValueError(f"hl_gauss n_bins must be an int >= 2, got {self.n_bins!r}")
        if not self.v_max > self.v_min:
            raise ValueError(f"hl_gauss needs v_min < v_max, got v_min={self.v_min!r}, v_max={self.v_max!r}")
        if not self.sigma_ratio > 0:
            raise ValueError(f"hl_gauss sigma_ratio must be > 0, got {self.sigma_ratio!r}")

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any] | None) -> HLGaussConfig:
        """
        :param kwargs: None or a dict of this class's fields (an unknown name is a ``ValueError`` naming the fields)
        """
        kwargs = dict(kwargs or {})
        unknown = sorted(set(kwargs) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown hl_gauss option(s) {unknown}; the options are {sorted(cls.__dataclass_fields__)}")
        return cls(**kwargs)

    def to_kwargs(self) -> dict[str, Any]:
        return asdict(self)


class HLGaussValueHead(nn.Module):
    """
    A categorical value head: ``logits_net`` gives ``K`` logits per critic output and :meth:`forward` returns their
    expectation over the bin centers, so that GAE, logging and everything else read scalar values as from a linear
    head. In training mode (the update pass) it keeps the last forward pass's logits for :meth:`loss`.

    :param logits_net: maps ``(batch, latent)`` critic features to ``(batch, G * K)`` or ``(batch, G, K)`` logits
    :param n_outputs: the number of critic outputs ``G`` (one per reward group)
    :param config: the support and the target spread
    """

    def __init__(self, logits_net: nn.Module, n_outputs: int, config: HLGaussConfig) -> None:
        super().__init__()
        self.logits_net = logits_net
        self.n_outputs = n_outputs
        self.config = config
        self._last_logits: th.Tensor | None = None

    def logits(self, latent_vf: th.Tensor) -> th.Tensor:
        """
        :param latent_vf: ``(batch, latent)`` critic features
        :return: ``(batch, G, K)`` logits
        """
        return self.logits_net(latent_vf).reshape(len(latent_vf), self.n_outputs, self.config.n_bins)

    def forward(self, latent_vf: th.Tensor) -> th.Tensor:
        """
        :param latent_vf: ``(batch, latent)`` critic features
        :return: ``(batch, G)`` values, the expectations of the critics' distributions
        """
        logits = self.logits(latent_vf)
        self._last_logits = logits if self.training else None
        return hl_gauss_value(logits, self.config.v_min, self.config.v_max)

    def loss(self, returns: th.Tensor, old_values: th.Tensor | None = None, clip: float | None = None) -> th.Tensor:
        """
        The cross-entropy of the last training-mode forward pass against the HL-Gauss encoding of ``returns``
        (:func:`~sb3_xppo.functional.hl_gauss_value_loss_fn`; clipping in scalar space). Consumes those logits: the
        head holds no graph afterwards.

        :param returns: ``(batch,)`` or ``(batch, G)`` targets, in the support's units
        :param old_values: the values at collection, same shape (needed with ``clip``)
        :param clip: clip range of ``returns - old_values`` (None: no clipping)
        :return: ``(batch, G)`` per-sample losses
        """
        logits, self._last_logits = self._last_logits, None
        if logits is None:
            raise RuntimeError("HLGaussValueHead.loss needs a forward pass in training mode first")
        shape = (len(logits), self.n_outputs)
        old = None if old_values is None else old_values.reshape(shape)
        return hl_gauss_value_loss_fn(
            logits,
            returns.reshape(shape),
            self.config.v_min,
            self.config.v_max,
            self.config.sigma_ratio,
            old_values=old,
            clip=clip,
            reduction="none",
        )

    def __getstate__(self) -> dict[str, Any]:
        # A graph is runtime state: never copied nor pickled
        state = self.__dict__.copy()
        state["_last_logits"] = None
        return state
