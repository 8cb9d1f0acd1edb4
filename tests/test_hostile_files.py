"""
The hostile corpus (docs/guide/security.md): files that are not model zips, or that reach past the fields the first
tests named, each standing for a class of attack. For each, no code runs (a sentinel file stays absent), nothing
crashes, time and memory stay bounded, and the error names the file, the field and what it asked for. Each case
has its negative control where one exists: what the stock loader (or ``--trust-code``) does with the same file.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
import torch as th
import yaml
from hostile import RunsCommand, refused_by_command, rewrite_data, serialized, serialized_bytes, zoo_folder
from stable_baselines3 import PPO

from sb3_xppo import XPPO, ResumableCheckpoint, UnsafeFileError, load_model
from sb3_xppo.loading import FileTooLargeError, UnreadableFileError, restricted_loads
from sb3_xppo.resume import CorruptCheckpointError
from sb3_xppo.resume.files import MANIFEST


def small() -> dict:
    return dict(policy_kwargs=dict(net_arch=[8]), device="cpu", seed=0)


@pytest.fixture(scope="module")
def ppo_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp("ppo") / "ppo.zip"
    PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, **small()).save(path)
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Names of code in files that are not model zips: a zoo folder's config.yml, a checkpoint's env id
# ---------------------------------------------------------------------------------------------------------------------


def pager_config(sentinel) -> str:
    """rl-zoo3 imports the wrapper that ``env_wrapper`` names and calls it with the given keywords."""
    return yaml.safe_dump({"env_wrapper": [{"pydoc.pipepager": {"cmd": f"touch '{sentinel}'"}}], "normalize": False})


def test_a_config_naming_code_as_its_wrapper_is_refused_by_enjoy(ppo_zip, tmp_path, monkeypatch, capsys):
    """(1) ``enjoy`` on a downloaded zoo folder whose config.yml names ``pydoc.pipepager`` as a wrapper."""
    from sb3_xppo import enjoy

    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "ran"
    folder = zoo_folder(tmp_path / "logs", config_yml=pager_config(sentinel))
    (folder.parent / "CartPole-v1.zip").write_bytes(ppo_zip.read_bytes())
    argv = ["--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "5"]
    line = refused_by_command(capsys, enjoy.main, argv, r"config\.yml: env_wrapper asks for pydoc\.pipepager")
    assert "--trust-code" in line and not sentinel.exists()
    # Negative control: with --trust-code, rl-zoo3 imports and calls it, and the command runs (in a shell it starts)
    with contextlib.suppress(Exception):
        enjoy.main([*argv, "--trust-code"])
    deadline = time.monotonic() + 10
    while not sentinel.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sentinel.exists()


def test_a_config_naming_code_as_its_wrapper_is_refused_by_distill(ppo_zip, tmp_path, capsys):
    """(2) the same config.yml beside a teacher of ``python -m sb3_xppo.distill``: one line, status 2."""
    from sb3_xppo.distill import main

    sentinel = tmp_path / "ran"
    folder = zoo_folder(tmp_path, config_yml=pager_config(sentinel))
    (folder.parent / "CartPole-v1.zip").write_bytes(ppo_zip.read_bytes())
    argv = ["--teacher", str(folder.parent), "--student-algo", "ppo", "--env", "CartPole-v1", "--timesteps", "8"]
    assert main([*argv, "--out", str(tmp_path / "out.zip"), "--eval-episodes", "0", "--no-progress-bar"]) == 2
    err = capsys.readouterr().err
    assert "config.yml: env_wrapper asks for pydoc.pipepager" in err and not sentinel.exists()


def resumable_run(folder, **kwargs) -> None:
    model = XPPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, n_epochs=1, **small(), **kwargs)
    model.learn(32, callback=ResumableCheckpoint(folder, every_rollouts=1))


def rewrite_checkpoint(path, change) -> None:
    """A checkpoint file with its state changed by ``change(state, arrays)`` and its checksums made to match."""
    import hashlib

    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist() if name != MANIFEST}
    state = json.loads(members["state.json"])
    change(state, members)
    members["state.json"] = json.dumps(state).encode()
    manifest = {name: hashlib.sha256(data).hexdigest() for name, data in members.items()}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(MANIFEST, json.dumps({"format": 1, "sha256": manifest}))


def test_a_checkpoints_env_id_naming_a_module_it_ships_is_refused(tmp_path, monkeypatch):
    """(3) ``XPPO.resume(folder)`` without ``env``: the recorded env id ``payload.module:CartPole-v1`` would make
    gymnasium import a module that came with the folder. Refused before anything is imported."""
    resumable_run(tmp_path / "run")
    package = tmp_path / "shipped"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "payload.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    newest = sorted((tmp_path / "run").glob("resume-*.ckpt"))[-1]
    rewrite_checkpoint(
        newest, lambda state, _: state["__dict__"]["envs"]["__dict__"].update(env_id="shipped.payload:CartPole-v1")
    )
    with pytest.raises(
        UnsafeFileError, match=r"resume-\d+\.ckpt: the env id asks for shipped\.payload \(an env id with a module"
    ):
        XPPO.resume(tmp_path / "run")
    assert "shipped.payload" not in sys.modules and not (tmp_path / "ran").exists()
    # Negative control: trust_code lets gymnasium import it
    with contextlib.suppress(Exception):
        XPPO.resume(tmp_path / "run", trust_code=True)
    assert (tmp_path / "ran").exists()


def test_a_checkpoints_counters_set_only_the_counters(tmp_path):
    """(8) a resume checkpoint whose ``counters`` name another attribute (``tensorboard_log``): refused, unset."""
    resumable_run(tmp_path / "run")
    newest = sorted((tmp_path / "run").glob("resume-*.ckpt"))[-1]

    def counters(state, _):
        state["__dict__"]["counters"]["__dict__"]["tensorboard_log"] = str(tmp_path / "elsewhere")

    rewrite_checkpoint(newest, counters)
    with pytest.raises(CorruptCheckpointError, match=r"its counters are .*tensorboard_log.*not the ones the package"):
        XPPO.resume(tmp_path / "run", env=None)


def test_an_object_array_in_a_checkpoint_is_named(tmp_path):
    """A checkpoint's ``arrays.npz`` holding an object array (which only pickle reads): named, file and array."""
    resumable_run(tmp_path / "run")
    newest = sorted((tmp_path / "run").glob("resume-*.ckpt"))[-1]

    def object_array(state, members):
        buffer = io.BytesIO()
        np.savez(buffer, a0=np.array([RunsCommand(tmp_path / "ran")], dtype=object))
        members["arrays.npz"] = buffer.getvalue()

    rewrite_checkpoint(newest, object_array)
    with pytest.raises(
        CorruptCheckpointError, match=r"resume-\d+\.ckpt: the state's array 'a0' cannot be read without pickle"
    ):
        XPPO.resume(tmp_path / "run")
    assert not (tmp_path / "ran").exists()


