"""
XPPO's keywords are declared once (``sb3_xppo.common.options.XPPO_OPTIONS``): the three constructors' signatures,
docstrings and class attributes agree with the declaration, so that they cannot drift; and ``fast_paths``, declared
there, is checked, stored, saved, read by rl-zoo3 configs and defaulted for checkpoints saved before it existed.
"""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rl_zoo3.exp_manager import ExperimentManager
from sb3_contrib import MaskablePPO, RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.save_util import load_from_zip_file

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO, zoo
from sb3_xppo.common.options import XPPO_OPTIONS, check_xppo_options, declare_xppo_options, param_field

DATA = Path(__file__).parent / "data"
ALGORITHMS = [XPPO, MaskableXPPO, RecurrentXPPO]
PARENTS = {XPPO: PPO, MaskableXPPO: MaskablePPO, RecurrentXPPO: RecurrentPPO}
POLICIES = {XPPO: "MlpPolicy", MaskableXPPO: "MlpPolicy", RecurrentXPPO: "MlpLstmPolicy"}
#: the PPO keywords whose default or type XPPO changes on purpose ('minibatch' is True's meaning; the (low, high) pair)
XPPO_READS_DIFFERENTLY = {"normalize_advantage", "clip_range"}


def parameters_of(algo: type) -> dict[str, inspect.Parameter]:
    return dict(list(inspect.signature(algo.__init__).parameters.items())[1:])  # (after self)


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_signature_declares_every_option_as_declared(algo: type) -> None:
    parameters = parameters_of(algo)
    names = list(parameters)
    start = names.index(next(iter(XPPO_OPTIONS)))
    # all of them, in the declaration's order, together, right before _init_setup_model
    assert names[start : start + len(XPPO_OPTIONS) + 1] == [*XPPO_OPTIONS, "_init_setup_model"]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if algo is XPPO else inspect.Parameter.KEYWORD_ONLY
    for name, option in XPPO_OPTIONS.items():
        parameter = parameters[name]
        assert (parameter.default, type(parameter.default)) == (option.default, type(option.default)), name
        assert parameter.annotation == option.annotation, name
        assert parameter.kind == kind, name


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_the_rest_of_the_signature_is_the_parents(algo: type) -> None:
    parameters = parameters_of(algo)
    rest = [name for name in parameters if name not in XPPO_OPTIONS]
    if algo is XPPO:
        # every PPO keyword, in PPO's order, with PPO's default
        ppo = parameters_of(PPO)
        assert rest == list(ppo)
        for name in set(rest) - XPPO_READS_DIFFERENTLY:
            assert parameters[name].default == ppo[name].default, name
    else:
        # the parent's keywords pass through *args / **kwargs (options.parent_keywords); the recurrent algorithms add
        # sequence_batching (sb3_xppo.common.sequences)
        own = ["sequence_batching"] if algo is RecurrentXPPO else []
        assert rest == ["policy", "env", "args", "_init_setup_model", *own, "kwargs"]
        assert not set(XPPO_OPTIONS) & set(parameters_of(PARENTS[algo]))


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_docstring_documents_every_keyword_once_options_in_the_declared_text(algo: type) -> None:
    doc = algo.__doc__
    assert doc is not None
    for name in parameters_of(algo):
        assert len(re.findall(rf"^:param {name}:", doc, re.MULTILINE)) == 1, name
    text = one_line(doc)
    for name, option in XPPO_OPTIONS.items():
        assert f":param {name}: {one_line(option.doc).rstrip('.')}" in text, name


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_class_attributes_are_the_declared_defaults(algo: type) -> None:
    for name, option in XPPO_OPTIONS.items():
        assert getattr(algo, name) == option.default, name


def test_check_returns_every_option_and_refuses_other_keywords() -> None:
    options = check_xppo_options(clip_range=0.2, clip_range_vf=None, normalize_advantage=True)
    assert options == {
        "normalize_advantage": "minibatch",
        **{name: option.default for name, option in XPPO_OPTIONS.items()},
    }
    with pytest.raises(TypeError, match="fast_path"):
        check_xppo_options(clip_range=0.2, clip_range_vf=None, normalize_advantage=True, fast_path=False)


def test_declaring_notes_for_an_unknown_option_fails() -> None:
    with pytest.raises(ValueError, match="fast_path"):
        declare_xppo_options(notes={"fast_path": "no such option"})


def test_param_field_wraps_outside_inline_literals() -> None:
    field = param_field("x", "a b ``c d e`` f", width=12)
    assert field.splitlines() == [":param x: a", "    b", "    ``c d e``", "    f"]


def make(algo: type, **kwargs: Any) -> Any:
    return algo(POLICIES[algo], "CartPole-v1", n_steps=16, batch_size=16, n_epochs=1, device="cpu", seed=0, **kwargs)


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_fast_paths_is_stored_and_saved(algo: type, tmp_path: Path) -> None:
    assert make(algo).fast_paths is True
    model = make(algo, fast_paths=np.False_)
    assert model.fast_paths is False
    model.save(tmp_path / "model.zip")
    assert algo.load(tmp_path / "model.zip", device="cpu").fast_paths is False
    assert algo.load(tmp_path / "model.zip", device="cpu", fast_paths=True).fast_paths is True


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("value", [1, 0, "False", None])
def test_fast_paths_must_be_a_bool(algo: type, value: Any) -> None:
    # raised before the environment is made (the id does not exist)
    with pytest.raises(TypeError, match="fast_paths must be True or False"):
        algo(POLICIES[algo], "NoSuchEnv-v0", fast_paths=value)


@pytest.mark.parametrize("name", ["xppo_v0_clip_pair.zip", "xppo_v0_multi_critic.zip"])
def test_a_checkpoint_saved_before_fast_paths_loads_with_fast_paths(name: str) -> None:
    data, _, _ = load_from_zip_file(DATA / name, device="cpu")
    assert data is not None and "fast_paths" not in data
    assert XPPO.load(DATA / name, device="cpu").fast_paths is True


def test_a_model_without_the_attribute_reads_the_class_default() -> None:
    model = make(XPPO, fast_paths=False)
    del model.fast_paths
    assert model.fast_paths is True


def test_fast_paths_is_an_rl_zoo3_config_key(tmp_path: Path) -> None:
    zoo.register()
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"CartPole-v1": {"policy": "MlpPolicy", "n_timesteps": 100, "fast_paths": False}}))
    manager = ExperimentManager(
        argparse.Namespace(), "xppo", "CartPole-v1", str(tmp_path / "logs"), config=str(config), device="cpu"
    )
    model, _ = manager.setup_experiment()
    assert type(model) is XPPO and model.fast_paths is False
    model.env.close()
