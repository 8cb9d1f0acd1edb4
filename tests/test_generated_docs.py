"""
Every quoted benchmark result is generated (benchmarks/render_docs.py): the regions of README.md and docs/ are what
the result files render to, and every quoted ``x [low, high]`` interval is one a result file holds. Reads the
committed JSON only: nothing trains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import render_docs
from harness.regions import dagger, figures, learning, results, speed, summary, vec_env
from harness.regions import multi_critic as mc
from helpers import ROOT


def test_every_region_is_what_its_result_files_render() -> None:
    assert render_docs.stale_regions() == [], "run: python benchmarks/render_docs.py"


def test_every_quoted_interval_is_held_by_a_result_file() -> None:
    assert render_docs.unheld_intervals() == []


def test_the_pages_hold_the_regions() -> None:
    regions = {
        page.relative_to(ROOT).as_posix(): render_docs.REGION.findall(page.read_text(encoding="utf-8"))
        for page in render_docs.PAGES
    }
    names = {page: {match[1] for match in found} for page, found in regions.items()}
    assert {"front", "headline"} <= names["README.md"]
    assert {"headline", "recommended", "zoo-entries", "speed", "dagger"} <= names["docs/guide/benchmarks.md"]
    assert {"campaigns", "defaults", "screens", "speed-targets"} <= names["docs/guide/campaigns.md"]
    assert names["docs/guide/vec_env.md"] >= {"vec-env-backends", "vec-env-speed", "train-cli"}
    assert "front" in names["docs/index.md"]
    assert "decision" in names["docs/guide/xppo.md"]
    assert "multi-critic-match" in names["docs/guide/multi_critic.md"]
    used = set().union(*names.values())
    assert used == set(render_docs.RENDERERS), "a renderer no page uses, or a region no renderer writes"


def test_the_benchmarks_page_answers_first_and_stays_short() -> None:
    text = (ROOT / "docs" / "guide" / "benchmarks.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 25_000
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    questions = [h for h in headings if h.endswith("?")]
    assert len(questions) >= 5 and headings.index("Method") > headings.index(questions[-1])
    assert headings[-1] == "Glossary"


def test_a_wrong_or_rounded_interval_is_caught(tmp_path: Path) -> None:
    """The scan's negative control: the issue's two misquotes are flagged, the file's own figures are not."""
    results = tmp_path / "results"
    (results / "c").mkdir(parents=True)
    row = dict(final_iqm=267.71, final_iqm_ci=[263.04, 270.98], curve_iqm=211.7, curve_iqm_ci=[207.5, 217.8])
    (results / "c" / "report.json").write_text(json.dumps(dict(summary=dict(env=dict(contenders=dict(ppo=row))))))
    page = tmp_path / "page.md"
    page.write_text(
        "PPO: 267.7 [263.0, 271.0], not 267.7 [263.0, 270.6]; the curve 211.7 [207.5, 217.8], not 212 [208, 218]\n"
    )
    found = render_docs.unheld_intervals((page,), results)
    assert [where.rsplit(": ", 1)[1] for where in found] == ["267.7 [263.0, 270.6]", "212 [208, 218]"]


def test_a_region_renders_from_its_file_and_stale_text_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    text = "intro\n<!-- generated:multi-critic-match -->\nold\n<!-- /generated -->\noutro\n"
    rendered = render_docs.render_page(page, text)
    assert "old" not in rendered and rendered.startswith("intro\n<!-- generated:multi-critic-match -->\n")
    assert rendered.endswith("<!-- /generated -->\noutro\n") and render_docs.render_page(page, rendered) == rendered
    # with no report on the faithful env, the must-match region is the pending note
    monkeypatch.setattr(mc, "faithful_lunar_campaign", lambda: None)
    assert mc.PENDING_MATCH in render_docs.render_page(page, text)
    with pytest.raises(ValueError, match="unknown region 'nope'"):
        render_docs.render_page(page, "<!-- generated:nope -->\n<!-- /generated -->")


def test_verdicts_need_apart_cis() -> None:
    base = dict(final_iqm=10.0, final_iqm_ci=[8.0, 12.0])
    assert figures.verdict(dict(final_iqm=14.0, final_iqm_ci=[12.5, 15.0]), base, "final") == "ahead"
    assert figures.verdict(dict(final_iqm=14.0, final_iqm_ci=[11.9, 15.0]), base, "final") == "level"
    assert figures.verdict(dict(final_iqm=5.0, final_iqm_ci=[4.0, 7.9]), base, "final") == "behind"


def test_no_report_cites_a_stale_run_and_each_states_its_question() -> None:
    def named(runs: list[dict]) -> set[tuple]:
        return {(run["env"], run["contender"], run["seed"]) for run in runs}

    for campaign, report in (results.campaign_reports() | results.campaign_reports(archived=True)).items():
        assert not named(report.get("provenance", {}).get("stale", [])) & named(report["runs"]), campaign
        assert report.get("question"), f"{campaign}: its report states no question"


