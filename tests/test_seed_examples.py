"""The user's original examples (``../shared/seed_examples.py``, beside the checkout) must run unchanged."""

import subprocess
import sys
from pathlib import Path

import pytest

SEED_EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "seed_examples.py"


@pytest.mark.skipif(not SEED_EXAMPLES.exists(), reason="../shared/seed_examples.py is not beside this checkout")
def test_seed_examples_pass():
    result = subprocess.run([sys.executable, str(SEED_EXAMPLES)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout
