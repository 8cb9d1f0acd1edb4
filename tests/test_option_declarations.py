"""
XPPO's options are one typed object declared once (``sb3_xppo.common.options.XPPOOptions``): the four algorithms share
one constructor, which takes the options as plain keywords or as ``options=XPPOOptions(...)``, checks them before
anything is built, keeps them as ``model.options``, and checks them again after ``load()`` (also checkpoints saved
before the options object, which kept each option as an attribute).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import pickle
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

from sb3_xppo import XPPO, MaskableRecurrentXPPO, MaskableXPPO, RecurrentXPPO, RecurrentXPPOOptions, XPPOOptions, zoo
from sb3_xppo.common import options as options_module
from sb3_xppo.common.option_docs import param_field
from sb3_xppo.core.setup import XPPOSetupMixin, parent_algorithm
from sb3_xppo.zoo import search_space

DATA = Path(__file__).parent / "data"
ALGORITHMS = [XPPO, MaskableXPPO, RecurrentXPPO, MaskableRecurrentXPPO]
PARENTS = {XPPO: PPO, MaskableXPPO: MaskablePPO, RecurrentXPPO: RecurrentPPO, MaskableRecurrentXPPO: RecurrentPPO}
POLICIES = {XPPO: "MlpPolicy", MaskableXPPO: "MlpPolicy", RecurrentXPPO: "MlpLstmPolicy"}


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_one_constructor_for_every_algorithm(algo: type) -> None:
    assert algo.__init__ is XPPOSetupMixin.__init__
    assert parent_algorithm(algo) is PARENTS[algo]
    parameters = list(inspect.signature(algo.__init__).parameters)
    assert parameters == ["self", "policy", "env", "args", "options", "_init_setup_model", "kwargs"]
    assert not set(algo.options_class.names()) & set(inspect.signature(PARENTS[algo].__init__).parameters)


def test_the_recurrent_options_are_the_options_with_their_own_fields() -> None:
    assert RecurrentXPPO.options_class is MaskableRecurrentXPPO.options_class is RecurrentXPPOOptions
    assert XPPO.options_class is MaskableXPPO.options_class is XPPOOptions
    assert RecurrentXPPOOptions.names()[: len(XPPOOptions.names())] == XPPOOptions.names()
    assert RecurrentXPPOOptions.names()[len(XPPOOptions.names()) :] == ("sequence_batching",)


@pytest.mark.parametrize("cls", [XPPOOptions, RecurrentXPPOOptions])
def test_docstring_documents_every_option_once_in_the_declared_text(cls: type[XPPOOptions]) -> None:
    doc = cls.__doc__
    assert doc is not None
    text = one_line(doc)
    for field in dataclasses.fields(cls):
        assert len(re.findall(rf"^:param {field.name}:", doc, re.MULTILINE)) == 1, field.name
        assert f":param {field.name}: {one_line(field.metadata['doc'])}" in text, field.name


def test_every_option_has_a_type_a_doc_and_a_check() -> None:
    for field in dataclasses.fields(XPPOOptions):
        assert field.type is not None and field.metadata["doc"] and callable(field.metadata["check"]), field.name


def test_checked_defaults_are_canonical() -> None:
    assert XPPOOptions().checked() == XPPOOptions(value_loss="mse")
    assert XPPOOptions().checked(clip_range_vf=0.2) == XPPOOptions(value_loss="sb3")
    options = XPPOOptions(reward_groups=2, group_weights=(1, 2), log_ratio_clamp=1).checked()
    assert (options.reward_groups, options.group_weights, options.log_ratio_clamp) == (["0", "1"], [1.0, 2.0], (-1.0, 1.0))


def make(algo: type, **kwargs: Any) -> Any:
    return algo(POLICIES[algo], "CartPole-v1", n_steps=16, batch_size=16, n_epochs=1, device="cpu", seed=0, **kwargs)


@pytest.mark.parametrize("algo", [XPPO, MaskableXPPO, RecurrentXPPO])
def test_plain_keywords_and_the_options_object_are_the_same(algo: type) -> None:
    by_keyword = make(algo, actor_loss="spo", delightful=True).options
    by_object = make(algo, options=XPPOOptions(actor_loss="spo", delightful=True)).options
    assert by_keyword == by_object and type(by_keyword) is type(by_object) is algo.options_class
    assert by_keyword.actor_loss == "spo" and by_keyword.delightful is True
    # a plain keyword overrides the object's field
    assert make(algo, options=XPPOOptions(actor_loss="spo"), actor_loss="hpo").options.actor_loss == "hpo"


def test_the_parents_arguments_pass_positionally_and_by_keyword() -> None:
    model = XPPO("MlpPolicy", "CartPole-v1", 1e-3, 32, batch_size=16, device="cpu", actor_loss="spo")
    assert (model.learning_rate, model.n_steps, model.batch_size, model.options.actor_loss) == (1e-3, 32, 16, "spo")
    with pytest.raises(TypeError, match="n_steps"):
        XPPO("MlpPolicy", "CartPole-v1", 1e-3, 32, n_steps=64)


def test_unknown_keywords_and_options_are_refused_before_anything_is_built() -> None:
    with pytest.raises(TypeError, match="'fast_path' \\(did you mean 'fast_paths'\\?\\)"):
        XPPO("MlpPolicy", "NoSuchEnv-v0", fast_path=False)
    with pytest.raises(TypeError, match="'learning_rat' \\(did you mean 'learning_rate'\\?\\)"):
        RecurrentXPPO("MlpLstmPolicy", "NoSuchEnv-v0", learning_rat=1e-3)
    with pytest.raises(TypeError, match="options must be an XPPOOptions"):
        XPPO("MlpPolicy", "NoSuchEnv-v0", options={"actor_loss": "spo"})
    with pytest.raises(ValueError, match="actor_loss must be one of"):
        XPPO("MlpPolicy", "NoSuchEnv-v0", options=XPPOOptions(actor_loss="spoo"))


def test_options_of_another_algorithm_are_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class WithSequences(RecurrentXPPOOptions):
        sequence_batching: bool = options_module.option(False, "a recurrent-only option", options_module.as_bool)

    assert WithSequences.from_keywords(XPPOOptions(actor_loss="spo"), {}).actor_loss == "spo"
    with pytest.raises(TypeError, match="XPPOOptions has no option 'sequence_batching'"):
        XPPOOptions.from_keywords(WithSequences(), {})


def test_param_field_wraps_outside_inline_literals() -> None:
    field = param_field("x", "a b ``c d e`` f", width=12)
    assert field.splitlines() == [":param x: a", "    b", "    ``c d e``", "    f"]


def test_the_zoo_search_space_takes_the_choices_from_the_options() -> None:
    assert search_space.ACTOR_LOSSES is options_module.ACTOR_LOSSES
    assert set(search_space.VALUE_LOSSES) <= set(options_module.VALUE_LOSSES)
    # the dual clip is drawn for the actor losses that take it only, the options' rule
    for actor_loss in options_module.ACTOR_LOSSES:
        converted = search_space._convert_xppo_choices({"actor_loss": actor_loss, "dual_clip": 3.0})
        assert (converted["dual_clip"] is not None) == (actor_loss in options_module.DUAL_CLIP_ACTOR_LOSSES)


@pytest.mark.parametrize("algo", [XPPO, MaskableXPPO, RecurrentXPPO])
def test_options_are_stored_saved_and_checked_again_after_load(algo: type, tmp_path: Path) -> None:
    assert make(algo).options.fast_paths is True
    model = make(algo, fast_paths=np.False_, actor_loss="spo")
    assert model.options.fast_paths is False
    model.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip", device="cpu")
    assert loaded.options == model.options and type(loaded.options) is algo.options_class
    # load()'s keywords override the saved options, and are checked
    assert algo.load(tmp_path / "model.zip", device="cpu", fast_paths=True).options.fast_paths is True
    assert "fast_paths" not in vars(algo.load(tmp_path / "model.zip", device="cpu", fast_paths=True))
    with pytest.raises(ValueError, match="dual_clip cannot be combined with actor_loss='spo'"):
        algo.load(tmp_path / "model.zip", device="cpu", dual_clip=2.0)
    with pytest.raises(TypeError, match="fast_paths must be True or False"):
        algo.load(tmp_path / "model.zip", device="cpu", fast_paths=1)
    assert pickle.loads(pickle.dumps(model)).options == model.options


@pytest.mark.parametrize("algo", [XPPO, MaskableXPPO, RecurrentXPPO])
@pytest.mark.parametrize("value", [1, 0, "False", None])
def test_fast_paths_must_be_a_bool(algo: type, value: Any) -> None:
    # raised before the environment is made (the id does not exist)
    with pytest.raises(TypeError, match="fast_paths must be True or False"):
        algo(POLICIES[algo], "NoSuchEnv-v0", fast_paths=value)


@pytest.mark.parametrize("name", ["xppo_v0_clip_pair.zip", "xppo_v0_multi_critic.zip"])
def test_a_checkpoint_saved_before_the_options_object_loads_its_options(name: str) -> None:
    data, _, _ = load_from_zip_file(DATA / name, device="cpu")
    assert data is not None and "options" not in data and "fast_paths" not in data
    model = XPPO.load(DATA / name, device="cpu")
    # each option saved as an attribute is the option's, checked; one saved before it existed takes its default
    for option in XPPOOptions.names():
        assert option not in vars(model), option
        if option in data and option != "group_weights":
            assert getattr(model.options, option) == data[option], option
    assert model.options.fast_paths is True


def test_a_ppo_checkpoint_loads_with_ppos_value_clipping(tmp_path: Path) -> None:
    PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, clip_range_vf=0.3, device="cpu").save(tmp_path / "ppo")
    model = XPPO.load(tmp_path / "ppo", device="cpu")
    assert model.options == XPPOOptions(value_loss="sb3") and model.normalize_advantage == "minibatch"


def test_tb_log_name_defaults_to_the_algorithms_name(tmp_path: Path) -> None:
    for algo in (XPPO, RecurrentXPPO):
        make(algo, tensorboard_log=str(tmp_path)).learn(16)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["RecurrentXPPO_1", "XPPO_1"]


def test_fast_paths_is_an_rl_zoo3_config_key(tmp_path: Path) -> None:
    zoo.register()
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"CartPole-v1": {"policy": "MlpPolicy", "n_timesteps": 100, "fast_paths": False}}))
    manager = ExperimentManager(
        argparse.Namespace(), "xppo", "CartPole-v1", str(tmp_path / "logs"), config=str(config), device="cpu"
    )
    model, _ = manager.setup_experiment()
    assert type(model) is XPPO and model.options.fast_paths is False
    model.env.close()


@pytest.mark.parametrize(
    "algo, parent",
    [(XPPO, PPO), (MaskableXPPO, MaskablePPO), (RecurrentXPPO, RecurrentPPO), (MaskableRecurrentXPPO, RecurrentPPO)],
)
def test_the_signature_shows_the_parents_keywords_then_the_options(algo: type, parent: type) -> None:
    """``help()`` and IDEs that run code see every keyword: the parent's, in its order with its defaults, then the options."""
    shown = inspect.signature(algo).parameters
    theirs = list(inspect.signature(parent.__init__).parameters.values())[1:]
    assert list(shown)[: len(theirs)] == [p.name for p in theirs]
    assert all(shown[p.name].default is p.default or shown[p.name].default == p.default for p in theirs)
    fields = dataclasses.fields(algo.options_class)
    assert list(shown)[len(theirs) :] == ["options", *(f.name for f in fields)]
    assert all(shown[f.name].default == f.default and shown[f.name].kind is inspect.Parameter.KEYWORD_ONLY for f in fields)
    inspect.signature(algo).bind("MlpPolicy", "CartPole-v1", 3e-4, actor_loss="spo")  # what a call may pass
