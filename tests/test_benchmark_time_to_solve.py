"""
The main job's time to solve (benchmarks/time_to_solve.py) and the paired ratios every speed figure quotes
(benchmarks/harness/paired.py): the median and its interval by hand, the solving evaluation read from the file a run
writes, a run stopped once it solves, and the pairs of a benchmark.
"""

from __future__ import annotations

import statistics
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import time_to_solve
from harness.paired import MIN_PAIRS, enough_pairs, pace, paired_ratio


def test_the_median_ratio_its_interval_and_its_pace():
    found = paired_ratio([1.267, 1.289, 0.818])
    assert found["median"] == 1.267 and found["pairs"] == [1.267, 1.289, 0.818]
    low, high = found["interval"]
    assert 0.818 <= low <= 1.267 <= high <= 1.289  # a bootstrap median lies among the pairs
    assert pace(found) == "level"  # one pair goes the other way: the interval reaches below 1
    assert pace(paired_ratio([1.3, 1.25, 1.4, 1.31, 1.28])) == "faster"
    assert pace(paired_ratio([0.7, 0.8, 0.75, 0.9, 0.85])) == "slower"
    assert paired_ratio([1.5]) == {"median": 1.5, "interval": [1.5, 1.5], "pairs": [1.5]}
    with pytest.raises(ValueError, match="at least one pair"):
        paired_ratio([])


def test_the_bootstrap_is_the_plain_loop_s():
    """The interval against a plain resampling loop: the same percentiles of the medians of resampled pairs."""
    ratios = [1.1, 1.4, 0.9, 1.25, 1.3, 1.05, 1.2]
    rng = np.random.default_rng(1)
    medians = [statistics.median(rng.choice(ratios, len(ratios))) for _ in range(4000)]
    low, high = np.percentile(medians, [2.5, 97.5])
    found = paired_ratio(ratios, reps=4000)["interval"]
    assert found[0] == pytest.approx(low, abs=0.051) and found[1] == pytest.approx(high, abs=0.051)


def test_enough_pairs_for_short_and_long_runs():
    assert MIN_PAIRS == {"long": 5, "short": 9}
    assert enough_pairs(paired_ratio([1.0] * 5), seconds=300) and not enough_pairs(paired_ratio([1.0] * 5), seconds=10)
    assert not enough_pairs(paired_ratio([1.0] * 3), seconds=300)


