"""The data-parallel benchmarks: benchmarks/distributed.py end to end, a campaign contender on ranks (``@ranks=N``)
and the regions of docs/guide/distributed.md."""

import json
import os
import subprocess
import sys

import harness.contenders
import harness.runs
import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def test_the_ranks_override_is_parsed_and_checked():
    assert harness.contenders.parse_contender("xppo@ranks=2").kwargs == {"ranks": 2}
    for bad in ("xppo@ranks=0", "xppo@ranks=1.5", "xppo@ranks='2'"):
        with pytest.raises(ValueError, match="ranks is a number of processes >= 1"):
            harness.contenders.parse_contender(bad)


def test_a_rank_takes_its_part_of_the_entry(tmp_path):
    """Outside the launcher (the provenance fingerprint), ``@ranks=2`` builds rank 0's model alone."""
    task = harness.runs.Task("CartPole-v1", 256, harness.contenders.parse_contender("xppo@ranks=2"), 0, 1, 1, 1, 0.2)
    model, env, eval_env, _, _, entry = harness.runs.build_run(task, str(tmp_path))
    assert (entry["n_envs"], entry["batch_size"]) == (8, 256)  # rl-zoo3's CartPole-v1 entry
    assert env.num_envs == 4 and model.batch_size == 128 and model.options.distributed is False
    env.close()
    eval_env.close()


@pytest.mark.slow
def test_a_campaign_run_on_two_ranks(tmp_path):
    """One run through the launcher: rank 0's record, with the evaluations at the global step counts."""
    task = harness.runs.Task("CartPole-v1", 1024, harness.contenders.parse_contender("xppo@ranks=2"), 0, 2, 2, 2, 0.2)
    run = harness.runs.run_task(task)
    assert run["eval_steps"] == [512, 1024] and len(run["final_returns"]) == 2
    assert run["fingerprint"] and run["code"]["versions"]


@pytest.mark.slow
def test_the_speed_benchmark_writes_the_contenders_asked_for(tmp_path):
    out = tmp_path / "distributed.json"
    command = [sys.executable, os.path.join(BENCHMARKS, "distributed.py"), "--env", "CartPole-v1", "--steps", "512"]
    # (a subset: the baseline comes first whatever the order asked)
    chosen = ["--contenders", "2 ranks", "one rank's share alone"]
    subprocess.run([*command, "--reps", "1", *chosen, "--out", str(out)], check=True, capture_output=True, timeout=300)
    data = json.loads(out.read_text())
    names = [row["name"] for row in data["rows"]]
    assert names == ["1 process", "2 ranks", "one rank's share alone"]
    rows = {row["name"]: row for row in data["rows"]}
    assert rows["1 process"]["ratio_paired"] == 1.0 and rows["1 process"]["ratio_paired_spread"]["pairs"] == [1.0]
    assert (rows["2 ranks"]["n_envs_per_rank"], rows["2 ranks"]["batch_size_per_rank"]) == (4, 128)
    assert data["target"]["contender"] == "2 ranks" and set(data["code"]) == {"commit", "dirty", "versions"}


def test_an_unknown_contender_is_refused_before_any_run(capsys):
    import distributed  # benchmarks/ is on pytest's pythonpath

    with pytest.raises(SystemExit) as refused:
        distributed.main(["--contenders", "3 ranks"])
    assert refused.value.code == 2 and "invalid choice: '3 ranks'" in capsys.readouterr().err


def test_the_pages_render_the_speed_and_the_learning(tmp_path, monkeypatch):
    from harness.regions import distributed, results

    row = dict(name="2 ranks", ranks=2, split=2, vec_env="lean", n_envs_per_rank=8, batch_size_per_rank=32,
               steps_per_second_best=5000.0, steps_per_second_median=4900.0, ratio_paired=0.7, seconds_median=6.0,
               ratio_paired_spread=dict(median=0.7, interval=[0.65, 0.75], pairs=[0.7] * 9))  # fmt: skip
    base = dict(row, name="1 process", ranks=1, split=1, n_envs_per_rank=16, batch_size_per_rank=64, ratio_paired=1.0,
                ratio_paired_spread=dict(median=1.0, interval=[1.0, 1.0], pairs=[1.0] * 9))  # fmt: skip
    data = dict(
        env="LunarLander-v3",
        steps=32768,
        reps=3,
        rows=[base, row],
        target=dict(contender="2 ranks", against="1 process", ratio=1.6, met=False),
    )
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "distributed.json").write_text(json.dumps(data))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    text = distributed.render_distributed_speed(tmp_path / "page.md")
    assert "| 2 ranks | 8 x 32 | 4,900 (5,000) | 0.70x [0.65, 0.75] |" in text
    target = distributed.render_distributed_target(tmp_path / "page.md")
    assert "is **missed**: 0.70x [0.65, 0.75] median paired with its 95% interval" in target
    assert distributed.render_distributed_learning(tmp_path / "page.md").startswith("Pending")


def test_run_all_reruns_the_stale_runs_once(tmp_path):
    """``--stale rerun``: a cached run whose key is in ``rerun`` runs again, once; the others stay cached."""
    tasks = [
        harness.runs.Task("CartPole-v1", 64, harness.contenders.parse_contender("ppo"), seed, 1, 1, 1, 0.2) for seed in (0, 1)
    ]
    ran = []

    def runner(task):
        ran.append(task.seed)
        return dict(key=task.key(), final_mean=0.0, steps_to_threshold=None, learn_seconds=0.0)

    harness.runs.run_all(tasks, str(tmp_path), 1, None, runner=runner)
    assert ran == [0, 1]
    harness.runs.run_all(tasks, str(tmp_path), 1, None, runner=runner, rerun=frozenset({tasks[1].key()}))
    assert ran == [0, 1, 1]