# ---------------------------------------------------------------------------------------------------------------------
# Pickles that use only allowlisted names, and files that reach past the model zip's fields
# ---------------------------------------------------------------------------------------------------------------------


class ForgedPointer:
    """(4) An object array over raw bytes, from allowlisted numpy globals only (``_reconstruct``, ``ndarray``,
    ``dtype``): an ndarray of dtype ``O8`` whose data is a forged object pointer, which numpy would dereference."""

    def __reduce__(self):
        state = (1, (1,), np.dtype("O8"), False, b"A" * 8)
        return np._core.multiarray._reconstruct, (np.ndarray, (0,), b"b"), state


def test_an_object_array_forged_from_allowlisted_numpy_globals_never_crashes(ppo_zip, tmp_path):
    """(4) in a model zip's clip_range: named, in a process of its own that must not crash (a segfault would)."""
    evil = rewrite_data(ppo_zip, tmp_path / "evil.zip", clip_range=serialized(ForgedPointer()))
    code = (
        "import sys\nfrom sb3_xppo import XPPO\n"
        f"try:\n    XPPO.load({str(evil)!r})\nexcept ValueError as error:\n    print(error)\n    sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr  # refused (not -11, a segfault; not 0, loaded)
    assert "data['clip_range'] is not a pickle the libraries write" in done.stdout
    assert "not plain data" in done.stdout


def test_a_policy_files_pickle_is_read_with_the_allowlist(tmp_path):
    """(5) ``XPPO.policy_aliases["MlpPolicy"].load(path)`` (SB3's BaseModel.load reads with weights_only=False)."""
    sentinel = tmp_path / "ran"
    th.save({"state_dict": {}, "data": {"observation_space": RunsCommand(sentinel)}}, tmp_path / "policy.pth")
    policy_class = XPPO.policy_aliases["MlpPolicy"]
    with pytest.raises(UnsafeFileError, match=r"policy\.pth asks for posix\.system"):
        policy_class.load(tmp_path / "policy.pth")
    assert not sentinel.exists()
    model = XPPO("MlpPolicy", "CartPole-v1", **small())  # the benign file: the same policy back
    model.policy.save(tmp_path / "benign.pth")
    loaded = policy_class.load(tmp_path / "benign.pth")
    assert all(th.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.policy.state_dict().values(), strict=True))
    with contextlib.suppress(Exception):  # negative control: SB3's own load runs it
        policy_class.load(tmp_path / "policy.pth", trust_code=True)
    assert sentinel.exists()


