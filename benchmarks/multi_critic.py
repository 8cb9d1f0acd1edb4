"""
Multi-critic evidence (issue 13): every multi-critic mode against the single critic, at rl-zoo3's own PPO
hyperparameters, the same seeds for every contender, with the machinery of ``benchmarks/harness/`` (rl-zoo3 setup,
per-run cache, rliable IQM with a 95% stratified-bootstrap CI, JSON, plot, a block of docs/guide/benchmarks.md).

- **Campaigns** (``--campaign``):

  - ``lunar`` ("must match"): ``mo-lunar-lander-v3``, whose ``LinearReward`` weights ``[1, 1, 0.3, 0.03]`` reproduce
    LunarLander-v3's reward, with rl-zoo3's LunarLander-v3 entry (``benchmarks/multi_critic.yml``), 1M steps.
    Groups: outcome, shaping, main_engine, side_engine. Metric: the final deterministic eval return (the scalarized
    return, i.e. LunarLander-v3's), IQM over seeds.
  - ``lunar-groups``: ``sb3_xppo/LunarLanderGroups-v3``, LunarLander-v3 itself with its reward's four terms in the
    info (its terminal step is LunarLander-v3's, where mo-lunar-lander-v3's keeps the shaping and fuel terms), with
    rl-zoo3's LunarLander-v3 entry as it is, 1M steps; the same groups and weights as ``lunar``. Metric: the final
    deterministic eval return, LunarLander-v3's own, IQM over seeds.
  - ``styles`` ("must win"): ``sb3_xppo/TwoStylePendulum-v0`` (a style per episode: Pendulum-v1's swing-up, or a
    conflicting hang-down reward 100x smaller; one group per style, disjoint support) with rl-zoo3's Pendulum-v1
    entry, 200k steps (twice Pendulum's 100k). Metric, fixed before any run: for each style ``s``, ``R_s`` is the
    mean return of ``--final-episodes`` deterministic episodes of that style; ``n_s = (R_s - random_s) /
    (expert_s - random_s)``, with ``random_s`` the mean return of uniformly random actions (``--random-episodes``
    episodes) and ``expert_s`` the mean over the seeds (``--expert-seeds``, default ``--seeds``) of a single-style
    expert's ``R_s`` (``expert-<style>``: the
    single critic with ``normalize_values=True`` trained on that style alone, at Pendulum-v1's 100k steps); the
    score is ``min(n_0, n_1)``: 1 is an expert's level on the weaker style, 0 random's.

- **Contenders** (``--contenders``, a comma list; default: all of them): ``single`` (one critic, the scalar reward:
  XPPO's defaults over the zoo entry), ``single-vn`` (with ``normalize_values=True``), and
  ``mc-<mode>-<critics>[-vn][-pcgrad]``: ``mode`` ``scalarize`` (``normalize_groups=False, group_reduce='sum'``: the
  weights reproduce the scalar reward, the actor's objective is the single critic's) or ``balanced``
  (``normalize_groups=True``: each group z-scored over the rollout, over its own samples where groups have disjoint
  support, weights are priorities), ``critics`` ``shared`` (one trunk, ``G`` outputs) or ``separate``
  (``separate_critics=True``), ``-vn`` adds ``normalize_values=True``, ``-pcgrad`` (after ``-vn``) adds
  ``group_gradients='pcgrad'`` (PCGrad over the groups' actor losses, Yu et al. 2020). Any name may end in
  ``@<keyword>=<literal>`` overrides, as in ``benchmarks/learning.py`` (e.g.
  ``mc-balanced-shared-vn@max_grad_norm=1.0``); ``--overrides`` appends the same ones to every contender and expert.
  ``clip_grad_per_part`` sets that model attribute; a multi-critic contender's value losses weigh every group 1
  (``group_value_weights='equal'``, as its cached runs had them) unless it says otherwise:
  ``@group_value_weights='squared'`` is the library's own default in "scalarize" mode without value normalization.
- **Diagnostics** kept per run (means over its ``train()`` calls): the actor's and the critics' gradient norms
  before clipping and the clip coefficients (``grad_clip_coef``: what ``max_grad_norm`` over actor + critics applied;
  ``grad_clip_coef_actor_alone``: what the actor's gradient alone would get), each group's advantage scale and
  effective weight, the value losses, and with ``-pcgrad`` the share of pairs of groups whose gradients conflicted.
- **Outputs**: the campaign's folder ``<out-dir>/campaigns/multi_critic/<campaign>/`` (``--name N``: ``.../N/``) with
  ``report.json``, ``report.md`` and ``plot.png``, as ``benchmarks/learning.py`` writes them;
  ``benchmarks/render_docs.py`` renders the pages' tables from ``report.json``. Runs are cached in the run cache
  ``<out-dir>/runs/`` (``--report-only`` reports from the cache).

usage: python benchmarks/multi_critic.py --campaign lunar|lunar-groups|styles [--contenders ...] [--seeds 0 1 2 3 4]
                                         [--budget-scale 1.0] [--workers N] [--quick]
                                         [--name N] [--question TEXT] [--kind KIND] [--report-only]
       (--quick: the campaign's pipeline at 2% of the budget, seeds 0 1, three contenders: a smoke test)
       python benchmarks/multi_critic.py --campaign lunar|styles --clip-ab ROLLOUTS  (the gradient-clipping A/B)
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any

import mo_gymnasium  # noqa: F401  (registers mo-lunar-lander-v3)
import numpy as np
import torch as th
from harness.contenders import SCHEDULE_KEYS, ZOO_ENV_KEYS, Contender, parse_contender
from harness.layout import RESULTS, campaign_dir, run_cache
from harness.provenance import code_record
from harness.reports import (
    add_report_arguments,
    plot,
    provenance_note,
    provenance_record,
    report_header,
    report_words,
    reproducing_command,
    summarize,
    write_report,
)
from harness.runs import Task, fingerprint, load_cached, run_all, verify_runs
from harness.zoo import zoo_entry_of, zoo_setup
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, sync_envs_normalization

import sb3_xppo.envs  # noqa: F401  (registers sb3_xppo/TwoStylePendulum-v0)
from sb3_xppo import XPPO
from sb3_xppo.common.grad_norms import split_parameters
from sb3_xppo.envs import (
    LUNAR_LANDER_GROUP_NAMES,
    LUNAR_LANDER_GROUP_WEIGHTS,
    LUNAR_LANDER_GROUPS_ID,
    STYLE_NAMES,
    TWO_STYLE_PENDULUM_ID,
)

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multi_critic.yml")
#: The folder of the multi-critic campaigns under ``campaigns/``
FOLDER = "multi_critic"
#: Part of every run's cache key: bump it when a change to ``run_multi_critic`` makes cached runs incomparable
RUN_FORMAT = 1


@dataclass(frozen=True)
class Campaign:
    """An env, its reward groups and the weights that reproduce its scalar reward, and how a run is scored."""

    env_id: str
    groups: tuple[str, ...]
    weights: tuple[float, ...]
    #: steps-to-threshold of the score (LunarLander: return 200; styles: normalized score)
    threshold: float
    #: score each style on its own (the styles campaign)
    per_style: bool = False
    #: its name in the pages' tables (the clip A/B's columns)
    label: str = ""


CAMPAIGNS = {
    "lunar": Campaign(
        "mo-lunar-lander-v3",
        ("outcome", "shaping", "main_engine", "side_engine"),
        (1.0, 1.0, 0.3, 0.03),
        200.0,
        label="mo-lunar-lander",
    ),
    "styles": Campaign(TWO_STYLE_PENDULUM_ID, tuple(STYLE_NAMES), (1.0, 1.0), 0.8, per_style=True, label="styles"),
    # LunarLander-v3 itself, its reward's four terms in the info (the terminal step's outcome alone, as LunarLander-v3)
    "lunar-groups": Campaign(
        LUNAR_LANDER_GROUPS_ID,
        tuple(LUNAR_LANDER_GROUP_NAMES),
        tuple(LUNAR_LANDER_GROUP_WEIGHTS),
        200.0,
        label="LunarLanderGroups",
    ),
}
MODES = {
    "scalarize": dict(normalize_groups=False, group_reduce="sum"),
    "balanced": dict(normalize_groups=True, group_reduce="mean"),
}
CONTENDERS = ["single", "single-vn"] + [
    f"mc-{mode}-{critics}{vn}" for mode in MODES for critics in ("shared", "separate") for vn in ("", "-vn")
]
#: the suffixes a multi-critic contender may end in, in this order: value normalization, PCGrad over the groups
SUFFIXES = ("vn", "pcgrad")
#: What each run keeps of the logger after each ``train()`` call (by key prefix), as means over the run
TRAIN_LOG_PREFIXES = (
    "train/grad_",
    "train/advantage_",
    "train/effective_weight/",
    "train/value_loss",
    "train/explained_variance",
    "train/clip_fraction",
    "train/approx_kl",
    "train/pcgrad_",
)


def make_contender(name: str, campaign: Campaign) -> Contender:
    """
    ``single``, ``single-vn``, ``mc-<mode>-<critics>[-vn][-pcgrad]`` or ``expert-<style>`` (styles campaign), optionally with
    ``@<keyword>=<literal>`` overrides (parsed by ``learning.parse_contender``), on ``CONFIG``'s entry.

    :param name: the contender's name
    :param campaign: the campaign (its groups and weights)
    :return: the contender (algo ``xppo``)
    """
    base, sep, overrides = name.partition("@")
    kwargs: dict[str, Any] = {}
    parts = base.split("-")
    if base in ("single", "single-vn"):
        if base == "single-vn":
            kwargs["normalize_values"] = True
    elif parts[0] == "mc" and len(parts) >= 3 and parts[1] in MODES and parts[2] in ("shared", "separate"):
        suffixes = parts[3:]
        if suffixes not in ([s for s in SUFFIXES if s in suffixes],) or len(set(suffixes)) != len(suffixes):
            raise ValueError(f"unknown contender {name!r}: the suffixes after the critics are {SUFFIXES}, in that order")
        kwargs.update(reward_groups=list(campaign.groups), group_weights=list(campaign.weights), **MODES[parts[1]])
        if parts[2] == "separate":
            kwargs["policy_kwargs"] = dict(separate_critics=True)
        if "vn" in suffixes:
            kwargs["normalize_values"] = True
        if "pcgrad" in suffixes:
            kwargs["group_gradients"] = "pcgrad"
    elif parts[0] == "expert" and campaign.per_style and "-".join(parts[1:]) in campaign.groups:
        # one style only, through the zoo entry's env wrapper (the training and the evaluation envs)
        style = campaign.groups.index("-".join(parts[1:]))
        kwargs.update(normalize_values=True, env_wrapper=[{"sb3_xppo.envs.two_style_pendulum.FixedStyle": {"style": style}}])
    else:
        raise ValueError(
            f"unknown contender {name!r}: expected one of {CONTENDERS}"
            + (f" or expert-<style> with a style in {campaign.groups}" if campaign.per_style else "")
        )
    if sep:
        kwargs.update(parse_contender(f"xppo@{overrides}").kwargs)
    return Contender(name, "xppo", kwargs, config=CONFIG)


@dataclass(frozen=True)
class MultiCriticTask(Task):
    """A :class:`learning.Task` run by :func:`run_multi_critic`: per-style evaluation for the styles campaign."""

    per_style: bool = False
    #: the eval return that counts as reached, for runs scored by their return (not per style)
    threshold: float | None = None

    def key(self) -> str:
        spec = dict(base=super().key(), runner="multi_critic", format=RUN_FORMAT, per_style=self.per_style)
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def style_envs(env_id: str, train_env: VecEnv, seed: int) -> dict[int, VecEnv]:
    """One evaluation env per style (the style fixed), normalized as ``train_env`` when it is a ``VecNormalize``."""
    from sb3_xppo.envs import FixedStyle

    envs = {}
    for style in range(len(STYLE_NAMES)):
        env = make_vec_env(env_id, n_envs=1, seed=seed + 1000 * (style + 1), wrapper_class=FixedStyle,
                           wrapper_kwargs=dict(style=style))  # fmt: skip
        if isinstance(train_env, VecNormalize):
            env = VecNormalize(env, training=False, norm_obs=train_env.norm_obs, norm_reward=False)
        envs[style] = env
    return envs


def evaluate_styles(model: XPPO, envs: dict[int, VecEnv], episodes: int) -> list[float]:
    """:return: the mean deterministic return of ``episodes`` episodes of each style"""
    means = []
    for env in envs.values():
        if isinstance(env, VecNormalize):
            sync_envs_normalization(model.get_env(), env)
        returns, _ = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True)
        means.append(float(np.mean(returns)))
    return means


class StyleEvalCallback(BaseCallback):
    """Every ``eval_freq`` calls, each style's mean deterministic return (the learning curve of the styles campaign)."""

    def __init__(self, envs: dict[int, VecEnv], eval_freq: int, episodes: int) -> None:
        super().__init__()
        self.envs, self.eval_freq, self.episodes = envs, eval_freq, episodes
        self.steps: list[int] = []
        self.means: list[list[float]] = []

    def _on_step(self) -> bool:
        if self.n_calls % self.eval_freq == 0:
            self.steps.append(self.num_timesteps)
            self.means.append(evaluate_styles(self.model, self.envs, self.episodes))  # type: ignore[arg-type]
        return True


