"""What the hostile-file tests share (tests/test_safe_load.py, tests/test_hostile_files.py): payloads that, if they
ran, would create a sentinel file, and the files that carry them."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import subprocess
import zipfile

import cloudpickle
import pytest


class RunsCommand:
    """Unpickled, it runs ``touch sentinel`` (os.system, or subprocess.call with ``via_subprocess``)."""

    def __init__(self, sentinel: pathlib.Path, via_subprocess: bool = False) -> None:
        self.sentinel, self.via_subprocess = str(sentinel), via_subprocess

    def __reduce__(self):
        if self.via_subprocess:
            return subprocess.call, (["touch", self.sentinel],)
        return os.system, (f"touch '{self.sentinel}'",)


def serialized(value) -> dict:
    """A ``data`` field as SB3 writes one it cannot put in JSON."""
    return {":type:": "<class 'object'>", ":serialized:": base64.b64encode(cloudpickle.dumps(value)).decode()}


def serialized_bytes(blob: bytes) -> dict:
    """A ``data`` field holding the pickle ``blob`` as it is."""
    return {":type:": "<class 'object'>", ":serialized:": base64.b64encode(blob).decode()}


def rewrite_data(source: pathlib.Path, target: pathlib.Path, **fields) -> pathlib.Path:
    """A copy of a model zip with ``data``'s fields replaced (and without the package's signature)."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            content = archive.read(info)
            if info.filename == "data":
                content = json.dumps({**json.loads(content), **fields}).encode()
            if info.filename != "sb3_xppo_signature":
                out.writestr(info, content)
    return target


def unsigned(path: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """The same zip without the package's signature: a file from elsewhere."""
    return rewrite_data(path, target)


def zoo_folder(root: pathlib.Path, env_id: str = "CartPole-v1", **files: str) -> pathlib.Path:
    """rl-zoo3's run folder: ``<root>/ppo/<env>_1/<env>/`` holding the given files."""
    folder = root / "ppo" / f"{env_id}_1" / env_id
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name.replace("_yml", ".yml")).write_text(text)
    return folder


def refused_by_command(capsys, main, argv, match: str) -> str:
    """A command's refusal: exit status 2 and one line on stderr matching ``match``, no traceback; the line."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and re.search(match, err), err
    return err
