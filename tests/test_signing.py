"""
The trust model's first tier (docs/guide/security.md): what this user's package saves is signed (an HMAC-SHA256 over
the zip's members, with a key in the user's config folder) and loads as SB3 loads it; a file whose signature does not
verify loads as any other file, safely. ``python -m sb3_xppo.trust`` signs a file the user vouches for.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import warnings
import zipfile

import pytest
from hostile import RunsCommand, rewrite_data, serialized
from stable_baselines3 import PPO

from sb3_xppo import XPPO, UnsafeFileError, load_model
from sb3_xppo.loading.signing import KEY_VARIABLE, SIGNATURE_MEMBER, key_path, signed, verified


def small() -> dict:
    return dict(n_steps=32, batch_size=32, policy_kwargs=dict(net_arch=[8]), device="cpu", seed=0)


@pytest.fixture
def own_key(tmp_path, monkeypatch):
    """A fresh key for the test (made at the first save)."""
    path = tmp_path / "config" / "sb3-xppo" / "signing.key"
    monkeypatch.setenv(KEY_VARIABLE, str(path))
    return path


def test_the_first_save_makes_a_private_key_and_signs(own_key, tmp_path):
    assert not own_key.exists()
    XPPO("MlpPolicy", "CartPole-v1", **small()).save(tmp_path / "model")  # (SB3 adds .zip)
    assert stat.S_IMODE(own_key.stat().st_mode) == 0o600 and len(own_key.read_text().strip()) == 64
    with zipfile.ZipFile(tmp_path / "model.zip") as archive:
        assert archive.namelist()[-1] == SIGNATURE_MEMBER and verified(archive)
        assert set(json.loads(archive.read(SIGNATURE_MEMBER))) == {"format", "hmac_sha256"}
    key = own_key.read_text()
    XPPO("MlpPolicy", "CartPole-v1", **small()).save(tmp_path / "again.zip")
    assert own_key.read_text() == key  # one key, made once


def test_the_default_key_is_in_the_config_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert key_path() == tmp_path / "sb3-xppo" / "signing.key"


def test_an_own_file_with_a_lambda_loads_as_sb3_loads_it(own_key, tmp_path):
    """The user's own lambda schedule, saved to a path and to an open file: both load without trust_code."""
    model = XPPO("MlpPolicy", "CartPole-v1", learning_rate=lambda p: 1e-3 * p, **small())
    model.save(tmp_path / "mine.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing rebuilt, nothing stood in
        assert XPPO.load(tmp_path / "mine.zip").learning_rate(0.5) == pytest.approx(5e-4)
    with open(tmp_path / "open.zip", "w+b") as file:  # SB3's test_no_resource_warning: save(f), then load(f)
        model.save(file)
        assert XPPO.load(file).learning_rate(0.5) == pytest.approx(5e-4)
    buffer = io.BytesIO()
    model.save(buffer)
    assert XPPO.load(buffer).learning_rate(0.25) == pytest.approx(2.5e-4)
    stock = PPO.load(tmp_path / "mine.zip", device="cpu")  # SB3's own loader ignores the signature
    assert stock.learning_rate(0.5) == pytest.approx(5e-4)


def test_a_file_whose_signature_does_not_verify_loads_as_any_other(own_key, tmp_path):
    sentinel = tmp_path / "ran"
    XPPO("MlpPolicy", "CartPole-v1", **small()).save(tmp_path / "mine.zip")
    # a member changed after signing: the signature no longer verifies
    tampered = tmp_path / "tampered.zip"
    with zipfile.ZipFile(tmp_path / "mine.zip") as archive, zipfile.ZipFile(tampered, "w") as out:
        for info in archive.infolist():
            content = archive.read(info)
            if info.filename == "data":
                content = json.dumps({**json.loads(content), "clip_range": serialized(RunsCommand(sentinel))}).encode()
            out.writestr(info, content)
    with zipfile.ZipFile(tampered) as archive:
        assert SIGNATURE_MEMBER in archive.namelist() and not verified(archive)
    with pytest.raises(UnsafeFileError, match=r"data\['clip_range'\] asks for posix\.system"):
        XPPO.load(tampered)
    # another user's key: their signature means nothing here
    theirs = tmp_path / "theirs.key"
    theirs.write_text("0" * 64)
    os.environ[KEY_VARIABLE] = str(theirs)
    try:
        evil = tmp_path / "evil.zip"
        evil.write_bytes(
            signed(
                rewrite_data(
                    tmp_path / "mine.zip", tmp_path / "x.zip", clip_range=serialized(RunsCommand(sentinel))
                ).read_bytes()
            )
        )
    finally:
        os.environ[KEY_VARIABLE] = str(own_key)
    with pytest.raises(UnsafeFileError, match=r"posix\.system"):
        load_model(evil)
    assert not sentinel.exists()


def test_a_zip_with_two_members_of_one_name_never_verifies(own_key, tmp_path):
    XPPO("MlpPolicy", "CartPole-v1", **small()).save(tmp_path / "mine.zip")
    doubled = tmp_path / "doubled.zip"
    with zipfile.ZipFile(tmp_path / "mine.zip") as archive, zipfile.ZipFile(doubled, "w") as out:
        for info in archive.infolist():
            out.writestr(info, archive.read(info))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # (zipfile's duplicate name)
            out.writestr("data", archive.read("data"))
    with zipfile.ZipFile(doubled) as archive:
        assert not verified(archive)


def test_the_trust_command_signs_what_the_user_vouches_for(own_key, tmp_path):
    """``python -m sb3_xppo.trust``: a stock PPO file with a lambda (someone else's: unsigned) loads as SB3 does once
    the user has signed it; a folder's model zips are signed, recursively; anything else is one line, status 2."""
    PPO("MlpPolicy", "CartPole-v1", clip_range=lambda p: 0.2 * p, **small()).save(tmp_path / "run" / "sub" / "theirs.zip")
    with pytest.warns(UserWarning, match="inert"):
        load_model(tmp_path / "run" / "sub" / "theirs.zip")
    command = [sys.executable, "-m", "sb3_xppo.trust", str(tmp_path / "run")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, KEY_VARIABLE: str(own_key)})
    assert done.returncode == 0, done.stderr
    assert f"signed {tmp_path / 'run' / 'sub' / 'theirs.zip'}" in done.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert load_model(tmp_path / "run" / "sub" / "theirs.zip").clip_range(0.5) == pytest.approx(0.1)
    (tmp_path / "notes.txt").write_text("not a model")
    done = subprocess.run(
        [sys.executable, "-m", "sb3_xppo.trust", str(tmp_path / "notes.txt")], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not a model zip" in done.stderr
