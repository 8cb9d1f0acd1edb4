"""
The SPO paper campaign's machinery: the paper's setup (``benchmarks/spo_paper.yml``, the contender ``xppo-paper``,
the ``@pi_arch`` override) built as the authors' MuJoCo code builds it, layer by layer and keyword by keyword; the
contenders that differ only in their actor loss and actor; and what a run records for it (the training episodes'
returns, the ratio's statistics, ``resumed_at``).
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shlex
import struct
import types
from pathlib import Path
from unittest import mock

import learning
import pytest
import rl_zoo3
import torch as th
import yaml
from harness import spo_paper, train_episodes, train_logs
from harness.contenders import PAPER, expand_contenders, parse_contender, with_actor
from harness.layout import BENCHMARKS, campaign_dir
from harness.runs import Task, build_run, train_and_evaluate
from harness.train_episodes import TrainEpisodes
from harness.zoo import SPO_PAPER_CONFIG, zoo_budget, zoo_entry_of
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecNormalize

ENVS = ("Walker2d-v5", "HalfCheetah-v5", "Ant-v5")
CLIP, SPO, SHALLOW = (
    f"{PAPER}@actor_loss='clip'",
    f"{PAPER}@actor_loss='spo'",
    f"{PAPER}@actor_loss='clip'@pi_arch=[64,64]",
)
#: the authors' actors (mujoco/agent.py, --policy_layers 7 and 3) and critic, hidden layers
DEEP_PI, SHALLOW_PI, VF = [256, 256, 128, 128, 64, 64], [64, 64], [64, 64]
#: Walker2d-v5's observation and action sizes
OBS, ACT = 17, 6


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each contender's model and model keywords on Walker2d-v5, as a campaign run builds them."""
    out = {}
    for name in (CLIP, SPO, SHALLOW):
        task = Task("Walker2d-v5", 2048, parse_contender(name), 0, 1, 1, 1, 0.2)
        model, _, eval_env, zoo_callbacks, hyperparams, _ = build_run(task, str(tmp_path_factory.mktemp("log")))
        assert zoo_callbacks == []
        out[name] = (model, eval_env, hyperparams)
    yield out
    for model, eval_env, _ in out.values():
        model.get_env().close()
        eval_env.close()