def test_archived_campaigns_are_kept_apart_and_still_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An archived campaign is read by no region but the ``campaigns`` table, which lists it under ``archive/``."""
    for name, kind in (("live", "screen"), ("archive/old", "screen"), ("archive/multi_critic/older", None)):
        folder = tmp_path / "campaigns" / name
        folder.mkdir(parents=True)
        data = dict(runs=[], question=f"{name}?") | ({"kind": kind} if kind else {})
        (folder / "report.json").write_text(json.dumps(data))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert list(results.campaign_reports()) == ["live"]
    assert list(results.campaign_reports(archived=True)) == ["archive/multi_critic/older", "archive/old"]
    assert list(results.campaigns_of("screen")) == ["live"]  # the archived screen is not read
    table = learning.render_campaigns(ROOT / "docs" / "guide" / "campaigns.md")
    assert [line.split(" | ")[0] for line in table.splitlines()[2:]] == [
        "| `live`",
        "| `archive/multi_critic/older`",
        "| `archive/old`",
    ]


def test_no_archived_campaign_declares_a_kind() -> None:
    """A kind is what a region reads a campaign by: an archived report that declares one would drop out of its page."""
    archived = results.campaign_reports(archived=True)
    assert archived, "benchmarks/results/campaigns/archive/ holds the archived campaigns"
    assert {name: data["kind"] for name, data in archived.items() if "kind" in data} == {}


def test_the_must_match_table_renders_once_the_faithful_campaign_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def row(iqm: float, low: float, high: float) -> dict:
        return dict(seeds=[0, 1, 2, 3, 4], final_iqm=iqm, final_iqm_ci=[low, high], reached=5, curve_mean=100.0,
                    curve_iqm=100.0, curve_iqm_ci=[90.0, 110.0])  # fmt: skip

    contenders = {"single": row(260.0, 250.0, 270.0), "mc-scalarize-shared": row(265.0, 255.0, 275.0)}
    summary = {mc.FAITHFUL_LUNAR: dict(budget=1_000_000, threshold=200.0, contenders=contenders)}
    folder = tmp_path / "campaigns" / "multi_critic" / "lunar_groups"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(dict(summary=summary, runs=[], question="q")))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert mc.faithful_lunar_campaign() == "multi_critic/lunar_groups"
    table = mc.render_multi_critic_match(ROOT / "docs" / "guide" / "benchmarks.md")
    assert "| mc-scalarize-shared | 0-4 | 265.0 [255.0, 275.0] | 100.0 [90.0, 110.0] | 5/5 |" in table
    assert "pending" not in table
    assert mc.match_claim() == "level: 265.0 [255.0, 275.0] against one critic's 260.0 [250.0, 270.0]"


def test_a_screen_shows_once_each_side_has_its_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def row(iqm: float, low: float, high: float, seeds: list[int]) -> dict:
        return dict(seeds=seeds, final_iqm=iqm, final_iqm_ci=[low, high], curve_iqm=iqm, curve_iqm_ci=[low, high])

    def write(seeds: list[int]) -> None:
        contenders = {"ppo": row(-180.0, -200.0, -160.0, [0, 1, 2]), "xppo@a=1": row(-150.0, -155.0, -145.0, seeds)}
        summary = {"Pendulum-v1": dict(budget=100_000, threshold=-200.0, contenders=contenders)}
        folder = tmp_path / "campaigns" / "screen_x"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps(dict(kind="screen", summary=summary, runs=[], question="q")))

    # the campaigns come from the reports that declare kind "screen": screen_x, and none for Hopper-v5 yet
    screens = (
        ("Pendulum-v1", "xppo@a=1", "ppo", "`a=1`", "PPO (zoo)"),
        ("Hopper-v5", "xppo@a=1", "ppo", "`a=1`", "PPO (zoo)"),
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(learning, "SCREENS", screens)
    monkeypatch.setattr(learning, "CONFIRMATIONS", ())
    page = ROOT / "docs" / "guide" / "xppo.md"
    write([0, 1])
    text = learning.render_screens(page)
    assert "No screen has finished yet" in text and "`a=1` on Pendulum-v1 (2 of 3 seeds)" in text
    assert "`a=1` on Hopper-v5 (no report yet)" in text
    write([0, 1, 2])
    text = learning.render_screens(page)
    row_text = (
        "| `a=1` | Pendulum-v1 (100k, seeds 0-2; `screen_x`) | PPO (zoo) | -150.0 [-155.0, -145.0] / -180.0 [-200.0, -160.0]"
    )
    assert row_text in text and text.count("ahead") == 2 and "Pendulum-v1 (" not in text.split("Screens not finished")[1]
    assert "worth" not in text  # the option's verdict waits for its Hopper-v5 screen
    monkeypatch.setattr(learning, "SCREENS", screens[:1])
    worth = learning.render_screens(page).split("What each option is worth so far:\n\n")[1]
    assert worth == (
        "- `a=1`, every screen done: final return ahead on 1 of 1 (Pendulum-v1); curve ahead on 1 of 1 (Pendulum-v1); "
        "it earns a confirmation on 10 fresh seeds on Pendulum-v1."
    )


def test_a_confirmation_shows_once_its_ten_fresh_seeds_are_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def row(iqm: float, seeds: list[int]) -> dict:
        return dict(
            seeds=seeds, final_iqm=iqm, final_iqm_ci=[iqm - 5, iqm + 5], curve_iqm=iqm, curve_iqm_ci=[iqm - 5, iqm + 5]
        )

    def write(campaign: str, kind: str, option: float, seeds: list[int], base_seeds: list[int]) -> None:
        contenders = {"ppo": row(100.0, base_seeds), "xppo@a=1": row(option, seeds)}
        summary = {"Hopper-v5": dict(budget=1_000_000, threshold=None, contenders=contenders)}
        (tmp_path / "campaigns" / campaign).mkdir(parents=True, exist_ok=True)
        report = dict(kind=kind, summary=summary, runs=[], question="q")
        (tmp_path / "campaigns" / campaign / "report.json").write_text(json.dumps(report))

    entry = ("Hopper-v5", "xppo@a=1", "ppo", "`a=1`", "PPO (zoo)")
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(learning, "SCREENS", (entry,))
    monkeypatch.setattr(learning, "CONFIRMATIONS", (entry,))
    page = ROOT / "docs" / "guide" / "xppo.md"
    write("screen_x", "screen", 120.0, [0, 1, 2], [0, 1, 2])
    text = learning.render_screens(page)
    assert "Confirmations not finished (the run cache keeps the runs done so far): `a=1` on Hopper-v5 (no report yet)." in text
    assert text.endswith("it earns a confirmation on 10 fresh seeds on Hopper-v5; running: Hopper-v5 (no report yet).")
    fresh = list(range(10, 20))
    write("confirmation_x", "option-confirmation", 103.0, fresh[:4], fresh)
    assert learning.render_screens(page).endswith("; running: Hopper-v5 (4 of 10 seeds).")
    write("confirmation_x", "option-confirmation", 103.0, fresh, fresh)
    text = learning.render_screens(page)
    assert (
        "| `a=1` | Hopper-v5 (1M, seeds 10-19; `confirmation_x`) | PPO (zoo) | 103.0 [98.0, 108.0] / 100.0 [95.0, 105.0]"
        in text
    )
    assert text.endswith(
        "it earns a confirmation on 10 fresh seeds on Hopper-v5; on fresh seeds, final return level on 1 of 1, "
        "curve level on 1 of 1, so the gain is not confirmed and nothing recommends it."
    )


def test_envpool_equivalence_says_whether_the_cis_overlap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def row(iqm: float, low: float, high: float) -> dict:
        return dict(seeds=[0, 1, 2, 3, 4], final_iqm=iqm, final_iqm_ci=[low, high], curve_iqm=iqm, curve_iqm_ci=[low, high])

    contenders = {"ppo": row(260.0, 250.0, 270.0), "ppo@vec_env='envpool'": row(240.0, 200.0, 255.0)}
    summary = {"LunarLander-v3": dict(budget=1_000_000, threshold=200.0, contenders=contenders)}
    (tmp_path / "campaigns" / "envpool_equivalence").mkdir(parents=True)
    (tmp_path / "campaigns" / "envpool_equivalence" / "report.json").write_text(
        json.dumps(dict(kind="envpool-equivalence", summary=summary, runs=[], question="q"))
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    text = learning.render_envpool_equivalence(ROOT / "docs" / "guide" / "vec_env.md")
    assert "| LunarLander-v3 (1M, seeds 0-4) | 240.0 [200.0, 255.0] / 260.0 [250.0, 270.0] |" in text
    assert text.count("| overlap |") == 1 and "Hopper-v5 (EnvPool 0, gymnasium 0 of 5 seeds)" in text
    contenders["ppo@vec_env='envpool'"] = row(100.0, 90.0, 110.0)
    (tmp_path / "campaigns" / "envpool_equivalence" / "report.json").write_text(
        json.dumps(dict(kind="envpool-equivalence", summary=summary, runs=[], question="q"))
    )
    assert "apart (behind)" in learning.render_envpool_equivalence(ROOT / "docs" / "guide" / "vec_env.md")


def test_pcgrad_worth_shows_each_env_once_both_sides_have_five_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def row(iqm: float, seeds: list[int]) -> dict:
        return dict(seeds=seeds, final_iqm=iqm, final_iqm_ci=[iqm - 0.1, iqm + 0.1], curve_iqm=iqm, curve_iqm_ci=[iqm, iqm])

    env_id, with_pcgrad, without = mc.PCGRAD_ROWS[0][:3]
    campaign = "styles_pcgrad"  # found by its contents: the campaign that ran the mode with PCGrad on the env
    folder = tmp_path / "campaigns" / "multi_critic" / campaign
    folder.mkdir(parents=True)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.json").write_text(json.dumps(dict(train_logs={"train/pcgrad_conflict_fraction": 0.25})))

    def write(seeds: list[int]) -> None:
        contenders = {with_pcgrad: row(0.5, seeds), without: row(0.9, [0, 1, 2, 3, 4])}
        runs = [dict(contender=with_pcgrad, file="runs/a.json")]
        summary = {env_id: dict(budget=200_000, threshold=0.8, contenders=contenders)}
        (folder / "report.json").write_text(json.dumps(dict(summary=summary, runs=runs, question="q")))

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    page = ROOT / "docs" / "guide" / "multi_critic.md"
    write([0, 1, 2])
    text = mc.render_pcgrad_worth(page)
    assert "No PCGrad campaign has finished yet" in text and f"{env_id} (PCGrad 3, without 5 of 5 seeds)" in text
    write([0, 1, 2, 3, 4])
    text = mc.render_pcgrad_worth(page)
    assert "| 0.50 [0.40, 0.60] / 0.90 [0.80, 1.00] |" in text and "| behind, behind | 25% |" in text


def test_group_value_weights_evidence_is_computed_from_the_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the side engine's share of the critics' loss per run (its value loss over the weighted sum), its weight from the
    # runs' kwargs, and both weightings' final IQMs against the single critic's, with verdicts
    def row(iqm: float, low: float, high: float) -> dict:
        return dict(seeds=[0, 1], final_iqm=iqm, final_iqm_ci=[low, high], curve_iqm=iqm, curve_iqm_ci=[low, high])

    (tmp_path / "runs").mkdir()
    kwargs = dict(reward_groups=["outcome", "side_engine"], group_weights=[1.0, 0.05])
    for name, side, total in (("a", 1.0, 4.0), ("b", 3.0, 5.0)):  # shares 25% and 60%
        logs = {"train/value_loss/side_engine": side, "train/value_loss": total}
        (tmp_path / "runs" / f"{name}.json").write_text(json.dumps(dict(kwargs=kwargs, train_logs=logs)))
    contenders = {mc.SINGLE: row(260.0, 250.0, 270.0), mc.EQUAL_WEIGHTS: row(230.0, 220.0, 240.0)}
    runs = [dict(contender=mc.EQUAL_WEIGHTS, file=f"runs/{name}.json") for name in ("a", "b")]
    folder = tmp_path / "campaigns" / "multi_critic" / "lunar"
    folder.mkdir(parents=True)

    def write() -> None:
        summary = {mc.MO_LUNAR: dict(budget=1_000_000, threshold=200.0, contenders=contenders)}
        (folder / "report.json").write_text(json.dumps(dict(summary=summary, runs=runs, question="q")))

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    page = ROOT / "docs" / "guide" / "multi_critic.md"
    write()
    assert mc.render_group_value_weights(page).startswith("*Pending")
    contenders[mc.SQUARED_WEIGHTS] = row(262.0, 255.0, 268.0)
    write()
    text = mc.render_group_value_weights(page)
    assert "weighs 0.05 in the reward, so 0.0025 of the scalar's squared error" in text
    assert "made 25%-60% of the critics' loss" in text and "seeds 0, 1" in text
    assert "equal weights 230.0 [220.0, 240.0] (behind)" in text and '`"squared"` 262.0 [255.0, 268.0] (level)' in text


def test_the_must_match_claim_is_the_plain_scalarize_mode_not_its_pcgrad_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def row(iqm: float) -> dict:
        return dict(seeds=[0, 1, 2, 3, 4], final_iqm=iqm, final_iqm_ci=[iqm - 5, iqm + 5], reached=5, curve_mean=1.0)

    squared = "mc-scalarize-shared@group_value_weights='squared'"
    contenders = {"single": row(250.0), squared.replace("shared", "shared-pcgrad"): row(100.0), squared: row(252.0)}
    summary = {mc.FAITHFUL_LUNAR: dict(budget=1_000_000, threshold=200.0, contenders=contenders)}
    (tmp_path / "campaigns" / "multi_critic" / "lunar_groups").mkdir(parents=True)
    (tmp_path / "campaigns" / "multi_critic" / "lunar_groups" / "report.json").write_text(
        json.dumps(dict(summary=summary, runs=[]))
    )
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert mc.match_claim() == "level: 252.0 [247.0, 257.0] against one critic's 250.0 [245.0, 255.0]"


def test_the_warm_up_table_counts_the_warm_up_in_the_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(seed: int, steps: int, warm_up: bool) -> dict:
        return dict(seed=seed, steps=steps, reached=True, **(dict(pretrain_env_steps=512) if warm_up else {}))

    data = dict(
        env="CartPole-v1",
        teacher=dict(mean_return=500.0),
        threshold=475.0,
        pretrain_steps=64,
        runs=dict(dagger=[run(0, 2048, False)], dagger_pretrain=[run(0, 1024, True)]),
        median_steps=dict(dagger=2048.0, dagger_pretrain=1024.0, dagger_pretrain_total=1536.0),
    )
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "distill_CartPole-v1_quick.json").write_text(json.dumps(data))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    text = dagger.render_dagger_pretrain(ROOT / "docs" / "guide" / "dagger.md")
    assert "| 2,048 (2,048) | 1,024 (1,024) | 1,536 |" in text and "CartPole-v1: fewer steps with the warm-up" in text


def test_vec_env_speed_rows_leave_the_algorithm_rows_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """speed.json's ``<env>@<vec env>`` rows go to the vec env page (their targets to the campaigns page); the plain rows
    stay PPO's claim."""
    breakdown = {who: dict(us_per_step=dict(env=1.0, policy=1.0, forward=2.0, backward=2.0)) for who in ("PPO", "XPPO")}

    def row(env: str, ratio: float, target: float | None, exact: bool) -> dict:
        return dict(
            env=env, ratio_best=ratio, ratio_paired=ratio - 0.01, cpu_ratio_paired=ratio + 0.01, target=target,
            target_met=None if target is None else ratio >= target, bit_exact=exact,
            max_abs_param_diff=0.0 if exact else 0.5, breakdown=breakdown, runs=[dict(seconds=10.0)] * 18,
            ratio_paired_spread=dict(median=ratio - 0.01, interval=[ratio - 0.06, ratio + 0.04], pairs=[ratio] * 9),
        )  # fmt: skip

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert speed.render_vec_env_speed(tmp_path) == "Pending: `python benchmarks/speed.py --contrib`."
    rows = [row("CartPole-v1", 1.4, 1.5, True), row("LunarLander-v3@lean", 1.7, 1.6, True)]
    rows.append(row("LunarLander-v3@envpool", 2.0, 2.5, False))
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "speed.json").write_text(json.dumps(dict(results=rows)))
    table = speed.render_vec_env_speed(tmp_path).splitlines()
    assert table[2:4] == [
        "| LunarLander-v3, lean | 1.69x [1.64, 1.74] | bit for bit |",
        "| LunarLander-v3, envpool | 1.99x [1.94, 2.04] | no (EnvPool's envs; max diff 0.5) |",
    ]
    assert "target" not in speed.render_vec_env_speed(tmp_path)
    targets = vec_env.render_speed_targets(tmp_path)
    assert "| LunarLander-v3, lean | 1.6x (met) | 1.69x [1.64, 1.74] |" in targets and "2.5x (missed)" in targets
    assert speed.speed_claim() == (
        "faster on CartPole-v1 (1.39x [1.34, 1.44]) (env-steps/s, median paired [95% interval]; the same "
        "parameters bit for bit)"
    )
    assert "@" not in speed.render_speed_breakdown(tmp_path)


