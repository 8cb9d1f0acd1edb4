"""
The SPO depth campaign's machinery (issue 56): Walker2d-v5's zoo entry, the ``@net_arch`` override, the train logs a
run records (without changing any cached run's key), their summary, and the region that renders the campaign.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import harness.regions.summary
import harness.runs
import harness.zoo
import learning
import numpy as np
import pytest
import rl_zoo3
import torch as th
import yaml
from harness import train_logs
from harness.contenders import Contender, deepened, parse_contender
from harness.layout import RESULTS
from harness.regions import results, spo_depth
from harness.regions.figures import rank_side, seed_robust_verdict
from harness.runs import Task, build_run, run_task
from harness.train_logs import TrainLogs

DEEP = "xppo@actor_loss='clip'@depth=7"


def test_walker2d_v5_is_rl_zoo3s_walker2d_v4_entry():
    with open(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml")) as f:
        zoo = yaml.safe_load(f)["Walker2d-v4"]
    ours = harness.zoo.zoo_entry_of(None, "Walker2d-v5")
    assert {k: v for k, v in ours.items() if k != "n_timesteps"} == {k: v for k, v in zoo.items() if k != "n_timesteps"}
    assert harness.zoo.zoo_budget("Walker2d-v5") == 1_000_000 and "policy_kwargs" not in ours


@pytest.mark.parametrize("env_id, width, activation", [("Hopper-v5", 256, th.nn.ReLU), ("Walker2d-v5", 64, th.nn.Tanh)])
def test_depth_override_makes_both_networks_deep_at_the_entrys_width(tmp_path, env_id, width, activation):
    task = Task(env_id, 64, parse_contender(DEEP), 0, 1, 1, 1, 0.2)
    model, env, eval_env, _, hyperparams, _ = build_run(task, str(tmp_path))
    extractor = model.policy.mlp_extractor
    for net in (extractor.policy_net, extractor.value_net):
        assert [m.out_features for m in net if isinstance(m, th.nn.Linear)] == [width] * 7
        assert all(isinstance(m, activation) for m in net if not isinstance(m, th.nn.Linear))
    if env_id == "Hopper-v5":  # the entry's other policy keywords kept
        assert hyperparams["policy_kwargs"]["log_std_init"] == -2 and hyperparams["policy_kwargs"]["ortho_init"] is False
    assert env.get_attr("spec")[0].id == env_id and model.options.actor_loss == "clip"
    env.close()
    eval_env.close()


def test_deepened_net_arch():
    assert deepened(None, 3) == dict(pi=[64] * 3, vf=[64] * 3)  # SB3's default MLP
    assert deepened([32, 32], 2) == dict(pi=[32, 32], vf=[32, 32])
    assert deepened(dict(pi=[256, 256], vf=[128, 128]), 4) == dict(pi=[256] * 4, vf=[128] * 4)
    with pytest.raises(ValueError, match="one width"):
        deepened([64, 32], 7)
    with pytest.raises(ValueError, match="one width"):
        deepened(dict(pi=[64]), 7)


@pytest.mark.parametrize("override", ["@depth=0", "@depth=2.5", "@depth='7'"])
def test_bad_depth(override):
    with pytest.raises(ValueError, match="number of hidden layers"):
        parse_contender(f"xppo{override}")


def test_cached_runs_keep_their_keys():
    # Recording train logs changed what a run writes, not its configuration: a committed run is still found
    path = Path(RESULTS) / "runs" / "Hopper-v5_1000000" / "ppo" / "seed0.json"
    run = json.loads(path.read_text())
    task = Task("Hopper-v5", 1_000_000, parse_contender("ppo"), 0, 20, 10, 20, 0.2)
    assert task.key() == run["key"] and harness.runs.load_cached(task, RESULTS)["file"].endswith("ppo/seed0.json")


def test_train_logs_are_averaged_over_equal_spans_of_the_budget():
    logs = TrainLogs()
    values = {100: 1.0, 250: 3.0, 500: 5.0, 600: 7.0, 1000: 9.0, 1100: 11.0}
    logs.calls = [(t, {"train/ratio_deviation": v, "train/clip_fraction": v / 10}) for t, v in values.items()]
    record = logs.record(1000, points=5)
    # spans of 200 steps: (0, 200] holds 100, (200, 400] 250, (400, 600] 500 and 600, (800, 1000] 1000 and the overshoot
    assert record["steps"] == [200, 400, 600, 800, 1000]
    assert record["train/ratio_deviation"] == [1.0, 3.0, 6.0, None, 10.0]
    assert record["train/clip_fraction"] == pytest.approx([0.1, 0.3, 0.6, None, 1.0])
    assert record["train/approx_kl"] == [None] * 5  # not logged


def test_a_run_records_the_ratio_over_training():
    def logs(name: str) -> dict:
        return run_task(Task("CartPole-v1", 64, parse_contender(name), 0, 1, 1, 1, 0.2))["train_logs"]

    xppo, ppo = logs("xppo@n_steps=16@n_epochs=1@actor_loss='spo'"), logs("ppo@n_steps=16@n_epochs=1")
    # 8 envs x 16 steps: one rollout of 128 steps, one train() call, recorded in the last of 100 spans of 0.64 steps
    assert len(xppo["steps"]) == train_logs.TRAIN_LOG_POINTS and xppo["steps"][-1] == 64
    assert [v is not None for v in xppo["train/ratio_deviation"]] == [False] * 99 + [True]
    # (the zoo's linear clip schedule has passed 0: the rollout overshoots the budget)
    assert xppo["train/clip_range"][-1] is not None and 0 <= xppo["train/clip_fraction"][-1] <= 1
    assert ppo["train/ratio_deviation"] == [None] * 100 and ppo["train/clip_fraction"][-1] is not None  # SB3's PPO


def _run(seed: int, deviations: list[float], name: str = "a", env: str = "Hopper-v5") -> dict:
    steps = [50_000 * (i + 1) for i in range(len(deviations))]
    logs = {
        "steps": steps,
        "train/ratio_deviation": deviations,
        "train/clip_fraction": [None if d is None else d / 2 for d in deviations],
    }
    logs |= {"train/approx_kl": [None] * len(steps), "train/clip_range": [0.2] * len(steps)}
    return dict(env=env, contender=name, seed=seed, train_logs=logs)


def test_the_summary_of_train_logs_by_hand():
    runs = [_run(1, [0.1, 0.3, 0.5, 0.7]), _run(0, [0.2, 0.2, 0.2, None]), dict(env="Hopper-v5", contender="a", seed=2)]
    row = train_logs.summarize(runs, [Contender("a", "xppo")])["Hopper-v5"]["a"]
    assert row["seeds"] == [0, 1] and row["window"] == 100_000
    deviation = row["ratio_deviation"]
    # seed 0: run 0.2, first 100k (two points) 0.2; seed 1: run 0.4, first 100k 0.2
    assert deviation["run_per_seed"] == pytest.approx([0.2, 0.4]) and deviation["early_per_seed"] == pytest.approx([0.2, 0.2])
    assert deviation["run"] == pytest.approx(0.3) and deviation["early"] == pytest.approx(0.2)
    assert deviation["curve"] == pytest.approx([0.15, 0.25, 0.35, 0.7])
    assert "approx_kl" not in row and row["clip_range"]["run"] == pytest.approx(0.2)
    assert train_logs.summarize([dict(env="Hopper-v5", contender="a", seed=0)], [Contender("a", "xppo")]) == {}


def test_the_plot_is_drawn(tmp_path):
    summary = train_logs.summarize([_run(0, [0.1, 0.3]), _run(0, [0.2, 0.4], "b")], [Contender(n, "xppo") for n in "ab"])
    train_logs.plot(summary, str(tmp_path / "p.png"), "title")
    assert (tmp_path / "p.png").stat().st_size > 0


# --- the region --------------------------------------------------------------------------------------------------------


def _row(iqm: float | list[float], n_seeds: int, spread: float = 10.0) -> dict:
    """A summary row: per seed ``iqm + spread * (seed - middle)`` (or the given finals), the curve at half of them."""
    finals = list(iqm) if isinstance(iqm, list) else [iqm + spread * (i - (n_seeds - 1) / 2) for i in range(n_seeds)]
    middle = float(np.median(finals))
    return dict(
        seeds=list(range(n_seeds)),
        final_per_seed=finals,
        final_iqm=middle,
        final_iqm_ci=[middle - spread, middle + spread],
        curve_per_seed=[v / 2 for v in finals],
        curve_iqm=middle / 2,
        curve_iqm_ci=[middle / 2 - spread, middle / 2 + spread],
    )


def _ratio(n_seeds: int, early: float, run: float, clip: float) -> dict:
    stat = dict(early=early, run=run)
    return dict(seeds=list(range(n_seeds)), ratio_deviation=stat, clip_fraction=stat, clip_range=dict(early=clip, run=clip))


def _write(root: Path, kind: str, n_seeds: int, finals: dict[str, Any], deviations: dict[str, float]) -> None:
    """A campaign of ``kind``: per env and loss ``n_seeds`` seeds, final IQM ``finals[loss]``, mean |r - 1| as given."""
    summary, logs = {}, {}
    for env_id in spo_depth.ENVS:
        clip = 0.2 if env_id == "Hopper-v5" else 0.1
        names = {loss: spo_depth.contender_of(kind, loss) for loss in spo_depth.LOSSES}
        summary[env_id] = dict(
            budget=1_000_000 if kind == spo_depth.DEEP else 100_000,
            threshold=None,
            contenders={names[loss]: _row(finals[loss], n_seeds) for loss in spo_depth.LOSSES},
        )
        logs[env_id] = {names[loss]: _ratio(n_seeds, deviations[loss], deviations[loss], clip) for loss in spo_depth.LOSSES}
    folder = root / "campaigns" / kind.replace("-", "_")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(dict(kind=kind, summary=summary, train_logs=logs)))


@pytest.fixture
def results_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    return tmp_path


def test_the_region_says_pending_with_no_report(results_in):
    page = results.ROOT / spo_depth.PAGE
    text = spo_depth.render_spo_depth(page)
    assert "0 of 20 runs at 7 hidden layers and 0 of 12 at the zoo's depth done; verdict pending." in text
    assert "*No env has runs of both losses" in text and "*No run has recorded" in text
    decision = harness.regions.summary.render_decision(page)
    pending = "pending: 0 of 20 runs at 7 hidden layers done; the paper's own setting: 0 of 45 runs done"
    assert f"{pending} ([evidence](xppo.md#when-spo-pays-the-ratio-statistics))" in decision


def test_partial_runs_are_shown_without_a_verdict(results_in):
    _write(results_in, spo_depth.DEEP, 2, dict(clip=1000.0, spo=2000.0), dict(clip=0.5, spo=0.05))
    text = spo_depth.render_spo_depth(results.ROOT / spo_depth.PAGE)
    assert "8 of 20 runs at 7 hidden layers and 0 of 12 at the zoo's depth done; verdict pending." in text
    assert "| Hopper-v5 (256 units, 1M) | 0, 1 / 0, 1 | 1000.0 [990.0, 1010.0] / 2000.0 [1990.0, 2010.0] |" in text
    assert text.count("| pending |") == 2  # two envs, no verdict before 5 seeds a side
    assert "| Walker2d-v5 | 7 x 64 | 1M | `clip` | 0, 1 | 0.500 | 0.500 | 0.500 / 0.500 | 0.10 |" in text
    assert "train_logs.png" in text and spo_depth.spo_claim() is None


@pytest.mark.parametrize(
    "finals, deep, zoo, answer",
    [
        # SPO ahead everywhere, PPO's ratio beyond its range and above the zoo depth's, SPO's within: the paper's claim
        (dict(clip=1000.0, spo=2000.0), dict(clip=0.5, spo=0.05), dict(clip=0.1, spo=0.05), "Reproduced: "),
        # the same ratios, returns level: the mechanism without the gain
        (dict(clip=1000.0, spo=1005.0), dict(clip=0.5, spo=0.05), dict(clip=0.1, spo=0.05), "Partly reproduced: "),
        # the gain without the mechanism: the answer names where SPO is ahead, and on which return
        (
            dict(clip=1000.0, spo=2000.0),
            dict(clip=0.05, spo=0.5),
            dict(clip=0.1, spo=0.05),
            "Partly reproduced: at 7 hidden layers SPO ahead of PPO's clip on Hopper-v5 (final and curve return), "
            "Walker2d-v5 (final and curve return); Hopper-v5: PPO's mean |r - 1| at depth 7 within its clip range over the "
            "run and not above the zoo depth's over the first 100k steps, SPO's beyond the range;",
        ),
        # nothing: returns level, PPO's ratio within its range and no deeper than at the zoo's depth, SPO's beyond
        (dict(clip=1000.0, spo=1005.0), dict(clip=0.05, spo=0.5), dict(clip=0.1, spo=0.05), "Not reproduced here: "),
    ],
)
def test_the_answer_once_every_run_is_in(results_in, finals, deep, zoo, answer):
    _write(results_in, spo_depth.DEEP, 5, finals, deep)
    _write(results_in, spo_depth.SHORT, 3, finals, zoo)
    text = spo_depth.render_spo_depth(results.ROOT / spo_depth.PAGE)
    assert f"**Answer:** {answer}" in text and "pending" not in text
    assert "| Hopper-v5 | 2 x 256 | 100k | `spo` | 0-2 |" in text
    claim = spo_depth.spo_claim()
    verdict = "ahead" if finals["spo"] > 1500 else "level"
    lead = (
        "pays at 7 hidden layers on Hopper-v5, Walker2d-v5"
        if verdict == "ahead"
        else "did not pay here, even at 7 hidden layers"
    )
    assert claim == (
        f"{lead}; against PPO's clip (1M steps, seeds 0-4): Hopper-v5: final {verdict}, curve {verdict}; "
        f"Walker2d-v5: final {verdict}, curve {verdict}"
    )
    assert claim in harness.regions.summary.render_decision(results.ROOT / spo_depth.PAGE)


#: Walker2d-v5's finals at 7 hidden layers, seeds 0-4 (the spo_depth campaign): SPO's lead rests on every seed
WALKER_FINALS = dict(clip=[514.86, 502.22, 805.85, 648.54, 800.35], spo=[3340.45, 1190.74, 1269.38, 756.63, 1133.96])


def test_one_seed_carrying_the_difference_is_inconclusive(results_in):
    """The verdict code given a seed set whose lead one seed carries: ahead with all five, level without seed 0."""
    _write(results_in, spo_depth.DEEP, 5, WALKER_FINALS, dict(clip=0.5, spo=0.05))
    _write(results_in, spo_depth.SHORT, 3, dict(clip=1000.0, spo=1000.0), dict(clip=0.1, spo=0.05))
    text = spo_depth.render_spo_depth(results.ROOT / spo_depth.PAGE)
    assert "**Answer:** Inconclusive at 1M steps: SPO is ahead of PPO's clip with every seed, but the lead does not " in text
    assert "on Hopper-v5's final and curve return (level without seed 0, 1, 2, 4)" in text
    assert "| inconclusive (p = 0.032), inconclusive (p = 0.032) |" in text
    claim = spo_depth.spo_claim()
    assert claim is not None and claim.startswith("inconclusive at 7 hidden layers and 1M steps (one seed carries")
    # the setups side by side: the paper's (its code) and the campaign's per env
    assert "| clip range | 0.2 | 0.2 | 0.1 |" in text and "| budget (steps) | 10M | 1M | 1M |" in text
    assert "| actor (hidden layers) | 256-256-128-128-64-64, Tanh | 7 x 256, ReLU | 7 x 64, Tanh |" in text


def exact_two_sided_p(values: list[float], base: list[float]) -> float:
    """Mann-Whitney's exact two-sided p by enumeration (a plain loop over every split of the pooled values)."""
    pooled = values + base

    def u(first: list[float], second: list[float]) -> float:
        return sum((a > b) + 0.5 * (a == b) for a in first for b in second)

    observed = u(values, base)
    centre = len(values) * len(base) / 2
    splits = list(itertools.combinations(range(len(pooled)), len(values)))
    extreme = 0
    for chosen in splits:
        first = [pooled[i] for i in chosen]
        second = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        extreme += abs(u(first, second) - centre) >= abs(observed - centre)
    return extreme / len(splits)


