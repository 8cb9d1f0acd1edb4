"""The env-only throughput benchmark (benchmarks/vec_env.py) and the page it renders: output end to end, the profile's
share of the env's own step and reset, and the verdict against the floor."""

import json
import os
import subprocess
import sys

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
    # CartPole's own step is a part of the lean run, never all of it: the vector env's loop and the wrappers take time
    assert 0.0 < results["profile_env_share"] < 1.0
    assert "cartpole.py" in results["profile"]
    assert set(results["code"]) == {"commit", "dirty", "versions"}


def test_the_page_renders_the_verdict_and_the_share(tmp_path, monkeypatch):
    from harness.regions import results, vec_env  # benchmarks/ is on pytest's pythonpath

    row = dict(env="LunarLander-v3", n_envs=16, best_steps_per_s=dict(sb3=100.0, dummy=230.0, lean=260.0),
               ratio_best=2.6, ratio_paired_median=2.55, floor_ratio=2.9, bit_exact=True, target=2.5,
               target_met=True)  # fmt: skip
    data = dict(reps=3, env_steps=1000, rows=[row], profile_env_share=0.875)
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    text = vec_env.render_vec_env_throughput(tmp_path / "page.md")
    assert "| LunarLander-v3 x16 | 100 | 230 | 260 | 2.55x (2.60x) | 2.90x | yes |" in text
    assert "Best of 3 repetitions of 1,000 env-steps each." in text
    assert "the lean env gives 2.55x SB3's env-steps/s (median paired)" in text and "at best 2.90x" in text
    assert "88% of the time is the env's own `step` and `reset`" in text and "the other 12%" in text
    # the target is the project's: the campaigns page's, not the user's
    assert "target" not in text
    targets = vec_env.render_speed_targets(tmp_path)
    assert "2.5x on LunarLander-v3 x16, is met: best 2.60x (median paired 2.55x), against a floor of at best 2.90x" in targets
    # the recorders' cost goes to the resume page, where the checkpoints' is
    from harness.regions import resume

    assert resume.recorder_cost() == ""  # (a file written before the recorders were measured)
    row.update(recorder_ratio_paired_median=0.968)
    data.update(command="python benchmarks/vec_env.py --profile")
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    assert "gives 0.968x on LunarLander-v3 x16 the env-steps/s it gives without them (median paired" in resume.recorder_cost()
    row.update(ratio_best=2.4, target_met=False)
    (tmp_path / "single" / "vec_env.json").write_text(json.dumps(data))
    assert "is missed: best 2.40x" in vec_env.render_speed_targets(tmp_path)
