"""DistillOptions: DAgger's options declared once, checked once, shared by DaggerDistiller, DaggerCallback and the command."""

import dataclasses
import inspect
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from stable_baselines3 import PPO
from stable_baselines3.common.type_aliases import Schedule
from torch import nn
from torch.distributions import Normal

from sb3_xppo.dagger_distill import DaggerCallback, DaggerDistiller, DistillOptions, kl_loss, nll_loss
from sb3_xppo.dagger_distill import options as options_module
from sb3_xppo.dagger_distill.options import (
    CALLBACK,
    COMMAND,
    DISTILLER,
    KEYWORDS_CLASSES,
    keywords_region,
    reader_signature,
    rewrite_keywords_region,
)
from sb3_xppo.distill import TeacherEnv, command_options, main, parse_args


def small_ppo(**kwargs):
    return PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, device="cpu", policy_kwargs=dict(net_arch=[8]), **kwargs)


def gaussian(states):
    return Normal(states, 1.0)


# ---------------------------------------------------------------------------------------------------------------------
# Declared once
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls, reader", [(DaggerDistiller, DISTILLER), (DaggerCallback, CALLBACK)])
def test_constructor_signatures_list_the_options_they_read(cls, reader):
    parameters = inspect.signature(cls).parameters
    declared = {f.name: f for f in dataclasses.fields(DistillOptions)}
    read = DistillOptions.read_by(reader)
    assert set(read) <= set(parameters) and "keywords" not in parameters
    for name in read:
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default is declared[name].default
    # the options the class does not read are not among its parameters
    assert not (set(declared) - set(read)) & set(parameters)


def test_signature_check_can_fail():
    """Negative control: a constructor that declares an option itself has it twice."""

    def init(self, teacher, *, weight=1.0, **keywords):
        pass

    with pytest.raises(ValueError, match="duplicate parameter name"):
        reader_signature(init, CALLBACK)


def test_every_option_has_a_reader_a_doc_and_a_check():
    for f in dataclasses.fields(DistillOptions):
        assert f.metadata["readers"] and set(f.metadata["readers"]) <= {DISTILLER, CALLBACK, COMMAND}
        assert f.metadata["doc"] and callable(f.metadata["check"])
        assert (f.metadata["flag"] is not None) == (COMMAND in f.metadata["readers"]), f.name
        assert f":param {f.name}:" in DistillOptions.__doc__


OPTIONS_MODULE = Path(options_module.__file__)
REPO = Path(__file__).parent.parent
MYPY = shutil.which("mypy")


def test_generated_keywords_are_current():
    text = OPTIONS_MODULE.read_text()
    assert rewrite_keywords_region(text) == text, "regenerate with python tests/test_dagger_options.py"
    for reader, (name, extra) in KEYWORDS_CLASSES.items():
        keywords = getattr(options_module, name).__annotations__
        assert list(keywords) == [*DistillOptions.read_by(reader), *extra]


def test_stale_keywords_are_found():
    """Negative control: an option missing from the generated keywords is found."""
    text = OPTIONS_MODULE.read_text().replace("    gradient_surgery: bool\n", "", 1)
    assert rewrite_keywords_region(text) != text and keywords_region() not in text


@pytest.mark.slow
@pytest.mark.skipif(MYPY is None, reason="mypy is not installed (the tests extra)")
def test_mypy_sees_the_option_keywords():
    """mypy rejects an option of another class, a wrong type and an unknown keyword, and accepts the good calls."""
    path = REPO / "tests" / "typing" / "check_distill_keywords.py"
    out = subprocess.run(
        [MYPY, "--config-file", str(REPO / "pyproject.toml"), str(path)], cwd=REPO, capture_output=True, text=True
    ).stdout
    assert 'Unexpected keyword argument "weight" for "DaggerDistiller"' in out, out
    assert 'Argument "batch_size" to "DaggerCallback" has incompatible type "str"; expected "int | None"' in out, out
    assert 'Unexpected keyword argument "not_an_option" for "DaggerCallback"' in out, out
    assert "Found 3 errors in 1 file" in out, out  # the good calls pass


