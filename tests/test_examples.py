"""Every script in examples/ runs with --quick, in a fresh process, from a temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


def test_examples_are_found() -> None:
    assert "xppo_quickstart.py" in {path.name for path in EXAMPLES}


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.name)
def test_example_runs_quick(script: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, str(script), "--quick"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{script.name} --quick failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    assert result.stdout.strip(), f"{script.name} printed nothing"