def test_the_floor_table_sets_the_fixed_pieces_against_what_the_target_leaves() -> None:
    """Hand-computed: PPO's 500 us over a 2.5x target leaves 200; XPPO's env and passes take 50+40+50+70 = 210."""
    ppo = dict(env=100.0, policy=60.0, forward=80.0, backward=70.0, optimizer=90.0, train_other=100.0)
    xppo = dict(env=50.0, policy=40.0, forward=50.0, backward=70.0, optimizer=15.0, train_other=45.0)
    lean = dict(env=80.0, policy=40.0, forward=50.0, backward=70.0, optimizer=15.0, train_other=45.0)
    rows = [
        dict(env="LunarLander-v3@envpool", target=2.5, breakdown=dict(PPO=dict(us_per_step=ppo), XPPO=dict(us_per_step=xppo))),
        dict(env="LunarLander-v3@lean", target=1.6, breakdown=dict(PPO=dict(us_per_step=ppo), XPPO=dict(us_per_step=lean))),
        dict(env="Pendulum-v1@lean", target=None, breakdown={}),
    ]
    lines = speed.speed_floor_lines(rows)
    assert "| LunarLander-v3, envpool | 200 | 50 + 40 + 50 + 70 = 210 | 60 |" in lines
    assert "| LunarLander-v3, lean | 312 | 80 + 40 + 50 + 70 = 240 | 60 |" in lines
    assert not any("Pendulum" in line for line in lines)
    assert "On LunarLander-v3, envpool they alone take more than the target leaves" in lines[-1]