def test_options_are_frozen_and_typed():
    options = DistillOptions(loss_fn=kl_loss, beta=0.25)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.beta = 0.5
    assert DistillOptions.__annotations__["beta"] == "float | Schedule"
    assert Schedule  # the annotation's name is importable where it is declared


# ---------------------------------------------------------------------------------------------------------------------
# Keywords and the object
# ---------------------------------------------------------------------------------------------------------------------


def test_plain_keywords_and_the_object_give_the_same_distiller():
    by_keywords = DaggerDistiller(gaussian, gaussian, loss_fn=kl_loss, entropy_weight=0.1, batch_size=8, buffer_size=32)
    by_object = DaggerDistiller(
        gaussian, gaussian, options=DistillOptions(loss_fn=kl_loss, entropy_weight=0.1, batch_size=8, buffer_size=32)
    )
    assert by_keywords.options == by_object.options
    for distiller in (by_keywords, by_object):
        assert distiller.loss_fn is kl_loss and distiller.entropy_weight == 0.1
        assert distiller.batch_size == 8 and distiller.dataset.capacity == 32


def test_a_keyword_overrides_the_object_and_the_object_is_kept_when_none_does():
    options = DistillOptions(loss_fn=kl_loss, beta=0.5)
    assert DaggerDistiller(gaussian, gaussian, options=options).options is options
    overridden = DaggerDistiller(gaussian, gaussian, options=options, beta=0.0).options
    assert overridden.beta == 0.0 and overridden.loss_fn is kl_loss and options.beta == 0.5


def test_defaults_per_reader():
    distiller = DaggerDistiller(gaussian, gaussian)
    assert distiller.options == DistillOptions() and distiller.loss_fn is nll_loss
    assert distiller.batch_size == 64 and distiller.dataset.capacity == 100_000
    assert DaggerDistiller(gaussian, gaussian, max_dataset_size=10).dataset.capacity == 10  # the old name
    assert DaggerCallback(gaussian).dataset.capacity == 50_000


def test_one_object_serves_the_callback_and_the_distiller_it_builds():
    """The callback hands its own object to its distiller: no keyword copied, no check run again."""
    layer = "mlp_extractor.policy_net.0"
    options = DistillOptions(loss_fn=kl_loss, weight=0.5, entropy_weight=0.01, student_layer=layer, teacher_layer=layer)
    teacher = small_ppo(seed=1)
    callback = DaggerCallback(teacher.policy, options=options)
    student = small_ppo(seed=0)
    callback.init_callback(student)
    assert callback.options is options and callback.distiller is not None and callback.distiller.options is options
    assert callback.distiller.loss_fn is kl_loss and callback.distiller.entropy_weight == 0.01
    assert callback.distiller.student_layer is student.policy.mlp_extractor.policy_net[0]
    assert callback.distiller.teacher_layer is teacher.policy.mlp_extractor.policy_net[0]


def test_each_check_runs_once(monkeypatch):
    calls = []

    def counted(student_layer, teacher_layer):
        calls.append((student_layer, teacher_layer))

    monkeypatch.setattr(options_module, "check_layers", counted)
    layer = "mlp_extractor.policy_net.0"
    callback = DaggerCallback(small_ppo(seed=1).policy, student_layer=layer, teacher_layer=layer)
    callback.init_callback(small_ppo(seed=0))
    assert calls == [(layer, layer)]
    # Negative control: an object made anew (as a keyword overriding the callback's makes one) checks again
    dataclasses.replace(callback.options, entropy_weight=0.5)
    assert len(calls) == 2


