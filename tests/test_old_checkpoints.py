"""
Real checkpoints of older stacks (docs/guide/security.md, "Files from older stacks"): SB3 1.8 + gym 0.21 + rl-zoo3
1.8, SB3 2.0 + rl-zoo3 2.0, SB3 2.3 + rl-zoo3 2.3, each saved in a venv of its own by
``tests/old_stacks/make_fixtures.py`` (``bash tests/old_stacks/build.sh`` makes them again; committed, 1 MB a stack)
with the stack's own deterministic actions on fixed observations. Without ``trust_code``, each loads through
``load_model``, ``XPPO.load`` (PPO's), ``DaggerCallback`` and the commands, and acts as its own stack did.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import warnings
import zipfile

import numpy as np
import pytest
from stable_baselines3 import PPO

from sb3_xppo import XPPO, DaggerCallback, load_model, load_vec_normalize
from sb3_xppo.dagger_distill.checkpoints import algorithms
from sb3_xppo.loading import verified

STACKS = pathlib.Path(__file__).parent / "data" / "old_stacks"


def fixtures(*kinds: str) -> list[tuple[pathlib.Path, dict]]:
    found = []
    for manifest in sorted(STACKS.glob("*/manifest.json")):
        for fixture in json.loads(manifest.read_text())["fixtures"]:
            if fixture["kind"] in kinds:
                found.append((manifest.parent, fixture))
    return found


def fixture_id(value) -> str:
    return value.name if isinstance(value, pathlib.Path) else value["name"] if isinstance(value, dict) else str(value)


MODELS = fixtures("model", "zoo_folder")


def observations(stack: pathlib.Path, fixture: dict) -> np.ndarray:
    """The fixed observations, normalized by the run's statistics where a zoo run has them (as its actions were)."""
    obs = np.load(stack / fixture["observations"])
    if fixture.get("vecnormalize"):
        with pytest.warns(UserWarning) if stack.name == "sb3_1.8" else warnings.catch_warnings():
            obs = load_vec_normalize(stack / fixture["vecnormalize"]).normalize_obs(obs)
    return obs


def acts_as_saved(predict, stack: pathlib.Path, fixture: dict) -> None:
    """``predict``'s deterministic actions on the fixture's observations are its stack's (to float rounding)."""
    obs = observations(stack, fixture)
    kwargs: dict = {"deterministic": True}
    if "masks" in fixture:
        kwargs["action_masks"] = np.load(stack / fixture["masks"])
    if fixture["algo"] == "ppo_lstm":
        kwargs.update(state=None, episode_start=np.ones(len(obs), dtype=bool))
    actions, expected = predict(obs, **kwargs)[0], np.load(stack / fixture["actions"])
    assert actions.shape == expected.shape and actions.dtype.kind == expected.dtype.kind
    np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)


def model_path(stack: pathlib.Path, fixture: dict) -> pathlib.Path:
    return stack / (fixture["model"] if fixture["kind"] == "zoo_folder" else fixture["path"])


def test_every_stack_and_fixture_is_there():
    """The fixtures the tests rely on (a missing one would silently shrink the parametrization)."""
    assert sorted(path.name for path in STACKS.iterdir() if path.is_dir()) == ["sb3_1.8", "sb3_2.0", "sb3_2.3"]
    for stack in STACKS.iterdir():
        manifest = json.loads((stack / "manifest.json").read_text())
        assert not manifest["skipped"]
        assert len(manifest["fixtures"]) == 13
    assert json.loads((STACKS / "sb3_1.8" / "manifest.json").read_text())["versions"]["gym"] == "0.21.0"


@pytest.mark.parametrize("stack, fixture", MODELS, ids=fixture_id)
def test_an_old_checkpoint_loads_without_trust_and_acts_as_saved(stack, fixture):
    """load_model tells the class from the file and builds the model without running any of its code: what the old
    stack wrote by value (its schedule closures, gym spaces) is rebuilt with a warning naming each field."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_model(model_path(stack, fixture), device="cpu")
    assert type(model) is algorithms()[fixture["algo"]]
    acts_as_saved(model.predict, stack, fixture)
    said = " ".join(str(w.message) for w in caught)
    if stack.name != "sb3_2.3" or fixture["algo"] != "sac":  # (SB3 2.3 pickled SAC's schedule as an object)
        assert "data['lr_schedule']" in said
    if stack.name == "sb3_1.8":
        assert "a space of the old gym package, rebuilt as" in said


@pytest.mark.parametrize("stack, fixture", [f for f in MODELS if f[1]["algo"] == "ppo"], ids=fixture_id)
def test_an_old_ppo_checkpoint_loads_as_xppo(stack, fixture):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = XPPO.load(model_path(stack, fixture), device="cpu")
        stock = load_model(PPO, model_path(stack, fixture), device="cpu")
    acts_as_saved(model.predict, stack, fixture)
    assert model.clip_range(0.5) == stock.clip_range(0.5)  # the rebuilt schedule, the same in both


@pytest.mark.parametrize("stack, fixture", MODELS, ids=fixture_id)
def test_an_old_checkpoint_is_a_teacher(stack, fixture):
    """DaggerCallback(teacher=path) takes each (TQC and QR-DQN included); a recurrent teacher is refused as any is."""
    path = str(model_path(stack, fixture))
    if fixture["algo"] == "ppo_lstm":
        with pytest.raises(ValueError, match="a recurrent teacher is not supported"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            DaggerCallback(path)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        callback = DaggerCallback(path)
    acts_as_saved(callback.teacher_policy.predict, stack, fixture)


@pytest.mark.parametrize("stack, fixture", fixtures("vec_normalize"), ids=fixture_id)
def test_old_vec_normalize_statistics(stack, fixture):
    """VecNormalize statistics of each stack, the gym era's included: no gym needed, the same normalization."""
    loaded = load_vec_normalize(stack / fixture["path"]) if stack.name != "sb3_1.8" else None
    if loaded is None:
        with pytest.warns(UserWarning, match="a space of the old gym package, rebuilt as Box"):
            loaded = load_vec_normalize(stack / fixture["path"])
    normalized = loaded.normalize_obs(np.load(stack / fixture["observations"]))
    np.testing.assert_allclose(normalized, np.load(stack / fixture["normalized"]), rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("stack", sorted(STACKS.iterdir()), ids=fixture_id)
def test_old_zoo_runs_through_enjoy_and_distill(stack, tmp_path, monkeypatch):
    """The commands on each stack's rl-zoo3 runs, without --trust-code: enjoy watches them, and distill takes the run
    folder (its config, statistics and the schedules in its zip) as the teacher."""
    from sb3_xppo import distill, enjoy

    monkeypatch.chdir(tmp_path)
    shutil.copytree(stack / "zoo", tmp_path / "logs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for algo, env in (("ppo", "Pendulum-v1"), ("dqn", "CartPole-v1")):
            enjoy.main(["--algo", algo, "--env", env, "-f", "logs", "--no-render", "-n", "50"])
        argv = ["--teacher", "logs/ppo/Pendulum-v1_1", "--student-algo", "sac", "--env", "Pendulum-v1"]
        argv += ["--timesteps", "64", "--out", str(tmp_path / "student.zip"), "--eval-episodes", "1", "--no-progress-bar"]
        assert distill.main(argv) == 0
    with zipfile.ZipFile(tmp_path / "student.zip") as student:  # the command's own file: signed
        assert verified(student)