def test_every_campaign_a_region_quotes_declares_a_known_kind() -> None:
    """The regions find their campaigns by the kind a report declares: each kind the pages read has a report."""
    from harness.reports import KINDS

    kinds = {name: data["kind"] for name, data in results.campaign_reports().items() if "kind" in data}
    assert set(kinds.values()) == set(KINDS), kinds
    assert results.the_campaign("zoo-entries")[0] == "confirmation_zoo"
    assert list(results.campaigns_of("recommended")) == ["confirmation", "confirmation_bipedal"]


def test_sequence_batching_region(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """speed_sequences.json's rows: train() and learn() ratios, the parameter difference; a row of one rollout is rough."""
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    pending = speed.render_sequence_batching(tmp_path)
    assert pending == "Pending: `python benchmarks/speed.py --envs --sequences --name speed_sequences`."
    spreads = dict(
        learn=dict(median=2.5, interval=[2.3, 2.6], pairs=[2.5] * 9),
        train=dict(median=3.5, interval=[3.2, 3.6], pairs=[3.5] * 9),
    )
    row = dict(
        env="CartPoleNoVel-v1", rollouts=12, ratio_paired=dict(learn=2.5, learn_cpu=2.4, train=3.5, train_cpu=3.4),
        ratio_paired_spread=spreads, seconds_median=2.4, train_seconds_median=1.0,
        targets=dict(train=3.0, learn=2.0), targets_met=dict(train=True, learn=True), max_abs_param_diff=2e-6,
    )  # fmt: skip
    slow = dict(row, env="PendulumNoVel-v1", rollouts=1, targets_met=dict(train=True, learn=False))
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "speed_sequences.json").write_text(
        json.dumps(dict(config=dict(reps=9), host=dict(cpus=2, loadavg_start=[4.5, 3.0, 2.0]), sequences=[row, slow]))
    )
    table = speed.render_sequence_batching(tmp_path).splitlines()
    assert table[2] == "| CartPoleNoVel-v1 | 3.50x [3.20, 3.60] | 2.50x [2.30, 2.60] | 2e-06 |"
    assert table[3] == "| PendulumNoVel-v1 (1 rollout per run: rough) | 3.50x [3.20, 3.60] | 2.50x [2.30, 2.60] | 2e-06 |"
    assert "9 runs of each" in table[-1] and "CartPoleNoVel-v1: 12 rollouts, PendulumNoVel-v1: 1 rollout per run" in table[-1]
    assert "load average was 4.5" in table[-1] and "PendulumNoVel-v1: 9 pairs of one rollout each" in table[-1]
    assert "CartPoleNoVel-v1:" not in table[-1].split("rough")[-1]  # twelve rollouts a run: not labelled rough