def test_trust_code_never_changes_how_yaml_is_read(ppo_zip, tmp_path, monkeypatch, capsys):
    """(6) ``enjoy --trust-code``: args.yml is still read safely, a Python tag refused."""
    from sb3_xppo import enjoy

    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "ran"
    folder = zoo_folder(tmp_path / "logs", args_yml=f"env_kwargs: !!python/object/apply:os.system [\"touch '{sentinel}'\"]\n")
    (folder.parent / "CartPole-v1.zip").write_bytes(ppo_zip.read_bytes())
    argv = ["--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "5", "--trust-code"]
    line = refused_by_command(capsys, enjoy.main, argv, r"args\.yml asks for !!python/object/apply:os\.system")
    assert "trust_code" not in line.replace("with or without trust_code", "")  # (it does not apply to YAML)
    assert not sentinel.exists()


@pytest.fixture(scope="module")
def zip_bomb(tmp_path_factory):
    """(7) A 5 MB zip whose ``data`` inflates to 1 GiB (of spaces: valid JSON whitespace; deflate's fastest level)."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.zip"
    chunk = b" " * 2**20
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("data", "w", force_zip64=True) as member,
    ):
        for _ in range(1024):
            member.write(chunk)
    return path


def test_a_zip_bomb_is_refused_before_it_inflates(zip_bomb):
    assert zip_bomb.stat().st_size < 8 * 2**20
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(FileTooLargeError, match=r"bomb\.zip: member 'data' declares 1,073,741,824 bytes"):
            XPPO.load(zip_bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 5 and peak < 32 * 2**20


def test_the_commands_refuse_a_zip_bomb_in_one_line(zip_bomb, tmp_path, monkeypatch, capsys):
    """(9) a refused file ends ``train -i`` and ``enjoy`` with one line and exit status 2, no traceback."""
    from sb3_xppo import enjoy, train

    monkeypatch.chdir(tmp_path)
    argv = ["--algo", "ppo", "--env", "CartPole-v1", "-i", str(zip_bomb), "-n", "64", "--no-progress", "-f", "out"]
    refused_by_command(capsys, train.main, argv, r"bomb\.zip: member 'data' declares")
    folder = zoo_folder(tmp_path / "logs")
    (folder.parent / "CartPole-v1.zip").write_bytes(zip_bomb.read_bytes())
    watch = ["--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "5"]
    refused_by_command(capsys, enjoy.main, watch, r"CartPole-v1\.zip: member 'data' declares")


# ---------------------------------------------------------------------------------------------------------------------
# What a refusal says
# ---------------------------------------------------------------------------------------------------------------------


def test_a_refusal_lists_every_refused_field(ppo_zip, tmp_path):
    sentinel = tmp_path / "ran"
    evil = rewrite_data(
        ppo_zip,
        tmp_path / "evil.zip",
        clip_range=serialized(RunsCommand(sentinel)),
        observation_space=serialized(RunsCommand(sentinel, via_subprocess=True)),
    )
    with pytest.raises(UnsafeFileError) as refused:
        load_model(evil)
    message = str(refused.value)
    assert "data['clip_range'] asks for posix.system" in message
    assert "data['observation_space'] asks for subprocess.call" in message
    assert len(refused.value.refusals) == 2 and "\n" not in message and not sentinel.exists()


def test_an_extension_code_is_named():
    """EXT1 (copyreg's extension registry) names no global in the stream: refused by name, with the field."""
    with pytest.raises(UnsafeFileError, match=r"^f asks for an extension code \(EXT1/EXT2/EXT4\)"):
        restricted_loads(b"\x80\x02\x82\x01.", "f")


def test_a_yaml_name_outside_the_allowlist_suggests_no_trust_code(tmp_path):
    from sb3_xppo.loading.zoo_files import load_zoo_yaml

    (tmp_path / "config.yml").write_text("policy_kwargs:\n  activation_fn: !!python/name:os.system ''\n")
    with pytest.raises(UnsafeFileError) as refused:
        load_zoo_yaml(tmp_path / "config.yml")
    assert "asks for !!python/name:os.system" in str(refused.value)
    assert "trust_code=True" not in str(refused.value) and "--trust-code" not in str(refused.value)


def test_a_library_module_is_never_imported_for_a_name():
    """A pickle naming a class in a module the libraries have not loaded: refused without importing the module."""
    module = "stable_baselines3.common.results_plotter"
    code = (
        "import sys, sb3_xppo\nfrom sb3_xppo.loading import restricted_loads\n"
        f"assert {module!r} not in sys.modules\n"
        f"try:\n    restricted_loads(b'c{module}\\nplot_results\\n.', 'f')\nexcept ValueError as error:\n    print(error)\n"
        f"print({module!r} in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"f asks for {module}.plot_results" in done.stdout and done.stdout.strip().endswith("False")


def test_a_function_the_loader_calls_is_never_a_value():
    """``builtins.getattr`` as a value (not called by the pickle): refused, not handed out."""
    with pytest.raises(UnsafeFileError, match=r"^f asks for builtins\.getattr"):
        restricted_loads(b"cbuiltins\ngetattr\n.", "f")


def test_a_pickle_cannot_change_what_it_only_named():
    """BUILD on a class the pickle named (it would set an attribute of a library class for the whole process)."""
    stream = b"\x80\x02cstable_baselines3.common.utils\nConstantSchedule\n}S'__call__'\nNsb."
    with pytest.raises(UnsafeFileError, match="changes an object it only named"):
        restricted_loads(stream, "f")
    from stable_baselines3.common.utils import ConstantSchedule

    assert callable(ConstantSchedule(1.0)) and ConstantSchedule(1.0)(0.5) == 1.0


def test_an_unreadable_pickle_is_named(ppo_zip, tmp_path):
    evil = rewrite_data(ppo_zip, tmp_path / "evil.zip", clip_range=serialized_bytes(b"\x80\x02K"))
    with pytest.raises(UnreadableFileError, match=r"evil\.zip: data\['clip_range'\] is not a pickle the libraries write"):
        load_model(evil)