# ---------------------------------------------------------------------------------------------------------------------
# Refusals, each naming the option
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "keywords, error, message",
    [
        (dict(loss_fn="kl"), TypeError, "loss_fn must be a callable"),
        (dict(teacher_sample=1), ValueError, "teacher_sample must be True or False"),
        (dict(entropy_weight=math.inf), ValueError, "entropy_weight must be a number"),
        (dict(student_layer=3, teacher_layer="a"), TypeError, "student_layer must be a submodule name"),
        (dict(student_layer="a"), ValueError, "needs both student_layer and teacher_layer"),
        (dict(rep_align_weight=-1.0), ValueError, "rep_align_weight must be a number in"),
        (dict(rep_align_projector="linear"), TypeError, "rep_align_projector must be None, True"),
        (dict(rep_align_loss_fn=None), TypeError, "rep_align_loss_fn must be a callable"),
        (dict(beta=1.5), ValueError, "beta must be a number in"),
        (dict(batch_size=0), ValueError, "batch_size must be None or an int >= 1"),
        (dict(buffer_size=2.5), ValueError, "buffer_size must be None or an int >= 1"),
        (dict(pretrain_steps=-1), ValueError, "pretrain_steps must be an int >= 0"),
        (dict(weight=-0.5), ValueError, "weight must be a number in"),
        (dict(rl_coef=math.nan), ValueError, "rl_coef must be a number in"),
        (dict(gradient_steps=0), ValueError, "gradient_steps must be None or an int >= 1"),
        (dict(gradient_surgery="yes"), ValueError, "gradient_surgery must be True or False"),
        (dict(teacher_obs_keys=[]), ValueError, "teacher_obs_keys must be None, a key"),
        (dict(teacher_vec_normalize=3), TypeError, "teacher_vec_normalize must be None, a VecNormalize"),
        (dict(teacher_algo=3), TypeError, "teacher_algo must be None, an algorithm's name"),
        (dict(trust_code="no"), ValueError, "trust_code must be True or False"),
    ],
)
def test_each_option_refuses_a_bad_value_by_name(keywords, error, message):
    with pytest.raises(error, match=message):
        DistillOptions(**keywords)


def test_refusals_of_the_readers():
    with pytest.raises(TypeError, match="options must be a DistillOptions"):
        DaggerCallback(gaussian, options=dict(beta=0.5))
    with pytest.raises(TypeError, match="DaggerCallback\\(\\) got an unexpected keyword argument 'lr_scale'"):
        DaggerCallback(gaussian, lr_scale=2.0)
    with pytest.raises(TypeError, match="return_loss_breakdown"):
        DaggerCallback(gaussian, return_loss_breakdown=True)  # a parameter of DaggerDistiller, no option
    with pytest.raises(TypeError, match=r"pretrain_steps is an option of DaggerCallback, python -m sb3_xppo\.distill"):
        DaggerDistiller(gaussian, gaussian, pretrain_steps=3)
    with pytest.raises(TypeError, match="positional"):
        DaggerCallback(gaussian, nll_loss)  # the options are keywords


# ---------------------------------------------------------------------------------------------------------------------
# The command's flags, made from the declarations
# ---------------------------------------------------------------------------------------------------------------------

BASE = ["--teacher", "t.zip", "--env", "CartPole-v1", "--timesteps", "64", "--out", "o.zip"]


def test_the_command_has_a_flag_per_option_it_reads():
    parsed = parse_args(BASE)
    for name in DistillOptions.read_by(COMMAND):
        assert hasattr(parsed, name)
    options = command_options(parsed)
    assert options.loss_fn is nll_loss and options.batch_size == 64 and options.buffer_size == 100_000
    assert options.teacher_obs_keys is None and options.trust_code is False and options.pretrain_steps == 0
    flags = ["--loss", "kl", "--beta", "0.25", "--teacher-obs-keys", "state", "--trust-code", "--pretrain-steps", "2"]
    options = command_options(parse_args([*BASE, *flags]))
    assert options.loss_fn is kl_loss and options.beta == 0.25 and options.teacher_obs_keys == "state"
    assert options.trust_code is True and options.pretrain_steps == 2
    assert command_options(parse_args([*BASE, "--teacher-obs-keys", "a", "b"])).teacher_obs_keys == ["a", "b"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--batch-size", "0"], "--batch-size must be None or an int >= 1, got 0"),
        (["--beta", "2"], "--beta must be a number in"),
        (["--pretrain-steps", "-1"], "--pretrain-steps must be an int >= 0"),
        (["--collect-steps", "0"], "--collect-steps must be >= 1"),
    ],
)
def test_the_command_refuses_by_the_declarations(flags, message, capsys):
    assert main([*BASE, *flags]) == 2  # before any file is read
    assert message in capsys.readouterr().err