def test_sequence_batching_learning_region(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step-by-step contenders against their sequence_batching twins: final IQMs and whether the intervals overlap.
    The twins' campaigns declare kind ``sequence-batching``; the step-by-step rows come from any report holding them."""
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert learning.render_sequence_batching_learning(tmp_path).startswith("Pending: `python benchmarks/mask_memory.py")

    def row(iqm: float, ci: list[float]) -> dict:
        return dict(final_iqm=iqm, final_iqm_ci=ci, seeds=[0, 1, 2, 3, 4])

    base = dict(mask_lstm=row(0.94, [0.29, 0.94]), lstm=row(0.5, [0.1, 0.6]))
    seq = dict(mask_lstm_seq=row(0.9, [0.5, 0.94]), lstm_seq=row(0.9, [0.8, 0.94]))

    def write(campaign: str, report: dict) -> None:
        (tmp_path / "campaigns" / campaign).mkdir(parents=True)
        (tmp_path / "campaigns" / campaign / "report.json").write_text(json.dumps(report))

    write("mask_memory", dict(summary=dict(budget=16384, contenders=base)))
    write("mask_memory_sequences", dict(kind="sequence-batching", summary=dict(budget=16384, contenders=seq)))
    table = learning.render_sequence_batching_learning(tmp_path).splitlines()
    assert (
        table[2]
        == "| sb3_xppo/MemoryMaze-v0 | MaskableRecurrentXPPO, masks | 0-4 | 0.94 [0.29, 0.94] | 0.90 [0.50, 0.94] | overlap |"
    )
    assert table[3].endswith("| 0.50 [0.10, 0.60] | 0.90 [0.80, 0.94] | apart (ahead) |")
    assert table[-1] == "The 95% intervals are apart for some pair; not run yet: CartPoleNoVel-v1."
    # learning.py's reports: per env
    cartpole = {"recurrentppo": row(326.1, [300.0, 350.0]), "xppo-lstm@sequence_batching=True": row(330.0, [310.5, 351.0])}
    summary = {"CartPoleNoVel-v1": dict(budget=100_000, contenders=cartpole)}
    write("sequence_batching_cartpole_novel", dict(kind="sequence-batching", summary=summary))
    table = learning.render_sequence_batching_learning(tmp_path).splitlines()
    assert table[4].endswith("| 326.1 [300.0, 350.0] | 330.0 [310.5, 351.0] | overlap |")
    assert table[-1] == "The 95% intervals are apart for some pair."


def test_the_decision_names_every_zoo_entry_that_is_not_rl_zoo3s() -> None:
    """The zoo config's row says which entries are its own: each one that differs from rl-zoo3's PPO entry is named."""
    import rl_zoo3
    import yaml

    with open(ROOT / "sb3_xppo" / "zoo_configs" / "xppo.yml") as f:
        ours = yaml.safe_load(f)
    with open(Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo.yml") as f:
        theirs = yaml.safe_load(f)
    own = [env_id for env_id, entry in ours.items() if env_id != "default" and theirs.get(env_id) != entry]
    assert "Pendulum-v1" in own
    decision = summary.render_decision(ROOT / "README.md")
    zoo_row = next(line for line in decision.splitlines() if "zoo_configs/xppo.yml" in line)
    for env_id in own:
        assert env_id in zoo_row, env_id


def test_install_regions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extras' sizes and the main job's time: pending without their files, rendered from them otherwise."""
    from harness.regions import install

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert install.render_install_extras(tmp_path) == "Pending: `python benchmarks/install_size.py`."
    assert install.render_main_job_time(tmp_path).startswith("Its time is pending")
    (tmp_path / "single").mkdir()
    sizes = dict(
        base=dict(mb=1001.0, packages={"torch": 757.0}), torch=dict(version="2.13.0+cpu", mb=757.0),
        extras=dict(ray=dict(mb=252.0, packages={"ray": 236.0, "pyyaml": 3.0}), new=dict(mb=1500.0, packages={"big": 1500.0})),
    )  # fmt: skip
    (tmp_path / "single" / "install_size.json").write_text(json.dumps(sizes))
    table = install.render_install_extras(tmp_path).splitlines()
    assert table[2].startswith("| `ray` | Ray, for `RayVecEnv`") and table[2].endswith("| 252 MB (ray 236 MB, pyyaml 3 MB) |")
    assert table[3] == "| `new` | (not described yet) | 1.5 GB (big 1.5 GB) |"  # an extra without words still shows
    assert "takes 1.0 GB, of which torch 2.13.0+cpu 757 MB" in table[-1]
    timed = dict(command="python -m sb3_xppo.train", evaluations=[dict(steps=25_000, mean=0.0)] * 40, seconds=900.0,
                 host=dict(cpus=2, loadavg_start=[1.0, 1.0, 1.0]))  # fmt: skip
    (tmp_path / "single" / install.MAIN_JOB).write_text(json.dumps(timed))
    assert install.render_main_job_time(tmp_path).startswith("It took 15 minutes, start to exit with its 40 evaluations")
    assert install.render_main_job_time(tmp_path).endswith("The tests' time: pending (`python benchmarks/suite_time.py`).")
    suite = dict(command="pytest -n 2", seconds=612.0, outcomes=dict(passed=1480, skipped=3), host=dict(cpus=2))
    (tmp_path / "single" / install.TEST_SUITE).write_text(json.dumps(suite))
    assert install.render_main_job_time(tmp_path).endswith(
        "The tests, `pytest -n 2`, took 10 minutes on 2 cores (1,480 passed, 3 skipped; `python benchmarks/suite_time.py`)."
    )


def test_the_suite_timer_reads_pytest_s_summary_line() -> None:
    """benchmarks/suite_time.py's counts, from pytest's last line as pytest writes it."""
    from suite_time import outcome_counts

    line = "=== 2 failed, 1480 passed, 3 skipped, 1 deselected, 4 errors in 612.31s (0:10:12) ==="
    assert outcome_counts(line) == dict(failed=2, passed=1480, skipped=3, deselected=1, error=4)
    assert outcome_counts("=== 1 passed, 1 error in 0.5s ===") == dict(passed=1, error=1)
    assert outcome_counts("") == {}


def test_ray_region_says_faster_not_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Best-of-few wall-clock runs: faster or slower in those runs, within 10% too close to call; never a verdict."""
    from harness.regions import vec_env

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    (tmp_path / "single").mkdir()

    def row(n_envs: int, lean: float, ray: float) -> dict:
        return dict(env="sleep2ms", n_envs=n_envs, steps_per_s=dict(lean=lean, subproc=lean, ray=ray))

    data = dict(
        machine=dict(cpus=2, load_average_before=[0.5], load_average_after=[3.0]), config=dict(timesteps=2048, reps=2),
        rows=[row(1, 400.0, 250.0), row(2, 400.0, 430.0), row(4, 400.0, 600.0)],
    )  # fmt: skip
    (tmp_path / "single" / "ray_vec_env.json").write_text(json.dumps(data))
    text = vec_env.render_ray_vec_env(tmp_path)
    assert (
        "- sleep2ms: RayVecEnv's best run was faster than the lean env's at n_envs [4], too close to call at n_envs [2]."
        in text
    )
    assert "Best of 2 runs each, too few for an interval" in text and "x |" not in text
    assert " ahead" not in text and " behind" not in text


def test_the_styles_headline_gives_both_iqms_with_their_intervals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The must-win campaign's "balanced" against one critic: curve and final, each IQM with its interval and verdict."""

    def row(final: float, curve: float, seeds: list[int]) -> dict:
        return dict(seeds=seeds, final_iqm=final, final_iqm_ci=[final - 0.1, final + 0.1], curve_iqm=curve,
                    curve_iqm_ci=[curve - 0.05, curve + 0.05], reached=len(seeds) - 1, curve_mean=curve - 0.3)  # fmt: skip

    fresh = list(range(5, 15))
    contenders = {mc.BALANCED: row(0.9, 0.85, fresh), mc.SINGLE: row(0.85, -0.2, fresh)}
    envs = {mc.TWO_STYLES: dict(budget=200_000, threshold=0.8, contenders=contenders)}
    folder = tmp_path / "campaigns" / "multi_critic" / "styles_fresh"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(dict(kind="must-win", summary=envs, runs=[], question="q")))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert mc.styles_claim() == (
        "curve ahead: 0.85 [0.80, 0.90] against one critic's -0.20 [-0.25, -0.15]; final level: 0.90 [0.80, 1.00] "
        "against 0.85 [0.75, 0.95]; 9 of 10 seeds reached 0.8, one critic's 9 of 10 (seeds 5-14)"
    )
    table = mc.render_multi_critic_styles_fresh(ROOT / "docs" / "guide" / "multi_critic.md")
    assert "| mc-balanced-shared | 5-14 | 0.90 [0.80, 1.00] | 0.85 [0.80, 0.90] | 9/10 |" in table
    assert table.endswith("(`styles_fresh`, seeds 5-14): curve ahead, final level.")
    front = summary.render_front(ROOT / "README.md")
    assert "curve 0.85 [0.80, 0.90] against -0.20 [-0.25, -0.15] (ahead), final score 0.90 [0.80, 1.00]" in front
    assert "curve (mean)" not in table  # a mean is not quoted beside an IQM


def test_the_styles_headline_follows_the_campaign_with_more_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two must-win reports: the one that compared the two on more seeds is quoted; an unfinished other, as not yet."""

    def write(name: str, seeds: list[int]) -> None:
        row = dict(seeds=seeds, final_iqm=0.5, final_iqm_ci=[0.4, 0.6], curve_iqm=0.5, curve_iqm_ci=[0.4, 0.6], reached=1)
        envs = {mc.TWO_STYLES: dict(budget=200_000, threshold=0.8, contenders={mc.BALANCED: row, mc.SINGLE: row})}
        folder = tmp_path / "campaigns" / "multi_critic" / name
        folder.mkdir(parents=True, exist_ok=True)
        report = dict(kind="must-win", summary=envs, runs=[], question="Fresh seeds?", args=dict(seeds=list(range(5, 15))))
        (folder / "report.json").write_text(json.dumps(report))

    monkeypatch.setattr(results, "RESULTS", tmp_path)
    write("styles", [0, 1, 2, 3, 4])
    report = json.loads((tmp_path / "campaigns" / "multi_critic" / "styles" / "report.json").read_text())
    report["args"]["seeds"] = [0, 1, 2, 3, 4]  # finished
    (tmp_path / "campaigns" / "multi_critic" / "styles" / "report.json").write_text(json.dumps(report))
    write("styles_fresh", [5, 6, 7])
    assert mc.styles_campaign() == "multi_critic/styles"
    text = mc.render_multi_critic_styles_fresh(tmp_path)
    assert "Not quoted yet: `styles_fresh`. Fresh seeds? It has compared the two on 3 of its 10 seeds so far" in text
    write("styles_fresh", [5, 6, 7, 8, 9])  # a tie: the rerun
    assert mc.styles_campaign() == "multi_critic/styles_fresh"
    write("styles_fresh", list(range(5, 15)))
    assert mc.styles_campaign() == "multi_critic/styles_fresh"
    assert "Not quoted yet" not in mc.render_multi_critic_styles_fresh(tmp_path)  # the other one is finished
