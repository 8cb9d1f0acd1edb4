"""The env-only throughput benchmark (benchmarks/vec_env.py) and the page it renders: output end to end, the profile's
share of the env's own step and reset, and the verdict against the floor."""

import json
import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
SCRIPT = os.path.join(BENCHMARKS, "vec_env.py")


def test_a_small_run_writes_its_rows_profile_share_and_code(tmp_path):
    out = tmp_path / "vec_env.json"
    command = [sys.executable, SCRIPT, "--envs", "CartPole-v1:2", "--env-steps", "200", "--reps", "2",
               "--check-steps", "20", "--profile", "--out", str(out)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    results = json.loads(out.read_text())
    (row,) = results["rows"]
    assert (row["env"], row["n_envs"], row["bit_exact"]) == ("CartPole-v1", 2, True)
    assert set(row["best_steps_per_s"]) == {"sb3", "dummy", "lean", "unrecorded", "bare"}
    assert row["ratio_best"] > 0 and row["floor_ratio"] > 0 and row["render_mode_ratio"] > 0
    assert row["recorder_ratio"] > 0 and row["recorder_ratio_paired_median"] > 0
    for key in ("ratio_paired_spread", "floor_spread", "render_mode_spread", "recorder_spread"):
        assert len(row[key]["pairs"]) == 2 and row[key]["interval"][0] <= row[key]["median"] <= row[key]["interval"][1]
    assert row["recorder_spread"]["median"] == row["recorder_ratio_paired_median"]
    # CartPole's own step is a part of the lean run, never all of it: the vector env's loop and the wrappers take time
    assert 0.0 < results["profile_env_share"] < 1.0
    assert "cartpole.py" in results["profile"]
    assert set(results["code"]) == {"commit", "dirty", "versions"}


def test_the_page_renders_the_verdict_and_the_share(tmp_path, monkeypatch):
    from harness.regions import results, vec_env  # benchmarks/ is on pytest's pythonpath

    def spread(median, low, high):
        return dict(median=median, interval=[low, high], pairs=[median] * 9)

    row = dict(env="LunarLander-v3", n_envs=16, best_steps_per_s=dict(sb3=100.0, dummy=230.0, lean=260.0),
               ratio_best=2.6, ratio_paired_median=2.55, ratio_paired_spread=spread(2.55, 2.5, 2.6),
               floor_ratio=2.9, floor_spread=spread(2.9, 2.85, 2.95), seconds_median=1.0, bit_exact=True, target=2.5,
               target_met=True)  # fmt: skip
    data = dict(reps=9, env_steps=1000, rows=[row], profile_env_share=0.875)
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    text = vec_env.render_vec_env_throughput(tmp_path / "page.md")
    assert "| LunarLander-v3 x16 | 100 | 230 | 260 | 2.55x [2.50, 2.60] | 2.90x [2.85, 2.95] | yes |" in text
    assert "9 repetitions of 1,000 env-steps each: env-steps/s of the best" in text
    assert "the lean env gives 2.55x [2.50, 2.60] SB3's env-steps/s" in text and "give 2.90x [2.85, 2.95]" in text
    assert "88% of the time is the env's own `step` and `reset`" in text and "the other 12%" in text
    # the target is the project's: the campaigns page's, not the user's
    assert "target" not in text
    targets = vec_env.render_speed_targets(tmp_path)
    assert (
        "2.5x on LunarLander-v3 x16, is met: 2.55x [2.50, 2.60] (median paired with its 95% interval), against a "
        "floor of 2.90x [2.85, 2.95]" in targets
    )
    # the recorders' cost goes to the resume page, where the checkpoints' is
    from harness.regions import resume

    assert resume.recorder_cost() == ""  # (a file written before the recorders were measured)
    row.update(recorder_ratio_paired_median=0.968, recorder_spread=spread(0.968, 0.95, 0.99))
    data.update(command="python benchmarks/vec_env.py --profile")
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    said = "gives 0.97x [0.95, 0.99] on LunarLander-v3 x16 the env-steps/s it gives without them (median paired with"
    assert said in resume.recorder_cost()
    row.update(ratio_best=2.4, target_met=False)
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    assert "is missed: 2.55x [2.50, 2.60]" in vec_env.render_speed_targets(tmp_path)
    # a ratio quoted without its interval, or on fewer pairs than runs of seconds need, fails the rendering
    del row["ratio_paired_spread"]
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="needs its pairs and its interval"):
        vec_env.render_vec_env_throughput(tmp_path / "page.md")
    row.update(ratio_paired_spread=dict(spread(2.55, 2.5, 2.6), pairs=[2.55] * 5))
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="needs 9 pairs, this one has 5"):
        vec_env.render_vec_env_throughput(tmp_path / "page.md")
