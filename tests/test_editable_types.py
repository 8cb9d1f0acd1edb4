"""The install the README gives lets type checkers see the package (docs/guide/install.md): an editable install in a
fresh venv, then mypy on a user's file outside the repository. setuptools' default editable install, an import hook,
is the negative control: mypy finds no ``sb3_xppo`` there and types ``XPPO`` as ``Any``."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
MYPY = shutil.which("mypy")
USER_FILE = """from sb3_xppo import XPPO

XPPO("MlpPolicy", "CartPole-v1", actor_loss="cilp")
reveal_type(XPPO)
"""


def editable_install(where: Path, *settings: str) -> Path:
    """
    A fresh venv holding only this checkout's editable install; the dependencies (and pip, setuptools) are the test
    environment's, through a ``.pth`` file, so nothing is downloaded.

    :return: the venv's python
    """
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    own_site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(own_site, "test-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(ROOT)]
    subprocess.run([*install, *settings], cwd=ROOT, check=True, capture_output=True)
    return python


def mypy_of_user_file(python: Path, folder: Path) -> str:
    """:return: mypy's report on :data:`USER_FILE`, written in ``folder`` (outside the repository) and checked there"""
    (folder / "user.py").write_text(USER_FILE)
    command = [MYPY, "--python-executable", str(python), "--no-incremental", "--ignore-missing-imports", "user.py"]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(MYPY is None or sys.platform == "win32", reason="mypy is not installed (the tests extra)")
@pytest.mark.parametrize("mode", ["compat", "default"])
def test_mypy_sees_the_signatures_through_the_readme_s_editable_install(mode: str, tmp_path: Path) -> None:
    settings = ["--config-settings", "editable_mode=compat"] if mode == "compat" else []
    python = editable_install(tmp_path / "venv", *settings)
    user = tmp_path / "user"
    user.mkdir()
    out = mypy_of_user_file(python, user)
    if mode == "compat":  # the README's install
        literal = "Literal['clip', 'spo', 'asymmetric_spo', 'hpo']"
        assert f'Argument "actor_loss" to "XPPO" has incompatible type "Literal[\'cilp\']"; expected "{literal}"' in out, out
        assert "-> sb3_xppo.xppo.xppo.XPPO" in out, out
    else:  # setuptools' default: an import hook that mypy does not run
        assert 'Revealed type is "Any"' in out and "Success: no issues found" in out, out
