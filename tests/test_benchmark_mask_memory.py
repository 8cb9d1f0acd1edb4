"""The masks-and-memory benchmark (benchmarks/mask_memory.py): a tiny campaign end to end, its cache and provenance, and
the published table rendered from the published report."""

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "benchmarks" / "results" / "campaigns" / "mask_memory"


@pytest.fixture(scope="module")
def mask_memory():
    import mask_memory  # benchmarks/ is on pytest's pythonpath

    return mask_memory


def test_tiny_campaign_end_to_end(mask_memory, tmp_path, capsys):
    args = ["--seeds", "0", "--budget", "512", "--n-evals", "2", "--eval-episodes", "2", "--final-episodes", "3"]
    args += ["--bootstrap-reps", "100", "--out-dir", str(tmp_path)]
    mask_memory.main(args)
    folder = tmp_path / "campaigns" / "mask_memory"
    cached = tmp_path / "runs" / "sb3_xppo" / "MemoryMaze-v0_512" / "mask_lstm" / "seed0.json"
    for name in ("report.json", "report.md", "plot.png", "table.md"):
        assert (folder / name).is_file(), name
    report = json.loads((folder / "report.json").read_text())
    rows = report["summary"]["contenders"]
    assert set(rows) == {"mask_lstm", "mask", "lstm"}
    assert all(row["seeds"] == [0] and len(row["final_iqm_ci"]) == 2 for row in rows.values())
    assert rows["mask_lstm"]["algorithm"].startswith("MaskableRecurrentXPPO")
    assert "3 runs current" in report["provenance"]["note"]
    # each run records the code that made it and its configuration's behavioural fingerprint
    run = json.loads(cached.read_text())
    assert run["algo"] == "MaskableRecurrentXPPO" and run["code"]["versions"]["sb3-contrib"]
    assert len(run["fingerprint"]) == 16 and len(run["eval_means"]) == 2 and len(run["final_returns"]) == 3
    assert (folder / "table.md").read_text() == mask_memory.table(report["summary"])

    # the cache: nothing runs again, the report is the same
    capsys.readouterr()
    mask_memory.main([*args, "--report-only"])
    assert "3 runs current" in capsys.readouterr().out
    assert json.loads((folder / "report.json").read_text())["summary"] == report["summary"]

    # a run whose fingerprint today's code would not give is stale: left out of the report
    run["fingerprint"] = "0" * 16
    cached.write_text(json.dumps(run))
    mask_memory.main([*args, "--report-only"])
    report = json.loads((folder / "report.json").read_text())
    assert set(report["summary"]["contenders"]) == {"mask", "lstm"}
    assert "1 stale" in report["provenance"]["note"]


@pytest.mark.skipif(not (PUBLISHED / "report.json").is_file(), reason="the campaign has not been run")
def test_published_table_is_the_reports(mask_memory):
    """docs/guide/contrib.md includes table.md: it is what the script renders from the published report."""
    report = json.loads((PUBLISHED / "report.json").read_text())
    assert (PUBLISHED / "table.md").read_text() == mask_memory.table(report["summary"])
    assert set(report["summary"]["contenders"]) == set(mask_memory.CONTENDERS)
    assert all(len(row["seeds"]) == 5 for row in report["summary"]["contenders"].values())
    assert os.path.isfile(PUBLISHED / "plot.png")


@pytest.mark.skipif(not (PUBLISHED / "report.json").is_file(), reason="the campaign has not been run")
def test_sequence_batching_contenders_leave_the_published_runs_keys(mask_memory):
    """The sequence-batching twins (issue 48) add keywords to their own runs only: the published runs keep their keys."""
    report = json.loads((PUBLISHED / "report.json").read_text())
    args = report["args"]
    budget = (args["budget"], args["n_evals"], args["eval_episodes"], args["final_episodes"])
    for run in report["runs"]:
        assert run["key"] == mask_memory.task_key(run["contender"], run["seed"], *budget)
    assert mask_memory.task_key("mask_lstm_seq", 0, *budget) != mask_memory.task_key("mask_lstm", 0, *budget)
    for name in mask_memory.SEQUENCE_CONTENDERS:
        model = mask_memory.build(name, 0)
        assert model.options.sequence_batching is True and name not in mask_memory.CONTENDERS
    assert mask_memory.build("mask_lstm", 0).options.sequence_batching is False


SEQUENCES = ROOT / "benchmarks" / "results" / "campaigns" / "mask_memory_sequences"


@pytest.mark.skipif(not (SEQUENCES / "report.json").is_file(), reason="the campaign has not been run")
def test_the_sequence_batching_report_cites_runs_of_the_run_cache(mask_memory):
    """The twins' report declares its kind and names runs that the run cache holds under their keys."""
    report = json.loads((SEQUENCES / "report.json").read_text())
    assert report["kind"] == "sequence-batching"
    args = report["args"]
    budget = (args["budget"], args["n_evals"], args["eval_episodes"], args["final_episodes"])
    for run in report["runs"]:
        task = dict(contender=run["contender"], seed=run["seed"], budget=args["budget"], key=run["key"])
        assert run["key"] == mask_memory.task_key(run["contender"], run["seed"], *budget)
        cached = mask_memory.load_run(task, str(ROOT / "benchmarks" / "results"))
        assert cached is not None and cached["file"] == run["file"], run