def write_evaluations(folder: Path, means: list[float]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    results = np.array([[m - 1, m + 1] for m in means])
    np.savez(folder / "evaluations.npz", timesteps=np.arange(1, len(means) + 1) * 1000, results=results)


def test_the_first_solving_evaluation_is_read(tmp_path):
    assert time_to_solve.first_solved(str(tmp_path), 200) is None
    write_evaluations(tmp_path / "xppo" / "LunarLander-v3_1", [-100, 150, 210, 190, 250])
    assert time_to_solve.first_solved(str(tmp_path), 200) == 3000
    assert time_to_solve.first_solved(str(tmp_path), 300) is None
    (tmp_path / "xppo" / "LunarLander-v3_1" / "evaluations.npz").write_bytes(b"PK\x03\x04 half written")
    assert time_to_solve.first_solved(str(tmp_path), 200) is None  # (read again at the next poll)


#: A stand-in for a training command: writes its evaluations into ``-f``'s folder, then would run on for a minute
FAKE_TRAINER = """
    import sys, time
    from pathlib import Path
    import numpy as np

    folder = Path(sys.argv[sys.argv.index("-f") + 1]) / "algo" / "Env_1"
    folder.mkdir(parents=True)
    means = [float(m) for m in sys.argv[sys.argv.index("--means") + 1].split(",")]
    for i in range(1, len(means) + 1):
        time.sleep(0.3)
        np.savez(folder / "evaluations.npz", timesteps=np.arange(1, i + 1) * 1000, results=np.array(means[:i])[:, None])
    if "--forever" in sys.argv:
        time.sleep(60)
"""


@pytest.fixture
def fake_commands(tmp_path, monkeypatch):
    (tmp_path / "fake_trainer.py").write_text(textwrap.dedent(FAKE_TRAINER))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(time_to_solve, "COMMANDS", {"XPPO": ("fake_trainer", []), "PPO": ("fake_trainer", [])})


def test_a_run_is_stopped_once_it_solves(fake_commands):
    start = time.perf_counter()
    run = time_to_solve.run_command("XPPO", "Env", 3, 200, ["--means", "100,250,260", "--forever"])
    assert run["solved"] and run["steps"] == 2000 and run["seed"] == 3
    assert 0.5 < run["seconds"] < 20 and time.perf_counter() - start < 30  # (not the minute it would have run)
    assert run["command"].startswith("python -m fake_trainer --env Env --seed 3 -f <scratch>")
    unsolved = time_to_solve.run_command("PPO", "Env", 3, 200, ["--means", "100,150"])
    assert not unsolved["solved"] and unsolved["steps"] is None


def test_the_pairs_of_a_benchmark(monkeypatch):
    seconds = {("XPPO", 20): 60.0, ("PPO", 20): 240.0, ("XPPO", 21): 100.0, ("PPO", 21): 80.0}
    order = []

    def fake_run(name, env_id, seed, threshold, extra):
        order.append((seed, name))
        return dict(name=name, seed=seed, seconds=seconds[name, seed], steps=1000, solved=True, command="")

    monkeypatch.setattr(time_to_solve, "run_command", fake_run)
    row = time_to_solve.benchmark("Env", [20, 21], 200.0, [])
    assert order == [(20, "XPPO"), (20, "PPO"), (21, "PPO"), (21, "XPPO")]  # the order alternates
    assert [pair["ratio"] for pair in row["pairs"]] == [4.0, 0.8] and row["ratio"]["median"] == pytest.approx(2.4)
    assert row["pace"] == "level" and row["solved"] == {"XPPO": 2, "PPO": 2}
    assert row["median_seconds"] == {"XPPO": 80.0, "PPO": 160.0}


def test_seeds_must_differ():
    with pytest.raises(SystemExit):
        time_to_solve.main(["--seeds", "1", "1"])
    assert sys.executable  # (the commands run with this interpreter)


# --- the pages: a quoted ratio carries its interval, and enough pairs -------------------------------------------------


def test_a_page_quotes_no_ratio_without_its_pairs_and_interval():
    from harness.regions.figures import ratio_with_spread

    nine = paired_ratio([1.3, 1.2, 1.25, 1.28, 1.31, 1.22, 1.27, 1.26, 1.3])
    assert ratio_with_spread(nine, seconds=2.0) == f"1.27x [{nine['interval'][0]:.2f}, {nine['interval'][1]:.2f}]"
    with pytest.raises(ValueError, match="needs 9 pairs, this one has 3"):
        ratio_with_spread(paired_ratio([1.267, 1.289, 0.818]), seconds=2.0)  # (the front's old CartPole figure)
    with pytest.raises(ValueError, match="needs 5 pairs, this one has 3"):
        ratio_with_spread(paired_ratio([1.22, 1.27, 0.94]), seconds=300.0)  # (the main job's old command figure)
    with pytest.raises(ValueError, match="needs its pairs and its interval"):
        ratio_with_spread({"median": 1.22}, seconds=300.0)
    with pytest.raises(ValueError, match="needs its pairs and its interval"):
        ratio_with_spread(None, seconds=300.0)


def test_the_region_and_the_front_lead_with_the_time_to_solve(tmp_path, monkeypatch):
    from harness.regions import results, summary
    from harness.regions import time_to_solve as region

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    page = results.ROOT / "docs" / "guide" / "benchmarks.md"
    assert region.render_time_to_solve(page).startswith("Pending")

    def run(name, seconds, steps):
        command = {"XPPO": "python -m sb3_xppo.train", "PPO": "python -m rl_zoo3.train --algo ppo"}[name]
        return dict(name=name, command=f"{command} --env LunarLander-v3 --seed 20", seconds=seconds, steps=steps, solved=True)

    pairs = [
        dict(seed=20 + i, ratio=p / x, runs=dict(XPPO=run("XPPO", x, 100_000), PPO=run("PPO", p, 400_000)))
        for i, (x, p) in enumerate([(60, 120), (30, 120), (40, 100), (50, 150), (45, 90)])
    ]
    ratio = paired_ratio([pair["ratio"] for pair in pairs])
    data = dict(
        env="LunarLander-v3",
        threshold=200.0,
        seeds=[20, 21, 22, 23, 24],
        pairs=pairs,
        ratio=ratio,
        pace=pace(ratio),
        median_seconds=dict(XPPO=45.0, PPO=120.0),
    )
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "time_to_solve.json").write_text(__import__("json").dumps(data))
    text = region.render_time_to_solve(page)
    assert "| 21 | 0.5 min (100k steps) | 2.0 min (400k steps) | 4.00x |" in text
    assert "`python -m sb3_xppo.train` against `python -m rl_zoo3.train --algo ppo`" in text
    low, high = ratio["interval"]
    claim = (
        "reached 200 on LunarLander-v3 in a median 0.8 min of wall-clock time against 2.0 min for rl-zoo3's PPO: PPO's "
        f"time over XPPO's 2.50x [{low:.2f}, {high:.2f}] (faster: the median of 5 paired seeds, 20-24, with its 95% interval)"
    )
    assert claim in text
    front = summary.render_front(results.ROOT / "README.md")
    assert front.startswith(f"- **In less time.** The main job, `python -m sb3_xppo.train`, {claim} ([evidence](")