def test_the_rank_test_by_hand_and_by_a_plain_loop():
    # 5 seeds all above 5: U = 25, the most extreme of C(10, 5) = 252 splits on either side: p = 2 / 252
    side, p = rank_side([10, 11, 12, 13, 14], [1, 2, 3, 4, 5])
    assert side == "ahead" and p == pytest.approx(2 / 252)
    # without any one seed, 4 against 4: p = 2 / C(8, 4) = 2 / 70 < 0.05, so the lead holds
    found = seed_robust_verdict(dict(enumerate([10.0, 11, 12, 13, 14])), dict(enumerate([1.0, 2, 3, 4, 5])))
    assert found["verdict"] == "ahead" and set(found["without"].values()) == {"ahead"}
    assert found["difference"][0] == pytest.approx(9.0)  # IQMs: mean(11, 12, 13) - mean(2, 3, 4)
    assert rank_side([1, 2, 3, 4, 5], [10, 11, 12, 13, 14])[0] == "behind"
    for values, base in ((WALKER_FINALS["spo"], WALKER_FINALS["clip"]), ([1.0, 5, 2, 8], [3.0, 4, 6, 7, 9])):
        assert rank_side(values, base)[1] == pytest.approx(exact_two_sided_p(values, base))


def test_collapses_are_read_from_the_cited_runs(results_in):
    _write(results_in, spo_depth.DEEP, 5, dict(clip=1000.0, spo=2000.0), dict(clip=0.5, spo=0.05))
    report_path = results_in / "campaigns" / "spo_depth" / "report.json"
    report = json.loads(report_path.read_text())
    report["runs"] = []
    for loss, means in (("clip", [900.0, 100.0, 950.0]), ("spo", [900.0, 300.0, 950.0])):
        file = f"runs/{loss}.json"
        run = dict(eval_means=means, eval_steps=[100_000, 200_000, 300_000], seed=0, resumed_at=None)
        (results_in / "runs").mkdir(exist_ok=True)
        (results_in / file).write_text(json.dumps(run))
        report["runs"].append(dict(env="Hopper-v5", contender=spo_depth.contender_of(spo_depth.DEEP, loss), seed=0, file=file))
    report_path.write_text(json.dumps(report))
    text = spo_depth.render_spo_depth(results.ROOT / spo_depth.PAGE)
    # below a quarter of the best so far: clip's 100 after 900; spo's 300 is a third, no collapse
    assert "Hopper-v5: `clip` on seed 0 (900 at 100k to 100 at 200k, 950 at the end); Walker2d-v5: none." in text


def test_the_campaign_contenders_are_the_overrides_the_campaign_runs():
    assert parse_contender(spo_depth.contender_of(spo_depth.DEEP, "spo")).kwargs == dict(actor_loss="spo", depth=7)
    assert parse_contender(spo_depth.contender_of(spo_depth.SHORT, "clip")).kwargs == dict(actor_loss="clip")
    assert spo_depth.RUNS[spo_depth.DEEP] == 20 and spo_depth.RUNS[spo_depth.SHORT] == 12


def test_a_campaign_of_a_kind_reports_before_its_first_run(tmp_path):
    args = ["--envs", "Hopper-v5", "--contenders", "xppo@depth=7", "--seeds", "0", "--report-only", "--out-dir", str(tmp_path)]
    learning.main([*args, "--name", "plain"])
    assert not (tmp_path / "campaigns" / "plain").exists()  # no kind, nothing to say
    learning.main([*args, "--name", "deep", "--kind", "spo-depth", "--question", "q"])
    report = json.loads((tmp_path / "campaigns" / "deep" / "report.json").read_text())
    assert report["kind"] == "spo-depth" and report["summary"] == {} and report["runs"] == [] and "train_logs" not in report
    assert not (tmp_path / "campaigns" / "deep" / "plot.png").exists()