class TrainLogRecorder(BaseCallback):
    """What each ``train()`` call logged under ``TRAIN_LOG_PREFIXES`` (read before the logger's next dump)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[dict[str, float]] = []

    def _capture(self) -> None:
        values = {k: float(v) for k, v in self.model.logger.name_to_value.items() if k.startswith(TRAIN_LOG_PREFIXES)}
        if values and (not self.records or values != self.records[-1]):
            self.records.append(values)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self._capture()

    def _on_training_end(self) -> None:
        self._capture()

    def means(self) -> dict[str, float]:
        keys = sorted({k for record in self.records for k in record})
        return {k: float(np.mean([r[k] for r in self.records if k in r])) for k in keys}


def build_model(task: Task, log_folder: str) -> tuple[XPPO, VecEnv, list[BaseCallback], dict[str, Any], dict[str, Any]]:
    """
    The contender's model on the zoo entry of its config, as ``learning.run_task`` builds it; the gradient norms
    logged (also for the single critic, to compare). A ``clip_grad_per_part`` keyword sets that model attribute.

    :return: the model, the evaluation env, the entry's callbacks, the raw entry and the model keywords
    """
    kwargs = copy.deepcopy(task.contender.kwargs)
    to_entry = [k for k, v in kwargs.items() if k in ZOO_ENV_KEYS or (k in SCHEDULE_KEYS and isinstance(v, str))]
    entry_overrides = {key: kwargs.pop(key) for key in to_entry}
    per_part = kwargs.pop("clip_grad_per_part", None)
    if "reward_groups" in kwargs:
        # the contenders' names stand for equal value-loss weights, as their cached runs had them (the library's
        # default is "squared" in "scalarize" mode since): "@group_value_weights='squared'" asks for it
        kwargs.setdefault("group_value_weights", "equal")
    hyperparams, env, eval_env, zoo_callbacks, zoo_entry = zoo_setup(
        task.env_id, task.seed, task.budget, log_folder, entry_overrides, task.contender.config
    )
    if "policy_kwargs" in kwargs:  # the contender's policy keywords join the entry's
        kwargs["policy_kwargs"] = {**hyperparams.get("policy_kwargs", {}), **kwargs["policy_kwargs"]}
    hyperparams.update(kwargs)
    model = XPPO(env=env, seed=task.seed, verbose=0, device="cpu", **hyperparams)
    model.log_grad_norms = True
    model.clip_grad_per_part = per_part
    return model, eval_env, zoo_callbacks, zoo_entry, hyperparams


def build_for_fingerprint(task: Task, log_folder: str) -> tuple[XPPO, list[BaseCallback], list[VecEnv]]:
    """:func:`build_model` as :func:`learning.fingerprint` takes it."""
    model, eval_env, zoo_callbacks, _, _ = build_model(task, log_folder)
    env = model.get_env()
    assert env is not None
    return model, zoo_callbacks, [env, eval_env]


def run_multi_critic(task: MultiCriticTask) -> dict[str, Any]:
    """Train one contender on one seed with the zoo entry of ``CONFIG``; evaluate along the way and at the end."""
    th.set_num_threads(1)
    code, behaviour = code_record(), fingerprint(task, build_for_fingerprint)
    with tempfile.TemporaryDirectory() as log_folder:
        model, eval_env, zoo_callbacks, zoo_entry, hyperparams = build_model(task, log_folder)
        env = model.get_env()
        assert env is not None
        eval_freq = max(max(task.budget // task.n_evals, 1) // env.num_envs, 1)
        recorder = TrainLogRecorder()
        if task.per_style:
            styles = style_envs(task.env_id, env, task.seed)
            evaluator: BaseCallback = StyleEvalCallback(styles, eval_freq, task.eval_episodes)
        else:
            evaluator = EvalCallback(eval_env, n_eval_episodes=task.eval_episodes, eval_freq=eval_freq,
                                     log_path=log_folder, deterministic=True, verbose=0, warn=False)  # fmt: skip
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.learn(task.budget, callback=[*zoo_callbacks, evaluator, recorder])
        learn_s = time.perf_counter() - start
        run: dict[str, Any] = dict(
            key=task.key(),
            env=task.env_id,
            budget=task.budget,
            contender=task.contender.name,
            algo="xppo",
            kwargs=task.contender.kwargs,
            seed=task.seed,
            zoo_entry={k: str(v) for k, v in zoo_entry.items()},
            model_kwargs={k: repr(v) for k, v in hyperparams.items()},
            train_logs=recorder.means(),
            learn_seconds=learn_s,
            code=code,
            fingerprint=behaviour,
        )
        if task.per_style:
            assert isinstance(evaluator, StyleEvalCallback)
            final = evaluate_styles(model, styles, task.final_episodes)
            run.update(eval_steps=evaluator.steps, eval_style_means=evaluator.means, final_style_means=final)
            # placeholders until the report scores them against the references (run_all prints them)
            run.update(final_mean=float(np.mean(final)), eval_means=[], threshold=None, steps_to_threshold=None)
        else:
            assert isinstance(evaluator, EvalCallback)
            sync_envs_normalization(model.get_env(), eval_env)
            returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=task.final_episodes, deterministic=True,
                                         return_episode_rewards=True)  # fmt: skip
            means = [float(np.mean(r)) for r in evaluator.evaluations_results]
            threshold = task.threshold
            reached = [s for s, m in zip(evaluator.evaluations_timesteps, means, strict=True) if threshold and m >= threshold]
            run.update(eval_steps=[int(s) for s in evaluator.evaluations_timesteps], eval_means=means,
                       final_returns=[float(r) for r in returns], final_mean=float(np.mean(returns)), threshold=threshold,
                       steps_to_threshold=int(reached[0]) if reached else None,
                       curve_mean=float(np.mean(means)) if means else None)  # fmt: skip
        run.update(total_seconds=time.perf_counter() - start, finished=time.strftime("%Y-%m-%d %H:%M:%S"))
        env.close()
        eval_env.close()
    return run


def clip_ab(task: Task, rollouts: int) -> list[dict[str, Any]]:
    """
    Does one ``max_grad_norm`` over the actor and the critics shrink the actor's steps? After each of ``rollouts``
    rollouts, the same ``train()`` call (same state, rollout and minibatches) twice: the gradients clipped by one
    joint norm (PPO's) and the actor's and critics' clipped apart; the model then goes on with its own default.

    :param task: the contender and seed (its budget is not used)
    :param rollouts: how many rollouts
    :return: per rollout: steps, and per clipping (``joint``, ``per_part``) the norm of the actor's parameter change,
        ``approx_kl``, ``clip_fraction`` and the logged clip coefficients
    """
    th.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as log_folder:
        model, _, _, _, _ = build_model(task, log_folder)
        default = model.clip_grad_per_part
        train = model.train

        def actor() -> th.Tensor:
            return th.cat([p.detach().flatten() for p in split_parameters(model.policy)["actor"]])

        def both_ways() -> None:
            state = copy.deepcopy((model.policy.state_dict(), model.policy.optimizer.state_dict(), model._n_updates))
            buffer, before = copy.deepcopy(model.rollout_buffer), actor()
            row: dict[str, Any] = dict(steps=model.num_timesteps)
            default_is_per_part = default if default is not None else len(model.options.reward_groups or ()) > 1
            for per_part in sorted((True, False), key=lambda mode: mode == default_is_per_part):  # the default last
                policy_state, optimizer_state, model._n_updates = copy.deepcopy(state)
                model.policy.load_state_dict(policy_state)
                model.policy.optimizer.load_state_dict(optimizer_state)
                model.rollout_buffer = copy.deepcopy(buffer)
                model.clip_grad_per_part = per_part
                np.random.seed(task.seed)
                train()
                logs = model.logger.name_to_value
                row["per_part" if per_part else "joint"] = dict(
                    actor_step=float(th.linalg.vector_norm(actor() - before)),
                    approx_kl=float(logs["train/approx_kl"]),
                    clip_fraction=float(logs["train/clip_fraction"]),
                    grad_clip_coef=float(logs["train/grad_clip_coef"]),
                    grad_clip_coef_actor_alone=float(logs["train/grad_clip_coef_actor_alone"]),
                )
            model.clip_grad_per_part = default
            rows.append(row)

        model.train = both_ways  # type: ignore[method-assign]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.learn(rollouts * model.n_steps * model.n_envs)
    return rows


def random_returns(env_id: str, episodes: int, out_dir: str) -> list[float]:
    """
    The mean return of uniformly random actions on each style (cached in ``out_dir``): the 0 of the normalized score.

    :param env_id: the styles env
    :param episodes: episodes per style
    :param out_dir: where the result is kept
    :return: one mean per style
    """
    path = os.path.join(out_dir, f"random_{env_id.replace('/', '_')}_{episodes}.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)["means"]
    from sb3_xppo.envs import FixedStyle, TwoStylePendulum

    means = []
    for style in range(len(STYLE_NAMES)):
        env = FixedStyle(TwoStylePendulum(), style)  # the registered env's 200 steps
        env.action_space.seed(style)
        returns = []
        for episode in range(episodes):
            env.reset(seed=10_000 * (style + 1) + episode)
            returns.append(sum(float(env.step(env.action_space.sample())[1]) for _ in range(200)))
        means.append(float(np.mean(returns)))
    os.makedirs(out_dir, exist_ok=True)
    with open(path, "w") as f:
        json.dump(dict(env=env_id, episodes=episodes, means=means), f)
    return means


def score_style_runs(
    runs: list[dict[str, Any]], experts: dict[int, list[dict[str, Any]]], random: list[float], threshold: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """
    The styles campaign's runs with the score as their final return and learning curve (see the module docstring).

    :param runs: the contenders' runs
    :param experts: style -> that style's expert runs
    :param random: each style's random return
    :param threshold: the score that counts as reached
    :return: the scored runs (copies, with ``final_mean``, ``eval_means``, ``curve_mean``, ``steps_to_threshold``,
        ``normalized_per_style``), and the references
    """
    expert = [float(np.mean([r["final_style_means"][style] for r in experts[style]])) for style in sorted(experts)]
    references = dict(
        random=random, expert=expert, expert_seeds={STYLE_NAMES[s]: [r["seed"] for r in experts[s]] for s in experts}
    )

    def normalized(means: list[float]) -> list[float]:
        return [(m - lo) / (hi - lo) for m, lo, hi in zip(means, random, expert, strict=True)]

    scored = []
    for run in runs:
        curve = [min(normalized(m)) for m in run["eval_style_means"]]
        reached = [s for s, v in zip(run["eval_steps"], curve, strict=True) if v >= threshold]
        final = normalized(run["final_style_means"])
        scored.append({**run, "final_mean": min(final), "normalized_per_style": final, "eval_means": curve,
                       "curve_mean": float(np.mean(curve)) if curve else None, "threshold": threshold,
                       "steps_to_threshold": reached[0] if reached else None})  # fmt: skip
    return scored, references


def markdown(name: str, campaign: Campaign, summary: dict[str, Any], runs: list[dict[str, Any]], command: str,
             references: dict[str, Any] | None, provenance: str = "", question: str = "") -> str:  # fmt: skip
    """The campaign's table: per contender the final score's IQM and CI, per-seed values and the diagnostics."""
    env_summary = summary[campaign.env_id]
    metric = "score (min over styles of the expert-normalized return)" if campaign.per_style else "eval return"
    lines = [
        *report_header("Multi-critic", name, command, question, provenance),
        "",
        f"{campaign.env_id}, "
        f"{env_summary['budget']:,} steps, rl-zoo3's PPO hyperparameters (`benchmarks/multi_critic.yml`). Final: "
        f"{metric} after training, per seed; IQM over seeds with its 95% stratified-bootstrap CI (rliable). "
        f"Clip coef: the mean factor `max_grad_norm` applied to the gradients (actor + critics) / the factor the "
        f"actor's gradient alone would have got. Wall: mean seconds of `learn()` (one torch thread, shared machine).",
    ]
    if references is not None:
        lines += [
            "",
            "References: random "
            + ", ".join(f"{s} {v:.1f}" for s, v in zip(campaign.groups, references["random"], strict=True))
            + "; experts "
            + ", ".join(f"{s} {v:.1f}" for s, v in zip(campaign.groups, references["expert"], strict=True))
            + " (mean return per style).",
        ]
    per_style = " | normalized per style (mean)" if campaign.per_style else ""
    lines += [
        "",
        f"| contender | seeds | final IQM [95% CI] | final mean ± std{per_style} | reached {campaign.threshold:g} | "
        "curve | clip coef (joint / actor alone) | wall s |",
        "| --- | --- | --- | ---" + (" | ---" if campaign.per_style else "") + " | --- | --- | --- | --- |",
    ]
    rows = env_summary["contenders"]
    for cname, row in sorted(rows.items(), key=lambda kv: -kv[1]["final_iqm"]):
        own = [r for r in runs if r["contender"] == cname]
        coef = np.mean([r["train_logs"].get("train/grad_clip_coef", np.nan) for r in own])
        alone = np.mean([r["train_logs"].get("train/grad_clip_coef_actor_alone", np.nan) for r in own])
        styles = ""
        if campaign.per_style:
            styles = " | " + " / ".join(f"{np.mean([r['normalized_per_style'][s] for r in own]):.2f}" for s in range(2))
        lines.append(
            f"| {cname} | {','.join(map(str, row['seeds']))} | {row['final_iqm']:.2f} [{row['final_iqm_ci'][0]:.2f}, "
            f"{row['final_iqm_ci'][1]:.2f}] | {row['final_mean']:.2f} ± {row['final_std']:.2f}{styles} | "
            f"{row['reached']}/{len(row['seeds'])} | {row['curve_mean']:.2f} | {coef:.3f} / {alone:.3f} | "
            f"{row['learn_seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def report_clip_ab(args: argparse.Namespace, campaign: Campaign, tasks: list[MultiCriticTask]) -> None:
    """Run :func:`clip_ab` for each task, print its table and write ``clip_ab.json`` in the campaign's folder."""
    print(f"{campaign.env_id}, seed {tasks[0].seed}: one train() call, the same state and rollout, clipped two ways")
    print("| contender | steps | actor step joint / apart | approx_kl joint / apart | clip coef joint / actor alone |")
    print("| --- | --- | --- | --- | --- |")
    results = {}
    for task in tasks:
        results[task.contender.name] = rows = clip_ab(task, args.clip_ab)
        for row in rows:
            joint, apart = row["joint"], row["per_part"]
            print(f"| {task.contender.name} | {row['steps']:,} | {joint['actor_step']:.3f} / {apart['actor_step']:.3f} | "
                  f"{joint['approx_kl']:.5f} / {apart['approx_kl']:.5f} | {joint['grad_clip_coef']:.3f} / "
                  f"{joint['grad_clip_coef_actor_alone']:.3f} |", flush=True)  # fmt: skip
    path = os.path.join(campaign_dir(args.out_dir, f"{FOLDER}/{args.campaign}"), "clip_ab.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        command = reproducing_command("benchmarks/multi_critic.py", sys.argv[1:])
        json.dump(dict(label=campaign.label, command=command, results=results), f, indent=1)
    print(f"wrote {path}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with ``--quick``'s settings filled in (not for ``--clip-ab``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaign", choices=list(CAMPAIGNS), default="lunar")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="comma list (default: every contender)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--expert-seeds",
        nargs="+",
        type=int,
        default=None,
        help="styles: the seeds of the single-style experts, the score's reference (default: --seeds)",
    )
    parser.add_argument("--budget-scale", type=float, default=1.0, help="times the entry's n_timesteps")
    parser.add_argument("--n-evals", type=int, default=20, help="evaluations along each run")
    parser.add_argument("--eval-episodes", type=int, default=10, help="per evaluation (per style for styles)")
    parser.add_argument("--final-episodes", type=int, default=20, help="after training (per style for styles)")
    parser.add_argument("--random-episodes", type=int, default=100, help="per style, for the random reference")
    parser.add_argument("--overrides", default="", help="'@<keyword>=<literal>...' appended to every contender and expert")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=None, help="minutes after which no new run starts")
    parser.add_argument("--bootstrap-reps", type=int, default=5000)
    parser.add_argument("--out-dir", default=RESULTS)
    parser.add_argument("--report-only", action="store_true", help="write the outputs from cached runs, run nothing")
    parser.add_argument(
        "--name",
        default=None,
        help="the report's folder in campaigns/multi_critic/ (default: the campaign)",
    )
    add_report_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="smoke test: 2%% of the budget, seeds 0 1, 3 contenders")
    parser.add_argument("--stale", choices=("exclude", "rerun"), default="exclude", help="as learning.py's")
    parser.add_argument("--unverified", choices=("include", "exclude"), default="include", help="as learning.py's")
    parser.add_argument(
        "--clip-ab", type=int, default=0, metavar="ROLLOUTS",
        help="instead of the campaign: the gradient-clipping A/B (clip_ab) over that many rollouts, first seed",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick and not args.clip_ab:
        args.budget_scale, args.seeds, args.n_evals = 0.02, [0, 1], 2
        args.eval_episodes, args.final_episodes, args.random_episodes, args.bootstrap_reps = 2, 3, 5, 200
        if args.contenders == ",".join(CONTENDERS):
            args.contenders = "single,mc-scalarize-shared,mc-balanced-separate-vn"
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    campaign = CAMPAIGNS[args.campaign]
    th.set_num_threads(1)

    names = [name.strip() + args.overrides for name in args.contenders.split(",") if name.strip()]
    contenders = [make_contender(name, campaign) for name in names]
    budget = max(int(float(zoo_entry_of(CONFIG, campaign.env_id)["n_timesteps"]) * args.budget_scale), 1)

    def task(contender: Contender, seed: int, steps: int) -> MultiCriticTask:
        return MultiCriticTask(campaign.env_id, steps, contender, seed, args.n_evals, args.eval_episodes,
                               args.final_episodes, 0.2, per_style=campaign.per_style,
                               threshold=None if campaign.per_style else campaign.threshold)  # fmt: skip

    if args.clip_ab:
        report_clip_ab(args, campaign, [task(c, args.seeds[0], budget) for c in contenders])
        return

    experts = [make_contender(f"expert-{s}{args.overrides}", campaign) for s in campaign.groups] if campaign.per_style else []
    # the experts train on one style: the budget of one Pendulum-v1 run, half the two-style budget
    expert_seeds = args.seeds if args.expert_seeds is None else args.expert_seeds
    tasks = [task(c, seed, max(budget // 2, 1)) for seed in expert_seeds for c in experts]
    tasks += [task(c, seed, budget) for seed in args.seeds for c in contenders]  # seed-major, as learning.py
    if not args.report_only:
        run_all(tasks, args.out_dir, args.workers, None if args.time_limit is None else 60.0 * args.time_limit,
                runner=run_multi_critic)  # fmt: skip

    finished = [(t, run) for t in tasks if (run := load_cached(t, args.out_dir)) is not None]
    status = verify_runs(tasks, [run for _, run in finished], build_for_fingerprint)
    if status["stale"] and args.stale == "rerun" and not args.report_only:
        run_all(tasks, args.out_dir, args.workers, None, runner=run_multi_critic,
                rerun=frozenset(r["key"] for r in status["stale"]))  # fmt: skip
        finished = [(t, run) for t in tasks if (run := load_cached(t, args.out_dir)) is not None]
        status = verify_runs(tasks, [run for _, run in finished], build_for_fingerprint)
    cited = {id(r) for r in status["current"] + (status["unverified"] if args.unverified == "include" else [])}
    finished = [(t, run) for t, run in finished if id(run) in cited]
    provenance = provenance_note(status, args.unverified == "include")
    print(provenance)
    runs = [run for t, run in finished if t.contender in contenders]
    if not runs:
        print("no finished runs to report")
        return
    references = None
    if campaign.per_style:
        expert_runs = {s: [run for t, run in finished if t.contender == c] for s, c in enumerate(experts)}
        if not all(expert_runs.values()):
            print("the single-style experts have not finished: no score yet")
            return
        random = random_returns(campaign.env_id, args.random_episodes, run_cache(args.out_dir))
        runs, references = score_style_runs(runs, expert_runs, random, campaign.threshold)
    summary = summarize(runs, contenders, args.bootstrap_reps)
    command = reproducing_command("benchmarks/multi_critic.py", sys.argv[1:] if argv is None else argv)
    name = (args.name or args.campaign) + ("_quick" if args.quick else "")
    words = report_words(args, args.out_dir, f"{FOLDER}/{name}")
    table = markdown(name, campaign, summary, runs, command, references, provenance, words["question"])
    report = dict(**words, command=command, args=vars(args), summary=summary, references=references, runs=runs,
                  provenance=provenance_record(status, provenance))  # fmt: skip
    write_report(args.out_dir, f"{FOLDER}/{name}", report, table, lambda path: plot(runs, summary, contenders, path))
    print(table)


if __name__ == "__main__":
    main()