def linears(net: th.nn.Sequential) -> list[tuple[int, int]]:
    """``(in, out)`` of each Linear, checking that each is followed by a Tanh."""
    layers = list(net)
    assert [type(m) for m in layers] == [th.nn.Linear, th.nn.Tanh] * (len(layers) // 2), net
    return [(m.in_features, m.out_features) for m in layers if isinstance(m, th.nn.Linear)]


def chained(widths: list[int], inputs: int) -> list[tuple[int, int]]:
    return list(zip([inputs, *widths[:-1]], widths))


def assert_orthogonal(layer: th.nn.Linear, gain: float) -> None:
    """``torch.nn.init.orthogonal_(weight, gain)`` and a zero bias, as the paper's ``layer_init`` and SB3's ortho_init."""
    w = layer.weight.detach().double()
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    th.testing.assert_close(gram / gain**2, th.eye(gram.shape[0], dtype=th.float64), atol=1e-5, rtol=0)
    assert th.count_nonzero(layer.bias) == 0


@pytest.mark.parametrize("name, pi", [(CLIP, DEEP_PI), (SPO, DEEP_PI), (SHALLOW, SHALLOW_PI)])
def test_networks_are_the_papers_layer_by_layer(built, name, pi):
    model, _, _ = built[name]
    policy = model.policy
    extractor = policy.mlp_extractor
    assert linears(extractor.policy_net) == chained(pi, OBS)
    assert linears(extractor.value_net) == chained(VF, OBS)
    assert (policy.action_net.in_features, policy.action_net.out_features) == (pi[-1], ACT)
    assert (policy.value_net.in_features, policy.value_net.out_features) == (VF[-1], 1)
    # separate networks: the shared features extractor is the flatten one, without parameters
    assert isinstance(policy.features_extractor, th.nn.Flatten) or not list(policy.features_extractor.parameters())
    for net in (extractor.policy_net, extractor.value_net):
        for layer in (m for m in net if isinstance(m, th.nn.Linear)):
            assert_orthogonal(layer, math.sqrt(2))
    assert_orthogonal(policy.action_net, 0.01)
    assert_orthogonal(policy.value_net, 1.0)
    assert policy.action_net.weight.std().item() < 0.01 / math.sqrt(pi[-1]) * 1.5  # tiny: the actor starts near 0
    assert policy.log_std.shape == (ACT,) and th.count_nonzero(policy.log_std) == 0 and policy.log_std.requires_grad
    assert policy.optimizer.defaults["eps"] == 1e-8  # torch's Adam default, as the paper's optimizer


@pytest.mark.parametrize("name", [CLIP, SPO, SHALLOW])
def test_training_keywords_are_the_papers(built, name):
    model, eval_env, _ = built[name]
    assert (model.n_envs, model.n_steps, model.batch_size, model.n_epochs) == (8, 256, 512, 10)
    assert model.n_steps * model.n_envs // model.batch_size == 4  # minibatches
    assert [model.clip_range(p) for p in (1.0, 0.0)] == [0.2, 0.2]
    assert [model.clip_range_vf(p) for p in (1.0, 0.0)] == [0.2, 0.2] and model.options.value_loss == "clipped"
    assert (model.ent_coef, model.vf_coef, model.max_grad_norm) == (0.0, 0.25, 0.5)
    assert (model.gamma, model.gae_lambda) == (0.99, 0.95) and model.normalize_advantage == "minibatch"  # the paper's
    # 3e-4 decayed linearly to 0: a schedule object (rl-zoo3's lin_3e-4, inside SB3's FloatSchedule), not a lambda
    assert [model.lr_schedule(p) for p in (1.0, 0.5, 0.0)] == pytest.approx([3e-4, 1.5e-4, 0.0], abs=1e-12)
    assert not isinstance(model.lr_schedule.value_schedule, types.FunctionType)
    assert type(model.lr_schedule.value_schedule).__module__ == "rl_zoo3.utils"
    env = model.get_env()
    assert isinstance(env, VecNormalize) and env.norm_obs and env.norm_reward and env.training
    assert (env.gamma, env.clip_obs, env.clip_reward) == (0.99, 10.0, 10.0)
    assert all(isinstance(e, Monitor) for e in env.venv.envs)  # under VecNormalize: the episodes' raw returns
    assert env.get_attr("spec")[0].id == "Walker2d-v5"
    assert isinstance(eval_env, VecNormalize) and not eval_env.norm_reward and not eval_env.training


def test_contenders_differ_only_in_actor_loss_and_actor(built):
    def rest(name: str) -> dict[str, str]:
        _, _, hyperparams = built[name]
        kwargs = dict(hyperparams)
        policy_kwargs = dict(kwargs.pop("policy_kwargs"))
        net_arch = dict(policy_kwargs.pop("net_arch"))
        net_arch.pop("pi")
        kwargs.pop("actor_loss")
        return {**{k: repr(v) for k, v in kwargs.items()}, "policy_kwargs": repr(policy_kwargs), "vf": repr(net_arch)}

    assert rest(CLIP) == rest(SPO) == rest(SHALLOW)
    assert [built[n][2]["actor_loss"] for n in (CLIP, SPO, SHALLOW)] == ["clip", "spo", "clip"]
    assert [built[n][2]["policy_kwargs"]["net_arch"]["pi"] for n in (CLIP, SPO, SHALLOW)] == [DEEP_PI, DEEP_PI, SHALLOW_PI]
    assert [built[n][0].options.actor_loss for n in (CLIP, SPO, SHALLOW)] == ["clip", "spo", "clip"]


def test_one_rollout_takes_40_optimizer_steps_and_the_learning_rate_ends_at_zero(tmp_path):
    task = Task("Walker2d-v5", 2048, parse_contender(SPO), 0, 1, 1, 1, 0.2)
    model, env, eval_env, _, _, _ = build_run(task, str(tmp_path))
    episodes = TrainEpisodes()
    optimizer = model.policy.optimizer
    with mock.patch.object(optimizer, "step", wraps=optimizer.step) as step:
        model.learn(2048, callback=episodes)
    assert step.call_count == 10 * 4  # epochs x minibatches of one 8 x 256 rollout
    logged = model.logger.name_to_value
    assert logged["train/n_updates"] == 10  # (SB3 counts epochs)
    assert {"train/ratio_deviation", "train/clip_fraction"} <= set(logged)
    assert optimizer.param_groups[0]["lr"] == 0.0  # the last train() of the budget
    # the callback's episodes are the Monitors' own: every episode the training envs ended, with its step
    monitored = [r for rewards in env.env_method("get_episode_rewards") for r in rewards]
    assert episodes.returns and sorted(episodes.returns) == pytest.approx(sorted(monitored), abs=1e-6)  # (info's 6 decimals)
    assert episodes.steps == sorted(episodes.steps) and episodes.steps[0] > 0 and episodes.steps[-1] <= 2048
    env.close()
    eval_env.close()


def test_a_run_records_its_training_episodes_and_resumes_them_exactly(tmp_path):
    # three rollouts, a checkpoint at each boundary; the last one removed, the same run resumes from the one before
    task = Task("Walker2d-v5", 3 * 2048, parse_contender(SHALLOW), 0, 2, 1, 1, 0.2)
    reference = train_and_evaluate(task, str(tmp_path), every_seconds=1e-6)
    checkpoints = sorted(glob.glob(os.path.join(tmp_path, "resume-*.ckpt")))
    assert [Path(c).name for c in checkpoints] == ["resume-000000002048.ckpt", "resume-000000004096.ckpt"]
    os.remove(checkpoints[-1])
    resumed = train_and_evaluate(task, str(tmp_path), every_seconds=1e-6)
    assert reference["resumed_at"] is None and resumed["resumed_at"] == [2048]  # (null: never resumed)
    episodes = reference["train_episodes"]
    assert set(episodes) == {"steps", "returns", "episodes"} and len(episodes["steps"]) == len(episodes["returns"]) > 0
    assert set(episodes["steps"]) <= {2048, 4096, 6144} and episodes["steps"] == sorted(episodes["steps"])
    assert all(isinstance(s, int) for s in episodes["steps"]) and all(r == round(r, 2) for r in episodes["returns"])
    assert all(n >= 1 for n in episodes["episodes"])
    for key in ("train_episodes", "train_logs", "eval_steps", "eval_means", "final_returns"):
        assert resumed[key] == reference[key], key
    logs = reference["train_logs"]
    assert all(any(v is not None for v in logs[k]) for k in ("train/ratio_deviation", "train/clip_fraction"))


def test_train_episodes_state_round_trips_and_records_per_rollout():
    episodes = TrainEpisodes()
    episodes.steps, episodes.returns = [8, 16, 2048, 2056], [1.23456, -2.0, 5.0, 7.5]
    again = TrainEpisodes()
    again.restore_state(episodes.resumable_state())
    expected = {"steps": [2048, 4096], "returns": [1.41, 7.5], "episodes": [3, 1]}  # (1.23456 - 2 + 5) / 3 = 1.41152
    assert again.record(2048) == episodes.record(2048) == expected


@pytest.mark.parametrize("env_id, obs, act", [("HalfCheetah-v5", 17, 6), ("Ant-v5", 105, 8)])
def test_the_paper_setup_builds_on_the_other_envs(tmp_path, env_id, obs, act):
    model, env, eval_env, _, _, _ = build_run(Task(env_id, 2048, parse_contender(SPO), 0, 1, 1, 1, 0.2), str(tmp_path))
    assert (
        linears(model.policy.mlp_extractor.policy_net) == chained(DEEP_PI, obs) and model.policy.action_net.out_features == act
    )
    assert env.num_envs == 8 and env.get_attr("spec")[0].id == env_id and eval_env.get_attr("spec")[0].id == env_id
    env.close()
    eval_env.close()


def test_the_paper_entry_is_one_setup_on_its_three_envs():
    entries = [zoo_entry_of(SPO_PAPER_CONFIG, env_id) for env_id in ENVS]
    assert entries[0] == entries[1] == entries[2]
    assert entries[0]["learning_rate"] == "lin_3e-4" and entries[0]["n_envs"] == 8
    assert "actor_loss" not in entries[0]  # the contenders' own


def test_ant_v5_is_rl_zoo3s_ant_v4_entry():
    # the campaign's budget on Ant-v5 is its zoo entry's n_timesteps, as on the other MuJoCo envs
    with open(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml")) as f:
        zoo = yaml.load(f, Loader=yaml.UnsafeLoader)["Ant-v4"]
    assert zoo_entry_of(None, "Ant-v5") == zoo
    assert [zoo_budget(env_id) for env_id in ENVS] == [1_000_000] * 3


def test_pi_arch_override():
    assert parse_contender(SHALLOW).kwargs == dict(actor_loss="clip", pi_arch=[64, 64])
    assert parse_contender(SHALLOW).config == SPO_PAPER_CONFIG and parse_contender(CLIP).algo == "xppo"
    assert with_actor(dict(pi=DEEP_PI, vf=VF), SHALLOW_PI) == dict(pi=SHALLOW_PI, vf=VF)
    assert with_actor(None, [32]) == dict(pi=[32], vf=[64, 64]) and with_actor([16, 16], [8]) == dict(pi=[8], vf=[16, 16])
    for bad in ("[]", "[64,0]", "64", "[64.0]", "(64,64)"):
        with pytest.raises(ValueError, match="list of layer widths"):
            parse_contender(f"{PAPER}@pi_arch={bad}")


def test_the_readme_command_runs_the_three_contenders_on_the_three_envs():
    readme = Path(BENCHMARKS, "README.md").read_text()
    commands = re.findall(r"`(python benchmarks/learning\.py [^`]*--name spo_paper\b[^`]*)`", readme)
    assert len(commands) == 1, commands
    args = learning.parse_args(shlex.split(commands[0])[2:])
    assert tuple(args.envs) == ENVS and args.name == "spo_paper" and args.budget_scale in (3.0, 5.0)
    contenders = expand_contenders(args.contenders)
    assert [c.name for c in contenders] == [CLIP, SPO, SHALLOW]
    assert len({Task(e, 1, c, 0, 1, 1, 1, 0.2).key() for e in ENVS for c in contenders}) == 9


#: The widest figure a page draws without shrinking it past legibility: the content column at a 1024 px window (620 px)
#: times the shrink tests/test_rendering.py allows there (2x)
MAX_FIGURE_WIDTH = 1240


def png_width(path: Path) -> int:
    """A PNG's width in pixels, from its IHDR chunk (bytes 16-20, big-endian)."""
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


def test_the_campaigns_figures_stay_legible_with_its_three_envs(tmp_path):
    # drawn from the committed report, all three envs in it: a panel per env side by side outgrew the page
    report = json.loads(Path(campaign_dir(os.path.join(BENCHMARKS, "results"), "spo_paper"), "report.json").read_text())
    assert list(report["train_logs"]) == list(ENVS) and list(report["train_episodes"]) == list(ENVS)
    train_logs.plot(report["train_logs"], str(tmp_path / "logs.png"), "title")
    train_episodes.plot(
        report["train_episodes"], str(tmp_path / "episodes.png"), "title", spo_paper.reference(), spo_paper.PAPER_STEPS
    )
    for name in ("logs.png", "episodes.png"):
        assert 0 < png_width(tmp_path / name) <= MAX_FIGURE_WIDTH, name
