"""The train() overhead benchmark (benchmarks/overhead.py): its arguments and its output, end to end."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "overhead.py")


def test_no_repetitions_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    import overhead  # benchmarks/ is on pytest's pythonpath

    out = tmp_path / "overhead.json"
    for flags, named in ((["--learn-reps", "0"], "--learn-reps"), (["--reps", "0"], "--reps")):
        monkeypatch.setattr(sys, "argv", [SCRIPT, *flags, "--out", str(out)])
        with pytest.raises(SystemExit) as refused:
            overhead.main()
        assert refused.value.code == 2 and f"{named} must be at least 1" in capsys.readouterr().err
        assert not out.exists()


def test_a_small_run_writes_its_ratios_and_the_code_that_made_them(tmp_path):
    out = tmp_path / "overhead.json"
    command = [sys.executable, SCRIPT, "--n-steps", "64", "--batch-size", "32", "--n-epochs", "1", "--reps", "2",
               "--learn-steps", "0", "--no-contrib", "--only", "hpo", "--out", str(out)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    results = json.loads(out.read_text())
    rows = {row["variant"]: row for row in results["rows"]}
    assert {"PPO", "XPPO clip"} <= set(rows) and any("hpo" in name for name in rows)
    assert rows["PPO"]["ratio"] == 1.0 and all(row["min_ms"] > 0 for row in rows.values())
    # every repetition's ratio to PPO's, and the median's interval
    assert rows["PPO"]["paired_spread"]["pairs"] == [1.0, 1.0]
    spread = rows["XPPO clip"]["paired_spread"]
    assert len(spread["pairs"]) == 2 and spread["median"] == rows["XPPO clip"]["paired_ratio"]
    assert set(results["code"]) == {"commit", "dirty", "versions"}
