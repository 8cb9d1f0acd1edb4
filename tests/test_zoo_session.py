"""
``sb3_xppo.zoo.zoo_session``: everything the commands change in rl-zoo3, SB3, sb3-contrib and ``sys`` is changed
while the block runs and put back when it ends, also after an exception.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import pytest
import rl_zoo3
import rl_zoo3.enjoy
import rl_zoo3.exp_manager
import rl_zoo3.hyperparams_opt
import rl_zoo3.train
import rl_zoo3.utils
import stable_baselines3.common.callbacks as sb3_callbacks
from rl_zoo3.exp_manager import ExperimentManager
from sb3_contrib import MaskablePPO

from sb3_xppo import MaskableRecurrentXPPO, zoo
from sb3_xppo.vec_env import LeanVecEnv
from sb3_xppo.zoo.session import Patches

NAMES = ("xppo", "xppo_mask", "xppo_lstm", "xppo_mask_lstm")


def state() -> dict[str, Any]:
    """Every object a session may change, as it is now (tables copied)."""
    tables = {
        f"{module.__name__}.{table}": dict(getattr(module, table))
        for module in (rl_zoo3, rl_zoo3.utils, rl_zoo3.train, rl_zoo3.exp_manager, rl_zoo3.enjoy, rl_zoo3.hyperparams_opt)
        for table in ("ALGOS", "HYPERPARAMS_SAMPLER", "HYPERPARAMS_CONVERTER")
        if hasattr(module, table)
    }
    return dict(
        tables,
        argv=(id(sys.argv), list(sys.argv)),
        evaluate_policy=sb3_callbacks.evaluate_policy,
        enjoy_create_test_env=rl_zoo3.enjoy.create_test_env,
        utils_create_test_env=rl_zoo3.utils.create_test_env,
        maskable_predict=vars(MaskablePPO).get("predict"),
        recurrent_maskable_predict=vars(MaskableRecurrentXPPO).get("predict", "inherited"),
        **{name: vars(ExperimentManager).get(name) for name in ("default_vec_env_cls", "_preprocess_hyperparams")},
        hyperparameters_optimization=vars(ExperimentManager)["hyperparameters_optimization"],
    )


@pytest.fixture
def unregistered(monkeypatch: pytest.MonkeyPatch) -> None:
    """rl-zoo3's tables without the package's algorithms, as in a fresh process (another test may have registered them)."""
    for module in (rl_zoo3.hyperparams_opt, rl_zoo3.exp_manager):
        for table in (module.HYPERPARAMS_SAMPLER, module.HYPERPARAMS_CONVERTER):
            for name in NAMES:
                if name in table:
                    monkeypatch.delitem(table, name)
    for name in NAMES:
        if name in rl_zoo3.ALGOS:
            monkeypatch.delitem(rl_zoo3.ALGOS, name)


@pytest.mark.usefixtures("unregistered")
@pytest.mark.parametrize("raises", [False, True], ids=["returns", "raises"])
def test_a_session_changes_everything_and_leaves_nothing_behind(raises: bool) -> None:
    before = state()
    expected = pytest.raises(RuntimeError, match="inside") if raises else contextlib.nullcontext()
    with expected, zoo.zoo_session(["--env", "CartPole-v1"]):
        inside = state()
        assert sys.argv[1:] == ["--env", "CartPole-v1", "--vec-env", "dummy"]
        assert set(NAMES) <= set(rl_zoo3.ALGOS) and set(NAMES) <= set(rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER)
        assert ExperimentManager.default_vec_env_cls is LeanVecEnv
        changed = {key for key in before if inside[key] != before[key]}
        # every object the session may change is changed (the tables once each: they are the same dicts)
        assert changed >= {"argv", "evaluate_policy", "enjoy_create_test_env", "utils_create_test_env"}
        assert changed >= {"maskable_predict", "recurrent_maskable_predict", "default_vec_env_cls"}
        assert changed >= {"_preprocess_hyperparams", "hyperparameters_optimization", "rl_zoo3.ALGOS"}
        if raises:
            raise RuntimeError("inside the session")
    assert state() == before
    assert not set(NAMES) & set(rl_zoo3.ALGOS)


def test_an_enjoy_session_leaves_training_alone() -> None:
    before = state()
    with zoo.zoo_session(["--env", "CartPole-v1"], training=False):
        inside = state()
        assert sys.argv[1:] == ["--env", "CartPole-v1"]
        for key in ("default_vec_env_cls", "_preprocess_hyperparams", "hyperparameters_optimization"):
            assert inside[key] == before[key]
    assert state() == before
    with pytest.raises(ValueError, match="training"), zoo.zoo_session([], training=False, vec_env="lean"):
        pass


def test_bad_options_change_nothing() -> None:
    before = state()
    with (
        pytest.raises(ValueError, match="options of --vec-env ray"),
        zoo.zoo_session([], vec_env="lean", ray_options={"a": 1}),
    ):
        pass
    with pytest.raises(ValueError, match="not a VecEnv"), zoo.zoo_session([], vec_env="nope"):
        pass
    assert state() == before


def test_a_class_someone_else_set_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    class Mine(LeanVecEnv):
        pass

    monkeypatch.setattr(ExperimentManager, "default_vec_env_cls", Mine)
    with zoo.zoo_session([], vec_env="envpool"):
        assert ExperimentManager.default_vec_env_cls is Mine
    assert ExperimentManager.default_vec_env_cls is Mine


def test_patches_put_back_own_and_inherited_attributes_and_table_entries() -> None:
    class Base:
        x = 1

    class Child(Base):
        y = 2

    table = {"a": 1}
    patches = Patches()
    patches.set(Child, "x", 10)  # inherited: put back by removing Child's own
    patches.set(Child, "y", 20)  # own: put back
    patches.update(table, {"a": 2, "b": 3})
    patches.update(table, {"b": 4})
    assert (Child.x, Child.y, table) == (10, 20, {"a": 2, "b": 4})
    patches.restore()
    assert (Child.x, Child.y, table) == (1, 2, {"a": 1}) and "x" not in vars(Child)
    patches.restore()  # nothing left to undo
    assert table == {"a": 1}
