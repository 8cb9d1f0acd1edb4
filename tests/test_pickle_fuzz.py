"""
The safe loader's pickle machine under a fuzzer (tests/pickle_fuzz.py): streams built by hypothesis from the
standard opcodes and from the allowlist's globals (and globals that would run code) never run code, never crash the
interpreter, and stay within bounded time and memory. It runs in a process of its own, so that a crash is seen as its
exit status. ``SB3_XPPO_FUZZ_EXAMPLES`` sets its size (CI: 500); ``python tests/pickle_fuzz.py --examples 20000``
runs it longer (about 45 s).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def fuzz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HERE / "pickle_fuzz.py"), *args], capture_output=True, text=True, timeout=170, cwd=HERE
    )


def test_fuzzed_pickles_never_run_code_nor_crash():
    examples = os.environ.get("SB3_XPPO_FUZZ_EXAMPLES", "500")
    done = fuzz("--examples", examples, "--seed", "0")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # (-11: a segfault; 1: a failing stream)
    assert f"{examples} streams loaded, no code ran, no crash" in done.stdout


def test_the_fuzzer_finds_code_when_it_runs():
    """Negative control: the same streams loaded with ``pickle.loads`` run their commands, and the fuzzer says so."""
    done = fuzz("--examples", "2000", "--seed", "0", "--unsafe")
    assert done.returncode == 1 and "code ran:" in done.stdout + done.stderr
