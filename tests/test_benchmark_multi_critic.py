"""The multi-critic benchmark (benchmarks/multi_critic.py): its zoo entries, contenders, score, and a run end to end."""

from __future__ import annotations

import json
import os

import pytest
import yaml


@pytest.fixture(scope="module")
def mc():
    import multi_critic  # benchmarks/ is on pytest's pythonpath

    return multi_critic


def test_entries_are_rl_zoo3s(mc):
    import rl_zoo3

    with open(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml")) as f:
        zoo = yaml.safe_load(f)
    with open(mc.CONFIG) as f:
        ours = yaml.safe_load(f)
    lunar = dict(ours["mo-lunar-lander-v3"])
    assert lunar.pop("env_wrapper") == [{"sb3_xppo.zoo.linear_reward": {"weight": [1.0, 1.0, 0.3, 0.03]}}]
    assert lunar == zoo["LunarLander-v3"]
    assert ours["sb3_xppo/LunarLanderGroups-v3"] == zoo["LunarLander-v3"]
    styles = dict(ours["sb3_xppo/TwoStylePendulum-v0"])
    assert styles.pop("n_timesteps") == 2 * zoo["Pendulum-v1"].pop("n_timesteps")
    assert styles == zoo["Pendulum-v1"]


def test_contenders(mc):
    lunar, styles = mc.CAMPAIGNS["lunar"], mc.CAMPAIGNS["styles"]
    assert len(mc.CONTENDERS) == 10
    assert mc.make_contender("single", lunar).kwargs == {}
    assert mc.make_contender("single-vn", lunar).kwargs == {"normalize_values": True}
    scalarize = mc.make_contender("mc-scalarize-separate-vn", lunar)
    assert scalarize.kwargs == dict(reward_groups=list(lunar.groups), group_weights=[1.0, 1.0, 0.3, 0.03],
                                    normalize_groups=False, group_reduce="sum", normalize_values=True,
                                    policy_kwargs=dict(separate_critics=True))  # fmt: skip
    balanced = mc.make_contender("mc-balanced-shared@max_grad_norm=1.0", styles)
    assert balanced.kwargs == dict(reward_groups=["swing_up", "hang_down"], group_weights=[1.0, 1.0],
                                   normalize_groups=True, group_reduce="mean", max_grad_norm=1.0)  # fmt: skip
    assert balanced.config == mc.CONFIG and balanced.algo == "xppo"
    pcgrad = mc.make_contender("mc-balanced-separate-vn-pcgrad", styles)
    assert pcgrad.kwargs == dict(reward_groups=["swing_up", "hang_down"], group_weights=[1.0, 1.0], normalize_groups=True,
                                 group_reduce="mean", policy_kwargs=dict(separate_critics=True), normalize_values=True,
                                 group_gradients="pcgrad")  # fmt: skip
    groups = mc.CAMPAIGNS["lunar-groups"]
    assert groups.env_id == "sb3_xppo/LunarLanderGroups-v3" and groups.weights == lunar.weights
    assert mc.make_contender("mc-scalarize-shared-pcgrad", groups).kwargs["group_gradients"] == "pcgrad"
    expert = mc.make_contender("expert-hang_down", styles)
    assert expert.kwargs["env_wrapper"] == [{"sb3_xppo.envs.two_style_pendulum.FixedStyle": {"style": 1}}]
    for name, campaign in [("mc-balanced", lunar), ("mc-mixed-shared", lunar), ("expert-outcome", lunar), ("ppo", styles),
                           ("mc-balanced-shared-xx", lunar), ("mc-balanced-shared-pcgrad-vn", lunar),
                           ("mc-balanced-shared-vn-vn", lunar)]:  # fmt: skip
        with pytest.raises(ValueError, match="unknown contender"):
            mc.make_contender(name, campaign)


def test_style_score_by_hand(mc):
    run = dict(contender="x", eval_steps=[10, 20], eval_style_means=[[-1000.0, -5.0], [-200.0, -1.0]],
               final_style_means=[-200.0, -2.0])  # fmt: skip
    experts = {0: [dict(seed=0, final_style_means=[-150.0, -9.0]), dict(seed=1, final_style_means=[-250.0, -9.0])],
               1: [dict(seed=0, final_style_means=[-999.0, -1.0])]}  # fmt: skip
    (scored,), references = mc.score_style_runs([run], experts, random=[-1200.0, -6.0], threshold=0.8)
    assert references["expert"] == [-200.0, -1.0] and references["random"] == [-1200.0, -6.0]
    # style 0 at the expert's level (1.0), style 1 at 4/5 of the way from random to the expert
    assert scored["normalized_per_style"] == pytest.approx([1.0, 0.8])
    assert scored["final_mean"] == pytest.approx(0.8)
    assert scored["eval_means"] == pytest.approx([min(0.2, 0.2), 1.0])
    assert scored["steps_to_threshold"] == 20


def test_lunar_run_records_the_diagnostics(mc):
    contender = mc.make_contender("mc-balanced-shared@n_envs=2@n_steps=16@batch_size=16@n_epochs=1", mc.CAMPAIGNS["lunar"])
    task = mc.MultiCriticTask("mo-lunar-lander-v3", 64, contender, 0, 1, 1, 1, 0.2, threshold=200.0)
    run = mc.run_multi_critic(task)
    assert run["key"] == task.key() and len(run["final_returns"]) == 1 and run["threshold"] == 200.0
    logs = run["train_logs"]
    for group in ("outcome", "shaping", "main_engine", "side_engine"):
        assert f"train/advantage_scale/{group}" in logs and f"train/effective_weight/{group}" in logs
    assert 0 < logs["train/grad_clip_coef"] <= logs["train/grad_clip_coef_actor_alone"] <= 1
    assert task.key() != mc.MultiCriticTask("mo-lunar-lander-v3", 64, contender, 1, 1, 1, 1, 0.2, threshold=200.0).key()


def test_styles_campaign_end_to_end(mc, tmp_path):
    argv = ["--campaign", "styles", "--budget-scale", "0.001", "--seeds", "0", "1",
            "--contenders", "single,mc-balanced-shared",
            "--overrides", "@n_envs=2@n_steps=50@batch_size=50@n_epochs=1", "--n-evals", "1", "--eval-episodes", "1",
            "--final-episodes", "1", "--random-episodes", "2", "--bootstrap-reps", "50", "--out-dir", str(tmp_path),
            "--question", "does it run?"]  # fmt: skip
    mc.main(argv)
    with open(tmp_path / "campaigns" / "multi_critic" / "styles" / "report.json") as f:
        result = json.load(f)
    rows = result["summary"]["sb3_xppo/TwoStylePendulum-v0"]["contenders"]
    tiny = "@n_envs=2@n_steps=50@batch_size=50@n_epochs=1"  # (--overrides joins every name)
    assert set(rows) == {f"single{tiny}", f"mc-balanced-shared{tiny}"} and rows[f"single{tiny}"]["seeds"] == [0, 1]
    assert len(result["references"]["expert"]) == 2 and len(result["references"]["random"]) == 2
    # the report names its runs, with the score each contributed; the cache holds them
    for named in result["runs"]:
        with open(tmp_path / named["file"]) as f:
            run = json.load(f)
        assert run["key"] == named["key"] and named["final_mean"] == pytest.approx(min(named_scores(result, named)))
    text = (tmp_path / "campaigns" / "multi_critic" / "styles" / "report.md").read_text()
    assert "**Question:** does it run?" in text and f"| mc-balanced-shared{tiny} | 0,1 |" in text
    assert (tmp_path / "campaigns" / "multi_critic" / "styles" / "plot.png").stat().st_size > 0
    # a second call finds every run in the cache, and keeps the question
    mc.main([*argv[:-2], "--report-only"])
    assert (tmp_path / "campaigns" / "multi_critic" / "styles" / "report.md").read_text() == text
    # --name: a report of its own from the same cache, the campaign's left as it was
    mc.main([*argv[:-2], "--report-only", "--seeds", "1", "--name", "styles_seed1"])
    assert "| 1 |" in (tmp_path / "campaigns" / "multi_critic" / "styles_seed1" / "report.md").read_text()
    assert (tmp_path / "campaigns" / "multi_critic" / "styles" / "report.md").read_text() == text
    # --expert-seeds: the score's reference from the experts of those seeds alone (here seed 0's, from the cache)
    mc.main([*argv[:-2], "--report-only", "--expert-seeds", "0", "--name", "styles_expert0"])
    with open(tmp_path / "campaigns" / "multi_critic" / "styles_expert0" / "report.json") as f:
        one = json.load(f)
    assert one["references"]["expert_seeds"] == {style: [0] for style in one["references"]["expert_seeds"]}
    assert result["references"]["expert_seeds"] == {style: [0, 1] for style in result["references"]["expert_seeds"]}
    assert one["references"]["expert"] != result["references"]["expert"]


def named_scores(result: dict, named: dict) -> list[float]:
    """The per-seed scores of the named run's contender in the report's summary, at its seed."""
    row = result["summary"][named["env"]]["contenders"][named["contender"]]
    return [row["final_per_seed"][row["seeds"].index(named["seed"])]]


def test_contenders_value_weights(mc, tmp_path):
    lunar = mc.CAMPAIGNS["lunar"]
    tiny = "@n_envs=2@n_steps=16@batch_size=16@n_epochs=1"
    for name, expected in [("mc-scalarize-shared", "equal"), ("mc-scalarize-shared@group_value_weights='squared'", "squared"),
                           ("single", None)]:  # fmt: skip
        task = mc.MultiCriticTask("mo-lunar-lander-v3", 32, mc.make_contender(name + tiny, lunar), 0, 1, 1, 1, 0.2)
        model = mc.build_model(task, str(tmp_path))[0]
        # the contenders' names keep the equal weights their cached runs had; the override asks for the default
        assert model.options.group_value_weights == expected
        assert (
            task.key()
            == mc.MultiCriticTask("mo-lunar-lander-v3", 32, mc.make_contender(name + tiny, lunar), 0, 1, 1, 1, 0.2).key()
        )
        model.env.close()