def test_the_command_refuses_an_unknown_loss(capsys):
    with pytest.raises(SystemExit):
        parse_args([*BASE, "--loss", "l1"])
    assert "invalid choice: 'l1'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------------
# The teacher's rl-zoo3 run, read through sb3_xppo.zoo
# ---------------------------------------------------------------------------------------------------------------------


def write_run(tmp_path, config, args=None):
    folder = tmp_path / "CartPole-v1"
    folder.mkdir()
    (folder / "config.yml").write_text(yaml.safe_dump([list(item) for item in config.items()]))
    if args is not None:
        (folder / "args.yml").write_text(yaml.safe_dump(args))
    return tmp_path / "CartPole-v1.zip"


def test_agent_settings(tmp_path):
    from sb3_xppo import zoo

    model = write_run(tmp_path, {"env_kwargs": {"a": 1}, "normalize": False}, args={"env_kwargs": {"b": 2}})
    settings = zoo.agent_settings(model, "CartPole-v1")
    assert settings.env_kwargs == {"b": 2}  # args.yml's replace config.yml's, as rl-zoo3's enjoy reads them
    assert settings.vec_normalize_path is None and "env_kwargs" not in settings.hyperparams
    assert zoo.agent_settings(model, "CartPole-v1", saved=False) == zoo.AgentSettings({}, {}, None)
    assert zoo.agent_settings(tmp_path / "elsewhere" / "m.zip", "CartPole-v1") == zoo.AgentSettings({}, {}, None)
    env = zoo.AgentSettings({"env_wrapper": "gymnasium.wrappers.TimeAwareObservation"}, {}, None).make_env("CartPole-v1", 2, 0)
    assert env.num_envs == 2 and env.observation_space.shape == (5,)  # the wrapper applied
    env.close()


@pytest.mark.parametrize(
    "config, message",
    [({"frame_stack": 4}, "stacks frames"), ({"normalize": True}, "says normalize but there is no")],
)
def test_agent_settings_refusals(tmp_path, config, message):
    from sb3_xppo import zoo

    with pytest.raises(ValueError, match=message):
        zoo.agent_settings(write_run(tmp_path, config), "CartPole-v1")


def test_the_teacher_env_without_rl_zoo3(tmp_path, monkeypatch):
    """Without rl-zoo3 the command builds the bare env, and refuses to ignore a zoo run's settings or --env-wrapper."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rl_zoo3" else find_spec(name, *a))
    model = write_run(tmp_path, {"normalize": False})
    argv = ["--teacher", str(model), "--env", "CartPole-v1", "--timesteps", "8", "--out", "o.zip"]
    with pytest.raises(ValueError, match=r"rl-zoo3 settings in .*CartPole-v1 need rl-zoo3"):
        TeacherEnv(parse_args(argv), DistillOptions())
    with pytest.raises(ValueError, match="--env-wrapper need rl-zoo3"):
        TeacherEnv(parse_args([*argv, "--no-zoo-config", "--env-wrapper", "a.B"]), DistillOptions())
    teacher_env = TeacherEnv(
        parse_args([*argv, "--no-zoo-config", "--env-kwargs", "sutton_barto_reward:True"]), DistillOptions()
    )
    env = teacher_env.make_env(2, 0)
    assert env.num_envs == 2 and teacher_env.vec_normalize_path is None
    env.close()


def test_layer_module_accepted(tmp_path):
    layer = nn.Linear(1, 1)
    assert DistillOptions(student_layer=layer, teacher_layer="x").student_layer is layer


if __name__ == "__main__":
    text = OPTIONS_MODULE.read_text()
    new = rewrite_keywords_region(text)
    OPTIONS_MODULE.write_text(new)
    print(f"{OPTIONS_MODULE}: {'rewritten' if new != text else 'up to date'}")
    sys.exit(0)
