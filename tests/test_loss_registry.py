"""The loss registry (sb3_xppo/common/loss_registry.py): a loss declared from this file alone trains, its own keyword
checked and passed; the declarations drive the checks and the losses of ``train()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch as th

from sb3_xppo import XPPO
from sb3_xppo.common.loss_registry import (
    ACTOR_LOSS_REGISTRY,
    VALUE_LOSS_REGISTRY,
    ActorLoss,
    LossKeyword,
    ValueLoss,
    register_actor_loss,
    register_value_loss,
)
from sb3_xppo.functional import ppo_actor_loss

SMALL = dict(n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")
PACKAGE = Path(__file__).parent.parent / "sb3_xppo"


def check_kl_coef(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"actor_loss_kwargs: kl_coef must be a number >= 0, got {value!r}")
    return float(value)


def kl_penalty_loss(
    action_log_probs: th.Tensor,
    old_action_log_probs: th.Tensor,
    advantages: th.Tensor,
    *,
    eps_clip: float | tuple[float, float],
    mask: th.Tensor | None = None,
    normalize_advantages: bool = False,
    delightful: bool = False,
    delight_temp: float = 1.0,
    log_ratio_clamp: Any = None,
    group_dim: int = -2,
    min_advantage_std: float | None = None,
    return_stats: bool = False,
    kl_coef: float = 0.1,
) -> th.Tensor:
    """PPO with a KL penalty instead of the clip (Schulman et al. 2017, section 4): ``-(r A) + beta KL`` with the
    k3 estimator ``r - 1 - log r`` of ``KL(old || new)``; elementwise, as XPPO calls it without ``min_advantage_std``."""
    log_ratio = action_log_probs - old_action_log_probs
    ratio = log_ratio.exp()
    CALLS.append(kl_coef)
    return -(ratio * advantages) + kl_coef * (ratio - 1 - log_ratio)


CALLS: list[float] = []


@pytest.fixture
def kl_penalty():
    """The toy loss, registered for one test."""
    CALLS.clear()
    loss = register_actor_loss(
        ActorLoss(
            "test_kl_penalty",
            kl_penalty_loss,
            "PPO's KL penalty (Schulman et al. 2017)",
            off_when_closed=False,
            keywords={"kl_coef": LossKeyword(0.1, "the penalty's weight beta, >= 0", check_kl_coef)},
        )
    )
    yield loss
    del ACTOR_LOSS_REGISTRY[loss.name]


def test_a_registered_loss_trains_with_its_own_keyword(kl_penalty, tmp_path) -> None:
    model = XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty", actor_loss_kwargs={"kl_coef": 0.5}, **SMALL)
    before = [p.detach().clone() for p in model.policy.action_net.parameters()]
    model.learn(64)
    assert CALLS and set(CALLS) == {0.5}  # every minibatch, with the given keyword
    assert any(not th.equal(b, p) for b, p in zip(before, model.policy.action_net.parameters(), strict=True))
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model", device="cpu")
    assert loaded.options.actor_loss == "test_kl_penalty" and loaded.options.actor_loss_kwargs == {"kl_coef": 0.5}
    CALLS.clear()
    XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty", **SMALL).learn(32)
    assert set(CALLS) == {0.1}  # the declared default


def test_a_registered_loss_s_keywords_are_checked(kl_penalty) -> None:
    with pytest.raises(ValueError, match="kl_coef must be a number >= 0, got -1"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty", actor_loss_kwargs={"kl_coef": -1})
    with pytest.raises(ValueError, match="takes no keyword 'beta' \\(its keywords: \\['kl_coef'\\]\\)"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty", actor_loss_kwargs={"beta": 1.0})
    with pytest.raises(ValueError, match="actor_loss='clip' takes no keyword 'kl_coef'"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss_kwargs={"kl_coef": 1.0})
    with pytest.raises(ValueError, match="actor_loss_kwargs must be None or a dict"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty", actor_loss_kwargs=[("kl_coef", 1.0)])
    with pytest.raises(ValueError, match="dual_clip cannot be combined with actor_loss='test_kl_penalty'"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty", dual_clip=3.0)
    with pytest.raises(ValueError, match="a loss named 'test_kl_penalty' is registered already"):
        register_actor_loss(kl_penalty)
    with pytest.raises(TypeError, match=r"register_actor_loss takes a declaration, ActorLoss\(name, \.\.\.\)"):
        register_actor_loss(kl_penalty_loss)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"register_value_loss takes a declaration, ValueLoss\(name, \.\.\.\)"):
        register_value_loss(kl_penalty)  # type: ignore[arg-type]


def test_an_unregistered_name_says_how_to_register() -> None:
    with pytest.raises(ValueError, match=r"actor_loss must be one of .*register_actor_loss"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="test_kl_penalty")


def test_a_registered_value_loss_trains() -> None:
    seen: list[tuple[int, ...]] = []

    def huber(clip: float | None, policy: Any, options: Any):
        def loss(values: th.Tensor, old: th.Tensor, returns: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
            seen.append(tuple(values.shape))
            return th.nn.functional.huber_loss(values, returns)

        return loss

    register_value_loss(ValueLoss("test_huber", huber, "a Huber value loss"))
    try:
        XPPO("MlpPolicy", "CartPole-v1", value_loss="test_huber", **SMALL).learn(32)
    finally:
        del VALUE_LOSS_REGISTRY["test_huber"]
    assert seen == [(16,)] * 4  # 2 epochs of 2 minibatches


def test_the_built_in_declarations() -> None:
    """What each built-in loss declares, which the checks and train() read (no string cases outside the registry)."""
    assert {name: loss.dual_clip for name, loss in ACTOR_LOSS_REGISTRY.items()} == {
        "clip": True,
        "spo": False,
        "asymmetric_spo": False,
        "hpo": False,
    }
    assert [name for name, loss in ACTOR_LOSS_REGISTRY.items() if not loss.off_when_closed] == ["clip"]
    assert {name: loss.min_advantage_std for name, loss in ACTOR_LOSS_REGISTRY.items()}["hpo"] == 1e-6
    assert ACTOR_LOSS_REGISTRY["clip"].function is ppo_actor_loss
    assert [name for name, loss in VALUE_LOSS_REGISTRY.items() if loss.clips] == ["sb3", "clipped", "improved"]
    # the options' checks and train() read the declarations: no comparison with a loss's name outside the registry
    comparisons = [
        f"{path.relative_to(PACKAGE)}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "loss_registry.py"
        for line in path.read_text().splitlines()
        if "actor_loss ==" in line or "actor_loss !=" in line
    ]
    assert not comparisons, comparisons
