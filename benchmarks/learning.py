"""
Side-by-side learning benchmark: SB3 PPO with rl-zoo3's tuned hyperparameters against XPPO's options, the same
seeds for every contender, in one run.

- **Hyperparameters**: every contender starts from rl-zoo3's own ``ppo.yml`` entry for the env, read and turned
  into objects by rl-zoo3's ``ExperimentManager`` (``lin_1e-3`` schedules, ``policy_kwargs`` strings, ``n_envs``,
  ``normalize``, env wrappers), which also builds the training and evaluation envs. XPPO contenders change only
  XPPO's own options and the overrides they name, so every difference in the table comes from them.
- **Contenders** (``--contenders``, a comma list of sets and names):

  - ``ppo``: ``stable_baselines3.PPO``; ``xppo``: ``sb3_xppo.XPPO`` with its constructor defaults;
  - ``recurrentppo``: sb3-contrib's ``RecurrentPPO``; ``xppo-lstm``: ``sb3_xppo.RecurrentXPPO`` with its defaults
    (``RecurrentPPO`` bit for bit; ``xppo-lstm@sequence_batching=True``: whole-sequence LSTM passes, issue 48), both
    on the envs of rl-zoo3's ``ppo_lstm.yml`` (``CartPoleNoVel-v1``, ``PendulumNoVel-v1``: :data:`ENV_CONFIGS`);
  - ``xppo-zoo``: XPPO with its own rl-zoo3 entry, from ``zoo_configs/xppo.yml`` instead of ``ppo.yml``: what
    ``python -m sb3_xppo.train`` trains;
  - ``xppo-recommended``: XPPO with :func:`sb3_xppo.xppo_recommended`'s options for the env over ``ppo.yml``'s
    entry (the run's JSON records them);
  - ``xppo-<actor>-<value>-<norm>[+toggle...]``: ``actor`` in ``clip, spo, asymmetric_spo``, ``value`` in
    ``mse, sb3, clipped, improved`` (the clipping ones get ``clip_range_vf=--clip-range-vf`` unless the zoo entry
    sets one), ``norm`` in ``mb`` (per minibatch, PPO's), ``rollout``, ``none``; toggles ``dual<c>``
    (``dual_clip=c``), ``delight`` or ``delight<temp>`` (delightful gate), ``lrc<c>`` (``log_ratio_clamp=c``),
    ``cr<low>:<high>`` (decoupled clip range);
  - any contender may end in hyperparameter overrides ``@<keyword>=<python literal>``, applied over the zoo
    entry (e.g. ``xppo-spo-mse-mb@n_steps=256@n_epochs=10``, ``ppo@learning_rate=1e-3``); XPPO's policy options
    (``@rpo_alpha=0.5``, ``@simba='critic'``, ``@hl_gauss={}``) are merged into the entry's ``policy_kwargs``. For
    tuning, whose winner is then compared again on fresh seeds. The env keys of an entry (``normalize``, ``n_envs``,
    ``frame_stack``, wrappers) replace the yml's before rl-zoo3 reads it, so
    ``@normalize={'norm_obs':False,'norm_reward':True}`` wraps the envs in ``VecNormalize`` as the zoo would,
    and a quoted schedule (``@learning_rate='lin_3e-4'``) becomes rl-zoo3's linear schedule; ``@vec_env='envpool'``
    trains on the VecEnv of that name (``python -m sb3_xppo.train``'s ``--vec-env`` choices; rl-zoo3's
    ``DummyVecEnv`` without it), e.g. ``ppo@vec_env='envpool'`` against ``ppo`` for EnvPool's learning equivalence,
    and evaluates on gymnasium's env as every contender does;
  - sets: ``defaults`` (ppo, xppo); ``grid`` (ppo and actor x value in {mse, clipped, improved} with ``mb``,
    leaving out ``xppo-clip-mse-mb``, which is PPO: the same parameters after ``learn()``, but for the last
    update when a linear clip schedule ends below 0, where PPO clamps to an empty range and XPPO to ``1e-8``);
    ``grid-rollout``, ``grid-none`` (the same grid with that normalization, all 9 cells); ``toggles:<name>``
    (name, +dual3, +delight, +dual3+delight); ``improvements`` (ppo and each single option of the improvements
    screen: RPO at a=0.5, value normalization, the HL-Gauss classification critic with value normalization, a SimBa
    critic); ``recommended`` (ppo and xppo-recommended, the confirmation).

- **Envs and budgets**: the zoo's ``n_timesteps`` times ``--budget-scale``. Thresholds for "steps to threshold"
  (first evaluation whose mean return reaches it): CartPole-v1 475, Acrobot-v1 -100, Pendulum-v1 -200,
  LunarLander-v3 200, LunarLanderContinuous-v3 200.
- **Metrics**: final deterministic eval return (``--final-episodes`` episodes after training), its IQM over seeds
  with a 95% stratified-bootstrap CI (rliable), steps to threshold, the mean of the eval curve (area under the
  curve / budget), eval curves (SB3's ``EvalCallback``, deterministic, ``--n-evals`` points) and the wall-clock
  time of ``learn()``.
- **Cache**: each (env, budget, contender, seed) run is one JSON under ``<out-dir>/learning_runs/`` holding a
  key of its full configuration (not the contender's name); a run whose key matches, under any contender's name,
  is not run again, so a campaign continues across sessions. ``--report-only`` writes the outputs from the cache
  alone.
- **Provenance** (``benchmarks/provenance.py``): each run records the code that made it (the package's commit and
  the library versions) and a behavioural fingerprint of its configuration (the parameters after the first update,
  at seed 0). A report recomputes each configuration's fingerprint with today's code: a run whose fingerprint
  differs is stale and left out (``--stale rerun`` runs it again), one made before fingerprints existed is
  unverified (``--unverified include``, the default, keeps it and the report says how many). A bit-exact change
  keeps every fingerprint, so it costs no reruns.
- **Outputs**: the campaign's folder ``<out-dir>/<name>/``: ``report.json`` (its question, command, provenance, the
  summary, and the runs it cites, named by env, contender, seed, cache key and file, not copied), ``report.md`` (the
  tables) and ``plot.png`` (eval curves, mean and min-max band over seeds, two panels a row), from the finished runs
  among those asked for. ``benchmarks/render_docs.py`` renders the pages' tables from the ``report.json`` files.
- **Workers**: ``--workers N`` runs N trainings at once in a process pool, one torch thread each.

usage: python benchmarks/learning.py [--envs CartPole-v1 ...] [--contenders grid] [--seeds 0 1 2 3 4]
                                     [--budget-scale 1.0] [--workers 1] [--time-limit MINUTES] [--name NAME]
                                     [--question TEXT] [--report-only] [--quick]
                                     [--stale exclude|rerun] [--unverified include|exclude]
       (--quick: CartPole-v1, 5k steps, one seed, ppo vs xppo: a smoke test of well under a minute)
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import functools
import glob
import hashlib
import io
import json
import os
import platform
import re
import shlex
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from typing import Any

import numpy as np
import rl_zoo3
import torch as th
from rl_zoo3.exp_manager import ExperimentManager
from sb3_contrib import RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, sync_envs_normalization

from sb3_xppo import XPPO, RecurrentXPPO
from sb3_xppo.common.options import CLIPPING_VALUE_LOSSES
from sb3_xppo.zoo import CONFIG_PATH, VEC_ENV_CHOICES
from sb3_xppo.zoo.vec_envs import ZOO_VEC_ENV_CLASSES

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
if BENCHMARKS not in sys.path:  # imported by path (tests): provenance.py is its sibling
    sys.path.insert(0, BENCHMARKS)
from provenance import behaviour_fingerprint, code_record  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: Mean eval return that counts as solved, for "steps to threshold"
THRESHOLDS: dict[str, float] = {
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "Pendulum-v1": -200.0,
    "LunarLander-v3": 200.0,
    "LunarLanderContinuous-v3": 200.0,
    "BipedalWalker-v3": 300.0,
    "Hopper-v5": 3000.0,
    "HalfCheetah-v5": 3000.0,
}
ACTORS = ("clip", "spo", "asymmetric_spo")
VALUES = ("mse", "sb3", "clipped", "improved")
GRID_VALUES = ("mse", "clipped", "improved")
NORMS = {"mb": "minibatch", "rollout": "rollout", "none": False}
#: Part of every run's cache key: bump it when a change to ``run_task`` makes cached runs incomparable
RUN_FORMAT = 1
# overrides of these keys go into the zoo's yml entry before rl-zoo3 reads it: they shape the envs, not the model
ZOO_ENV_KEYS = ("normalize", "n_envs", "frame_stack", "env_wrapper", "vec_env_wrapper", "env_kwargs")
#: rl-zoo3's ppo.yml entries of the -v4 MuJoCo tasks under their v5 ids (ppo.yml has no v5 entries)
MUJOCO_V5_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo_mujoco_v5.yml")
#: rl-zoo3's RecurrentPPO entries: the partially observed envs (velocities hidden) of the recurrent contenders
PPO_LSTM_CONFIG = os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo_lstm.yml")
ENV_CONFIGS = {
    "Hopper-v5": MUJOCO_V5_CONFIG,
    "HalfCheetah-v5": MUJOCO_V5_CONFIG,
    "CartPoleNoVel-v1": PPO_LSTM_CONFIG,
    "PendulumNoVel-v1": PPO_LSTM_CONFIG,
}
#: :func:`sb3_xppo.xppo_recommended`'s options over the zoo's PPO entry
RECOMMENDED = "xppo-recommended"
#: the single options of the improvements screen (issue 15), each over the zoo's PPO entry
IMPROVEMENTS = (
    "xppo@rpo_alpha=0.5",
    "xppo@normalize_values=True",
    "xppo@value_loss='hl_gauss'@normalize_values=True",
    "xppo@simba='critic'",
)
# overrides of these are XPPO's policy options: they go into the entry's policy_kwargs, the zoo's kept
POLICY_OPTIONS = ("rpo_alpha", "simba", "simba_activation", "hl_gauss", "action_dist")
# a string override of these ('lin_3e-4') is an rl-zoo3 schedule: it goes into the entry too, for rl-zoo3 to build
SCHEDULE_KEYS = ("learning_rate", "clip_range", "clip_range_vf")
#: the override naming the training VecEnv (``@vec_env='envpool'``), one of ``sb3_xppo.zoo.VEC_ENV_CHOICES``; like
#: every override, part of the cache key only when given
VEC_ENV_OVERRIDE = "vec_env"


@dataclass(frozen=True)
class Contender:
    """A named algorithm and the keywords it adds to the zoo's PPO hyperparameters."""

    name: str
    algo: str  # "ppo", "xppo", "recurrentppo" or "xppo_lstm"
    kwargs: dict[str, Any] = field(default_factory=dict)
    config: str | None = None  # the yml the hyperparameters come from: None for rl-zoo3's ppo.yml


def parse_contender(name: str) -> Contender:
    """
    ``ppo``, ``xppo`` or ``xppo-<actor>-<value>-<norm>[+toggle...]`` (see the module docstring), each optionally
    followed by hyperparameter overrides ``@<keyword>=<value>`` (e.g. ``xppo-spo-mse-mb@n_steps=256@n_epochs=10``).

    :param name: the contender's name
    :return: the contender
    """
    base_name, *overrides = name.split("@")
    contender = _parse_base(base_name)
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.isidentifier() or key in ("n_timesteps", "env"):
            raise ValueError(
                f"bad override {override!r} in {name!r}: expected @<keyword>=<python literal>, a keyword of the "
                f"algorithm or one of the zoo entry's env keys {ZOO_ENV_KEYS} (n_timesteps is the budget's)"
            )
        try:
            contender.kwargs[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError) as error:
            raise ValueError(f"bad override {override!r} in {name!r}: {value!r} is not a python literal") from error
        if key == VEC_ENV_OVERRIDE and contender.kwargs[key] not in VEC_ENV_CHOICES:
            raise ValueError(f"bad override {override!r} in {name!r}: {key} is one of {VEC_ENV_CHOICES}")
        if key in SCHEDULE_KEYS and isinstance(contender.kwargs[key], str) and not _is_zoo_schedule(contender.kwargs[key]):
            raise ValueError(f"bad override {override!r} in {name!r}: a string {key} is an rl-zoo3 schedule, 'lin_<number>'")
    return replace(contender, name=name)


def _is_zoo_schedule(value: str) -> bool:
    kind, _, initial = value.partition("_")
    try:
        return kind == "lin" and float(initial) > 0
    except ValueError:
        return False


def _parse_base(name: str) -> Contender:
    if name in ("ppo", "xppo", "recurrentppo"):
        return Contender(name, name)
    if name == "xppo-lstm":
        return Contender(name, "xppo_lstm")
    if name == "xppo-zoo":
        return Contender(name, "xppo", config=str(CONFIG_PATH))
    if name == RECOMMENDED:
        return Contender(name, "xppo")  # its options depend on the env: for_env() adds them
    base, *toggles = name.split("+")
    parts = base.split("-")
    if len(parts) != 4 or parts[0] != "xppo" or parts[1] not in ACTORS or parts[2] not in VALUES or parts[3] not in NORMS:
        raise ValueError(
            f"unknown contender {name!r}: expected 'ppo', 'xppo', 'recurrentppo', 'xppo-lstm' or "
            "'xppo-<actor>-<value>-<norm>[+toggle...]' with actor in "
            f"{ACTORS}, value in {VALUES}, norm in {tuple(NORMS)}"
        )
    kwargs: dict[str, Any] = dict(actor_loss=parts[1], value_loss=parts[2], normalize_advantage=NORMS[parts[3]])
    for toggle in toggles:
        if toggle.startswith("dual"):
            kwargs["dual_clip"] = float(toggle[4:])
        elif toggle.startswith("delight"):
            kwargs["delightful"] = True
            if toggle[7:]:
                kwargs["delight_temp"] = float(toggle[7:])
        elif toggle.startswith("lrc"):
            kwargs["log_ratio_clamp"] = float(toggle[3:])
        elif toggle.startswith("cr") and ":" in toggle:
            low, high = toggle[2:].split(":")
            kwargs["clip_range"] = (float(low), float(high))
        else:
            raise ValueError(
                f"unknown toggle {toggle!r} in {name!r}: expected dual<c>, delight[<temp>], lrc<c> or cr<low>:<high>"
            )
    return Contender(name, "xppo", kwargs)


def for_env(contender: Contender, env_id: str) -> Contender:
    """
    The contender as it runs on ``env_id``: ``xppo-recommended`` gets :func:`sb3_xppo.xppo_recommended`'s options for
    the env (policy options, had it any, as overrides, which go into the entry's ``policy_kwargs``), under its own
    ``@`` overrides. They are part of its kwargs, hence of the cache key: a changed preset finds the runs of what it
    now is (:func:`load_cached`), or runs it.

    :param contender: a parsed contender
    :param env_id: the env it runs on
    :return: the contender, with the preset's options where it has one
    """
    if contender.name.split("@")[0] != RECOMMENDED:
        return contender
    return replace(contender, kwargs={**_recommended_options(env_id), **contender.kwargs})


@functools.cache
def _recommended_options(env_id: str) -> dict[str, Any]:
    """xppo_recommended's options for ``env_id``, flat (an env made once per id, for its action space)."""
    # (imported here: benchmarks/backfill_provenance.py runs this harness on the package as it was before the preset)
    from sb3_xppo import xppo_recommended

    options = xppo_recommended(env_id)
    policy_options = options.pop("policy_kwargs", {})
    return {**options, **policy_options}


def expand_contenders(spec: str) -> list[Contender]:
    """
    Turn ``--contenders`` (a comma list of set names and contender names) into contenders, without duplicates.

    :param spec: e.g. ``"grid"``, ``"defaults,xppo-spo-mse-mb+dual3"``, ``"toggles:xppo-spo-improved-mb"``
    :return: the contenders, in order
    """
    names: list[str] = []
    # commas inside an override's brackets (@normalize={'norm_obs':False,'norm_reward':True}) do not split
    for item in (s.strip() for s in re.split(r",(?![^{}\[\]()]*[}\])])", spec) if s.strip()):
        if item == "defaults":
            names += ["ppo", "xppo"]
        elif item in ("grid", "grid-rollout", "grid-none"):
            norm = {"grid": "mb", "grid-rollout": "rollout", "grid-none": "none"}[item]
            names += ["ppo"] + [
                f"xppo-{a}-{v}-{norm}"
                for a in ACTORS
                for v in GRID_VALUES
                # clip + mse + minibatch normalization is PPO itself (same parameters after learn(), docs/guide/xppo.md)
                if (a, v, norm) != ("clip", "mse", "mb")
            ]
        elif item == "improvements":
            names += ["ppo", *IMPROVEMENTS]
        elif item == "recommended":
            names += ["ppo", RECOMMENDED]
        elif item.startswith("toggles:"):
            base = item.split(":", 1)[1]
            names += [base, f"{base}+dual3", f"{base}+delight", f"{base}+dual3+delight"]
        else:
            names.append(item)
    return [parse_contender(n) for n in dict.fromkeys(names)]


def zoo_budget(env_id: str) -> int:
    """The zoo's ``n_timesteps`` for ``env_id`` in rl-zoo3's ``ppo.yml``."""
    return int(zoo_entry_of(None, env_id)["n_timesteps"])


def _zoo_manager(
    env_id: str, seed: int, log_folder: str, n_timesteps: int = 0, config: str | None = None
) -> ExperimentManager:
    """
    rl-zoo3's experiment manager on ``env_id``, quiet, without an eval callback (the benchmark has its own).

    :param config: the yml to read, rl-zoo3's ``ppo.yml`` when None (for the MuJoCo v5 ids, which it lacks, its
        -v4 entries in ``zoo_mujoco_v5.yml``)
    """
    if config is None:
        config = ENV_CONFIGS.get(env_id)
    with contextlib.redirect_stdout(io.StringIO()):
        return ExperimentManager(
            argparse.Namespace(),
            "ppo",
            env_id,
            log_folder,
            n_timesteps=n_timesteps,
            eval_freq=-1,
            seed=seed,
            verbose=0,
            device="cpu",
            config=config,
        )


def zoo_entry_of(config: str | None, env_id: str) -> dict[str, Any]:
    """The raw entry of ``env_id`` in the yml ``config`` (rl-zoo3's ``ppo.yml`` when None), as rl-zoo3 reads it."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _zoo_manager(env_id, seed=0, log_folder=tempfile.gettempdir(), config=config).read_hyperparameters()[0]


def zoo_setup(
    env_id: str,
    seed: int,
    budget: int,
    log_folder: str,
    entry_overrides: dict[str, Any] | None = None,
    config: str | None = None,
    vec_env: str | None = None,
) -> tuple[dict[str, Any], VecEnv, VecEnv, list[BaseCallback], dict[str, Any]]:
    """
    rl-zoo3's tuned PPO hyperparameters for ``env_id`` turned into objects, and the envs built the zoo's way.

    Uses ``ExperimentManager.read_hyperparameters`` / ``_preprocess_hyperparams`` / ``create_envs``: the steps of its
    ``setup_experiment`` up to the model, without its log folders and callbacks.

    :param entry_overrides: keys that replace the yml entry's before rl-zoo3 reads it (``normalize``, ``n_envs``...)
    :param config: the yml to read the entry from, rl-zoo3's ``ppo.yml`` when None
    :param vec_env: the training VecEnv's name (``sb3_xppo.zoo.VEC_ENV_CHOICES``; None: rl-zoo3's ``DummyVecEnv``);
        the evaluation VecEnv is rl-zoo3's ``DummyVecEnv`` whatever it is
    :return: model keywords (policy included), the training VecEnv, the evaluation VecEnv (no reward
        normalization, statistics synced by ``EvalCallback``), the entry's own callbacks and the raw yml entry
    """
    exp = _zoo_manager(env_id, seed, log_folder, n_timesteps=budget, config=config)
    with contextlib.redirect_stdout(io.StringIO()):
        raw, saved = exp.read_hyperparameters()
        raw.update(entry_overrides or {})
        hyperparams, exp.env_wrapper, callbacks, exp.vec_env_wrapper = exp._preprocess_hyperparams(raw)
        zoo_class = exp.vec_env_class
        if vec_env is not None:
            exp.vec_env_class = ZOO_VEC_ENV_CLASSES[vec_env]  # type: ignore[assignment]
        env = exp.create_envs(exp.n_envs, no_log=True)
        exp.vec_env_class = zoo_class
        eval_env = exp.create_envs(1, eval_env=True, no_log=True)
    return hyperparams, env, eval_env, callbacks, dict(saved)


@dataclass(frozen=True)
class Task:
    """One training run."""

    env_id: str
    budget: int
    contender: Contender
    seed: int
    n_evals: int
    eval_episodes: int
    final_episodes: int
    clip_range_vf: float

    def key(self) -> str:
        """Hash of everything that determines the run's result (the cache key)."""
        spec = dict(
            format=RUN_FORMAT,
            env=self.env_id,
            budget=self.budget,
            algo=self.contender.algo,
            kwargs=self.contender.kwargs,
            seed=self.seed,
            n_evals=self.n_evals,
            eval_episodes=self.eval_episodes,
            final_episodes=self.final_episodes,
            clip_range_vf=self.clip_range_vf,
        )
        if self.contender.config is not None:  # a run from our own yml is stale once its entry changes
            spec["entry"] = zoo_entry_of(self.contender.config, self.env_id)
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def path(self, out_dir: str) -> str:
        # brackets, quotes and colons of an override (@normalize={'norm_obs':False}) stay out of the folder name
        folder = re.sub(r"[^\w@=.+,-]", "_", self.contender.name)
        return os.path.join(out_dir, "learning_runs", f"{self.env_id}_{self.budget}", folder, f"seed{self.seed}.json")


def load_cached(task: Task, out_dir: str) -> dict[str, Any] | None:
    """
    The cached result of ``task``, or None when no run of its configuration is cached.

    The key holds the configuration, not the contender's name, so a run under another name with the same key is the
    same run: ``xppo-recommended`` finds ``xppo@normalize_values=True``'s runs where the preset is that option, and a
    preset that changes finds what it now is. The task's own file is read first; the run comes back under the
    task's name, with ``file``, the path it was read from relative to ``out_dir``.
    """
    own = task.path(out_dir)
    seed_file = os.path.basename(own)
    env_dir = os.path.dirname(os.path.dirname(own))
    others = sorted(glob.glob(os.path.join(glob.escape(env_dir), "*", seed_file)))
    key = task.key()
    for path in dict.fromkeys([own, *others]):
        if not os.path.exists(path):  # the task's own file, when it has none
            continue
        with open(path) as f:
            run = json.load(f)
        if run.get("key") == key:
            return {**run, "contender": task.contender.name, "file": os.path.relpath(path, out_dir)}
    return None


class TrainTimer(BaseCallback):
    """The wall-clock seconds ``learn()`` spends in ``train()``: from each rollout's end to the next one's start."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0
        self._rollout_end: float | None = None

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self._rollout_end = time.perf_counter()

    def _stop(self) -> None:
        if self._rollout_end is not None:
            self.seconds += time.perf_counter() - self._rollout_end
            self._rollout_end = None

    def _on_rollout_start(self) -> None:
        self._stop()

    def _on_training_end(self) -> None:
        self._stop()


def _init_worker() -> None:
    th.set_num_threads(1)


def build_run(task: Task, log_folder: str) -> tuple[Any, VecEnv, VecEnv, list[BaseCallback], dict[str, Any], dict[str, Any]]:
    """
    The model, envs and callbacks of one run, as the zoo's entry and the contender's options make them.

    :return: ``(model, env, eval_env, zoo_callbacks, model_kwargs, zoo_entry)``
    """
    kwargs = dict(task.contender.kwargs)
    # copies: rl-zoo3 writes into the normalize dict (its gamma), and the cache key is the contender's
    to_entry = [k for k, v in kwargs.items() if k in ZOO_ENV_KEYS or (k in SCHEDULE_KEYS and isinstance(v, str))]
    entry_overrides = {key: copy.deepcopy(kwargs.pop(key)) for key in to_entry}
    vec_env = kwargs.pop(VEC_ENV_OVERRIDE, None)
    hyperparams, env, eval_env, zoo_callbacks, zoo_entry = zoo_setup(
        task.env_id, task.seed, task.budget, log_folder, entry_overrides, task.contender.config, vec_env
    )
    if kwargs.get("value_loss", "mse") in CLIPPING_VALUE_LOSSES:
        hyperparams.setdefault("clip_range_vf", task.clip_range_vf)
    elif task.contender.algo == "xppo" and "value_loss" in kwargs:
        # 'mse' means no value clipping: a zoo clip_range_vf would be ignored (with a warning)
        hyperparams.pop("clip_range_vf", None)
    # (the module's names, read at each call)
    algo = {"ppo": PPO, "xppo": XPPO, "recurrentppo": RecurrentPPO, "xppo_lstm": RecurrentXPPO}[task.contender.algo]
    # XPPO's policy options (@rpo_alpha=0.5, @simba='critic', ...) go into the entry's policy_kwargs
    policy_options = {key: kwargs.pop(key) for key in list(kwargs) if key in POLICY_OPTIONS}
    if policy_options:
        hyperparams["policy_kwargs"] = {**hyperparams.get("policy_kwargs", {}), **policy_options}
    hyperparams.update(kwargs)  # the contender's options and overrides win over the zoo entry
    model = algo(env=env, seed=task.seed, verbose=0, device="cpu", **hyperparams)
    return model, env, eval_env, zoo_callbacks, hyperparams, zoo_entry


#: fingerprints computed in this process, by the configuration's key at seed 0
_FINGERPRINTS: dict[str, str] = {}
#: ``build(task, log_folder) -> (model, callbacks that change training, envs to close)``
Builder = Callable[[Task, str], tuple[Any, list[BaseCallback], list[VecEnv]]]


def _build_for_fingerprint(task: Task, log_folder: str) -> tuple[Any, list[BaseCallback], list[VecEnv]]:
    model, env, eval_env, zoo_callbacks, _, _ = build_run(task, log_folder)
    return model, zoo_callbacks, [env, eval_env]


def fingerprint(task: Task, build: Builder | None = None) -> str:
    """
    The behavioural fingerprint of ``task``'s configuration with today's code
    (:func:`provenance.behaviour_fingerprint`, at seed 0 whatever the task's seed), computed once per process.

    :param task: the run
    :param build: how the run builds its model (default: :func:`build_run`'s)
    """
    reference = replace(task, seed=0)
    key = reference.key()
    if key not in _FINGERPRINTS:
        th.set_num_threads(1)
        with tempfile.TemporaryDirectory() as log_folder, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model, callbacks, envs = (build or _build_for_fingerprint)(reference, log_folder)
            _FINGERPRINTS[key] = behaviour_fingerprint(model, reference.budget, callbacks)
            for env in envs:
                env.close()
    return _FINGERPRINTS[key]


def run_task(task: Task) -> dict[str, Any]:
    """Train one contender on one env and seed; evaluate it along the way and at the end."""
    th.set_num_threads(1)
    code, behaviour = code_record(), fingerprint(task)
    with tempfile.TemporaryDirectory() as log_folder:
        model, env, eval_env, zoo_callbacks, hyperparams, zoo_entry = build_run(task, log_folder)
        n_envs = env.num_envs
        eval_every = max(task.budget // task.n_evals, 1)
        eval_callback = EvalCallback(
            eval_env,
            n_eval_episodes=task.eval_episodes,
            eval_freq=max(eval_every // n_envs, 1),
            log_path=log_folder,  # EvalCallback keeps its curve only when it has somewhere to save it
            deterministic=True,
            verbose=0,
            warn=False,
        )
        train_timer = TrainTimer()
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.learn(task.budget, callback=[*zoo_callbacks, eval_callback, train_timer])
        learn_s = time.perf_counter() - start
        sync_envs_normalization(model.get_env(), eval_env)
        final_returns, _ = evaluate_policy(
            model, eval_env, n_eval_episodes=task.final_episodes, deterministic=True, return_episode_rewards=True
        )
        total_s = time.perf_counter() - start
        env.close()
        eval_env.close()

    steps = [int(s) for s in eval_callback.evaluations_timesteps]
    means = [float(np.mean(r)) for r in eval_callback.evaluations_results]
    threshold = THRESHOLDS.get(task.env_id)
    reached = [s for s, m in zip(steps, means, strict=True) if threshold is not None and m >= threshold]
    return dict(
        key=task.key(),
        env=task.env_id,
        budget=task.budget,
        contender=task.contender.name,
        algo=task.contender.algo,
        kwargs={k: v for k, v in task.contender.kwargs.items()},
        seed=task.seed,
        zoo_entry={k: str(v) for k, v in zoo_entry.items()},
        model_kwargs={k: repr(v) for k, v in hyperparams.items()},
        eval_steps=steps,
        eval_means=means,
        eval_stds=[float(np.std(r)) for r in eval_callback.evaluations_results],
        final_returns=[float(r) for r in final_returns],
        final_mean=float(np.mean(final_returns)),
        threshold=threshold,
        steps_to_threshold=reached[0] if reached else None,
        curve_mean=float(np.mean(means)) if means else None,
        learn_seconds=learn_s,
        train_seconds=train_timer.seconds,
        total_seconds=total_s,
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        host=dict(platform=platform.platform(), cpus=os.cpu_count(), torch=th.__version__, loadavg=os.getloadavg()),
        code=code,
        fingerprint=behaviour,
    )


def save_run(run: dict[str, Any], path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(run, f, indent=1)
    os.replace(tmp, path)  # atomic: an interrupted campaign never leaves half a file


def run_all(
    tasks: list[Task],
    out_dir: str,
    workers: int,
    time_limit_s: float | None,
    runner: Callable[[Task], dict] | None = None,
    rerun: frozenset[str] = frozenset(),
) -> None:
    """
    Run the tasks that have no cached result, ``workers`` at a time; none starts after ``time_limit_s`` seconds.

    The cache is read again before each start, so two campaigns sharing ``out_dir`` skip what the other finished.
    ``runner`` (default :func:`run_task`) trains one task and returns its run record (``benchmarks/multi_critic.py``
    brings its own). ``rerun``: the keys of tasks to run again although cached (stale runs, :func:`verify_runs`).
    """
    runner = run_task if runner is None else runner

    def pending(task: Task) -> bool:
        return (task.key() in rerun and task.key() not in rerun_done) or load_cached(task, out_dir) is None

    todo = [t for t in tasks if pending(t)]
    print(f"{len(tasks) - len(todo)} of {len(tasks)} runs cached, {len(todo)} to run with {workers} worker(s)", flush=True)
    start = time.monotonic()
    queue = iter(todo)
    rerun_done: set[str] = set()

    def next_task() -> Task | None:
        for task in queue:
            if time_limit_s is not None and time.monotonic() - start > time_limit_s:
                print("time limit reached: no new run started", flush=True)
                return None
            if pending(task):
                return task
        return None

    def report(task: Task, run: dict[str, Any]) -> None:
        save_run(run, task.path(out_dir))
        rerun_done.add(task.key())
        print(
            f"[{time.strftime('%H:%M:%S')}] {task.env_id} {task.contender.name} seed {task.seed}: "
            f"final {run['final_mean']:.1f}, to threshold {run['steps_to_threshold']}, {run['learn_seconds']:.0f}s",
            flush=True,
        )

    if workers <= 1:
        while (task := next_task()) is not None:
            report(task, runner(task))
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker) as pool:
        futures = {}
        while len(futures) < workers and (task := next_task()) is not None:
            futures[pool.submit(runner, task)] = task
        while futures:
            done = next(as_completed(futures))
            report(futures.pop(done), done.result())
            if (task := next_task()) is not None:
                futures[pool.submit(runner, task)] = task


def verify_runs(
    tasks: list[Task], runs: list[dict[str, Any]], build: Builder | None = None
) -> dict[str, list[dict[str, Any]]]:
    """
    The cited runs by provenance: ``current`` (the fingerprint the run recorded is its configuration's with today's
    code, :func:`fingerprint`), ``stale`` (it is not: today's code would train differently, or refuses the
    configuration with a ``ValueError`` or ``TypeError``) and ``unverified`` (recorded before runs had fingerprints).
    One fingerprint per configuration, a few seconds each.

    :param tasks: the report's tasks
    :param runs: their cached runs
    :param build: how the runs build their models (:func:`fingerprint`)
    """
    by_key = {task.key(): task for task in tasks}
    status: dict[str, list[dict[str, Any]]] = dict(current=[], stale=[], unverified=[])
    for run in runs:
        recorded = run.get("fingerprint")
        if recorded is None:
            status["unverified"].append(run)
            continue
        try:
            today = fingerprint(by_key[run["key"]], build)
        except (ValueError, TypeError):  # today's code refuses the configuration: it would not train this run
            today = None
        status["current" if recorded == today else "stale"].append(run)
    return status


def provenance_note(status: dict[str, list[dict[str, Any]]], unverified_included: bool) -> str:
    """The report's line on what its runs were verified against."""

    def listed(runs: list[dict[str, Any]]) -> str:
        return ", ".join(f"{r['env']} {r['contender']} seed {r['seed']}" for r in runs)

    note = (
        f"Provenance: {len(status['current'])} runs current (their behavioural fingerprint is today's code's, "
        "`benchmarks/provenance.py`)"
    )
    if status["unverified"]:
        verb = "included" if unverified_included else "left out"
        note += f"; {len(status['unverified'])} unverified (made before runs recorded a fingerprint), {verb}"
    if status["stale"]:
        note += f"; {len(status['stale'])} stale and left out (rerun with `--stale rerun`): {listed(status['stale'])}"
    return note + "."


def provenance_record(status: dict[str, list[dict[str, Any]]], note: str) -> dict[str, Any]:
    """The report JSON's ``provenance``: its note, and the runs of each status by env, contender and seed."""
    runs = {k: [dict(env=r["env"], contender=r["contender"], seed=r["seed"]) for r in v] for k, v in status.items()}
    return dict(note=note, **runs)


def iqm_with_ci(scores: dict[str, np.ndarray], reps: int) -> dict[str, tuple[float, float, float]]:
    """
    IQM over seeds and its 95% stratified-bootstrap CI (rliable), per contender: ``(iqm, low, high)``.

    Reproducible: rliable's ``StratifiedBootstrap`` draws its resamples from NumPy's global generator (whatever
    ``random_state`` says), so each contender's bootstrap starts from the same seed, which also makes its CI
    independent of the other contenders in the report; the caller's global state is restored.
    """
    from rliable import library as rly
    from rliable import metrics

    estimates, state = {}, np.random.get_state()
    try:
        for name, values in scores.items():
            np.random.seed(0)
            point, interval = rly.get_interval_estimates(
                {name: values.reshape(-1, 1)},  # (runs, tasks=1)
                lambda x: np.array([metrics.aggregate_iqm(x)]),
                reps=reps,
            )
            estimates[name] = (float(point[name][0]), float(interval[name][0, 0]), float(interval[name][1, 0]))
    finally:
        np.random.set_state(state)
    return estimates


def final_return_row(runs: list[dict[str, Any]], iqm: tuple[float, float, float]) -> dict[str, Any]:
    """
    The final-return part of a contender's summary row: its seeds, the final return per seed, their IQM with its 95%
    CI (``iqm``, :func:`iqm_with_ci`'s entry), mean and std.

    :param runs: the contender's runs, sorted by seed
    """
    finals = np.array([r["final_mean"] for r in runs])
    return dict(
        seeds=[r["seed"] for r in runs],
        final_per_seed=finals.tolist(),
        final_iqm=iqm[0],
        final_iqm_ci=[iqm[1], iqm[2]],
        final_mean=float(finals.mean()),
        final_std=float(finals.std()),
    )


def summarize(runs: list[dict[str, Any]], contenders: list[Contender], reps: int) -> dict[str, Any]:
    """
    Per env and contender: seeds, final return (IQM + CI, mean, std), steps to threshold, curve mean (mean, IQM + CI:
    the area under the learning curve, sample efficiency), wall-clock.
    """
    summary: dict[str, Any] = {}
    for env_id in dict.fromkeys(r["env"] for r in runs):
        env_runs = [r for r in runs if r["env"] == env_id]
        by_name = {c.name: [r for r in env_runs if r["contender"] == c.name] for c in contenders}
        by_name = {k: sorted(v, key=lambda r: r["seed"]) for k, v in by_name.items() if v}
        iqm = iqm_with_ci({k: np.array([r["final_mean"] for r in v]) for k, v in by_name.items()}, reps)
        curve_iqm = iqm_with_ci({k: np.array([r["curve_mean"] for r in v]) for k, v in by_name.items()}, reps)
        rows = {}
        for name, rs in by_name.items():
            reached = [r["steps_to_threshold"] for r in rs if r["steps_to_threshold"] is not None]
            rows[name] = dict(
                **final_return_row(rs, iqm[name]),
                reached=len(reached),
                median_steps_to_threshold=float(np.median(reached)) if reached else None,
                curve_mean=float(np.mean([r["curve_mean"] for r in rs])),
                curve_iqm=curve_iqm[name][0],
                curve_iqm_ci=[curve_iqm[name][1], curve_iqm[name][2]],
                learn_seconds=float(np.mean([r["learn_seconds"] for r in rs])),
                # (runs cached before the timer existed have none)
                train_seconds=float(np.mean(timed))
                if (timed := [r["train_seconds"] for r in rs if "train_seconds" in r])
                else None,
            )
        summary[env_id] = dict(budget=env_runs[0]["budget"], threshold=env_runs[0]["threshold"], contenders=rows)
    return summary


def train_cost(seconds: float | None, ppo_seconds: float | None) -> str:
    """A table cell: ``train()`` seconds and their ratio to PPO's in the same env, where both were timed."""
    if seconds is None:
        return "-"
    return f"{seconds:.0f}" + (f" ({seconds / ppo_seconds:.2f}x)" if ppo_seconds else "")


#: What the columns of a learning report mean (its report.md)
COLUMNS = (
    "Final: mean return of the deterministic evaluation episodes after training, per seed; IQM over seeds with its 95% "
    "stratified-bootstrap CI (rliable). Reached: seeds whose mean eval return reached the threshold; steps: median "
    "over those seeds of the first evaluation at or above it. Curve: mean eval return over the run (area under the "
    "curve / budget), IQM over seeds with its 95% CI. Wall: mean seconds of `learn()` per run, and of its `train()` "
    "calls with their ratio to PPO's (one torch thread; a campaign's runs may come from sessions under different loads "
    "of a shared machine, so compare loosely: `benchmarks/overhead.py` times `train()` side by side; '-' where not "
    "timed). "
    "`ppo` is SB3 PPO with rl-zoo3's ppo.yml entry, `xppo-zoo` XPPO with its entry in zoo_configs/xppo.yml, the "
    "other XPPO contenders add their options and `@` overrides to ppo.yml's entry."
)


def report_header(kind: str, name: str, command: str, question: str, provenance: str) -> list[str]:
    """
    The opening lines of a campaign's report.md: its title, question, command and provenance.

    :param kind: "Learning" or "Multi-critic"
    :param name: the campaign
    :param command: the command that writes the report (with ``--report-only``: from the run cache alone)
    :param question: what the campaign asks ("" when not given)
    :param provenance: :func:`provenance_note`'s line ("" when none)
    """
    lines = [f"# {kind} campaign `{name}`", ""]
    if question:
        lines += [f"**Question:** {question}", ""]
    lines.append(f"**Command:** `{command}` (add `--report-only` to write this report from the run cache alone).")
    if provenance:
        lines += ["", provenance]
    return lines


def markdown(summary: dict[str, Any], name: str, command: str, provenance: str = "", question: str = "") -> str:
    """The campaign's report.md: :func:`report_header`, then per env a table of every contender."""
    lines = [*report_header("Learning", name, command, question, provenance), "", COLUMNS]
    for env_id, env_summary in summary.items():
        rows = env_summary["contenders"]
        lines += [
            "",
            f"## {env_id}: {env_summary['budget']:,} steps, threshold {env_summary['threshold']}",
            "",
            "| contender | seeds | final IQM [95% CI] | final mean ± std | reached | steps to threshold | "
            "curve IQM [95% CI] | wall s | train() s (÷ PPO) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        ppo_train = rows.get("ppo", {}).get("train_seconds")
        for cname, row in sorted(rows.items(), key=lambda kv: (-kv[1]["final_iqm"], -kv[1]["curve_mean"])):
            steps = f"{row['median_steps_to_threshold']:,.0f}" if row["median_steps_to_threshold"] is not None else "-"
            lines.append(
                f"| {'**ppo (zoo)**' if cname == 'ppo' else cname} | {','.join(map(str, row['seeds']))} | "
                f"{row['final_iqm']:.1f} [{row['final_iqm_ci'][0]:.1f}, {row['final_iqm_ci'][1]:.1f}] | "
                f"{row['final_mean']:.1f} ± {row['final_std']:.1f} | {row['reached']}/{len(row['seeds'])} | {steps} | "
                f"{row['curve_iqm']:.1f} [{row['curve_iqm_ci'][0]:.1f}, {row['curve_iqm_ci'][1]:.1f}] | "
                f"{row['learn_seconds']:.0f} | {train_cost(row.get('train_seconds'), ppo_train)} |"
            )
    return "\n".join(lines) + "\n"


def campaign_files(out_dir: str, name: str) -> dict[str, str]:
    """The paths of a campaign's outputs: ``<out_dir>/<name>/report.json``, ``report.md`` and ``plot.png``."""
    folder = os.path.join(out_dir, name)
    return {
        kind: os.path.join(folder, file) for kind, file in (("json", "report.json"), ("md", "report.md"), ("png", "plot.png"))
    }


def run_reference(run: dict[str, Any]) -> dict[str, Any]:
    """A cited run as its report names it: env, contender, seed, the score it contributed, its cache key and file."""
    return {k: run.get(k) for k in ("env", "contender", "seed", "final_mean", "key", "file")}


def write_report(out_dir: str, name: str, report: dict[str, Any], table: str, draw: Callable[[str], None]) -> None:
    """
    Write a campaign's folder (:func:`campaign_files`): ``report.json`` (``report``, whose ``runs`` are named by
    :func:`run_reference`, not copied: the run cache holds them), ``report.md`` (``table``) and ``plot.png``
    (``draw(path)``).
    """
    files = campaign_files(out_dir, name)
    os.makedirs(os.path.dirname(files["json"]), exist_ok=True)
    with open(files["json"], "w") as f:
        json.dump({**report, "runs": [run_reference(r) for r in report["runs"]]}, f, indent=1)
    with open(files["md"], "w") as f:
        f.write(table)
    draw(files["png"])
    print(f"wrote {files['json']}, {files['md']}, {files['png']}")


def plot(runs: list[dict[str, Any]], summary: dict[str, Any], contenders: list[Contender], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(summary)
    ncols = min(len(envs), 2)  # two panels a row at most: legible at a page's width
    nrows = -(-len(envs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.5 * ncols, 5.0 * nrows), squeeze=False)
    for ax in axes.flat[len(envs) :]:
        ax.set_visible(False)
    colors = plt.get_cmap("tab10" if len(contenders) <= 11 else "tab20").colors
    # Min-max bands only while they stay readable
    bands = len(contenders) <= 4
    for ax, env_id in zip(axes.flat, envs, strict=False):
        for i, c in enumerate(contenders):
            rs = [r for r in runs if r["env"] == env_id and r["contender"] == c.name]
            if not rs:
                continue
            n = min(len(r["eval_means"]) for r in rs)
            steps = np.array(rs[0]["eval_steps"][:n])
            curves = np.array([r["eval_means"][:n] for r in rs])
            style = dict(color="black", lw=2.2) if c.name == "ppo" else dict(color=colors[(i - 1) % len(colors)], lw=1.3)
            ax.plot(steps, curves.mean(0), label=f"{c.name} ({len(rs)})", **style)
            if bands:
                ax.fill_between(steps, curves.min(0), curves.max(0), color=style["color"], alpha=0.1)
        if summary[env_id]["threshold"] is not None:
            ax.axhline(summary[env_id]["threshold"], color="gray", ls="--", lw=0.8)
        ax.set_title(f"{env_id} ({summary[env_id]['budget']:,} steps)", fontsize=13)
        ax.set_xlabel("environment steps", fontsize=11)
        ax.set_ylabel("eval return (mean" + (", min-max" if bands else "") + " over seeds)", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80, pil_kwargs=dict(optimize=True))  # legible at a page's width, small in the repository
    plt.close(fig)


# flags that change when and how often runs start, or the report's words, never what a finished run or a table holds;
# the ones with a value
_SCHEDULING_FLAGS = ("--report-only", "--time-limit", "--question")
_WITH_VALUE = ("--time-limit", "--question")


def shell_quote(arg: str) -> str:
    """``arg`` quoted for a POSIX shell, in double quotes where it holds single quotes and nothing a shell expands there."""
    if "'" in arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return shlex.quote(arg)


def reproducing_command(script: str, argv: list[str]) -> str:
    """
    The command that writes the same outputs as ``argv`` from the run cache, for the report's heading.

    ``--report-only``, ``--time-limit`` and ``--question`` (with their values) are left out: a campaign run in several
    sittings, each with its own limit, is one command.
    """
    kept, skip_value = [], False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg in _WITH_VALUE:
            skip_value = True
        elif arg.split("=", 1)[0] not in _SCHEDULING_FLAGS:
            kept.append(arg)
    return f"python {script} " + " ".join(shell_quote(arg) for arg in kept)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(THRESHOLDS), help="default: the five benchmark envs")
    parser.add_argument("--contenders", default="grid", help="comma list of sets (defaults, grid, ...) and names")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--budget-scale", type=float, default=1.0, help="times the zoo's n_timesteps")
    parser.add_argument("--n-evals", type=int, default=20, help="evaluations along each run")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--final-episodes", type=int, default=20)
    parser.add_argument("--clip-range-vf", type=float, default=0.2, help="for the clipping value losses")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=None, help="minutes after which no new run starts")
    parser.add_argument("--bootstrap-reps", type=int, default=5000)
    parser.add_argument(
        "--name", default=None, help="the campaign: its report goes to <out-dir>/<name>/ (default: main/quick)"
    )
    parser.add_argument("--question", default="", help="what the campaign asks, for its report (kept from the last report)")
    parser.add_argument("--out-dir", default=RESULTS)
    parser.add_argument("--report-only", action="store_true", help="write the outputs from cached runs, run nothing")
    parser.add_argument("--quick", action="store_true", help="smoke test: CartPole-v1, 5k steps, seed 0, ppo vs xppo")
    parser.add_argument(
        "--stale",
        choices=("exclude", "rerun"),
        default="exclude",
        help="runs whose fingerprint is no longer today's code's: left out of the report, or run again",
    )
    parser.add_argument(
        "--unverified",
        choices=("include", "exclude"),
        default="include",
        help="runs made before fingerprints were recorded: in the report (said so), or left out",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.envs, args.contenders, args.seeds, args.budget_scale = ["CartPole-v1"], "defaults", [0], 0.05
        args.n_evals, args.eval_episodes, args.final_episodes, args.bootstrap_reps = 2, 2, 3, 200
    name = args.name or ("quick" if args.quick else "main")
    th.set_num_threads(1)

    contenders = expand_contenders(args.contenders)
    budgets = {env_id: max(int(zoo_budget(env_id) * args.budget_scale), 1) for env_id in args.envs}
    tasks = [
        Task(
            env_id,
            budgets[env_id],
            for_env(c, env_id),
            seed,
            args.n_evals,
            args.eval_episodes,
            args.final_episodes,
            args.clip_range_vf,
        )
        for env_id in args.envs
        for seed in args.seeds  # seed-major: an interrupted campaign has every contender at the same seeds
        for c in contenders
    ]
    if not args.report_only:
        time_limit = None if args.time_limit is None else 60.0 * args.time_limit
        run_all(tasks, args.out_dir, args.workers, time_limit)

    runs = [run for run in (load_cached(t, args.out_dir) for t in tasks) if run is not None]
    status = verify_runs(tasks, runs)
    if status["stale"] and args.stale == "rerun" and not args.report_only:
        run_all(tasks, args.out_dir, args.workers, None, rerun=frozenset(r["key"] for r in status["stale"]))
        runs = [run for run in (load_cached(t, args.out_dir) for t in tasks) if run is not None]
        status = verify_runs(tasks, runs)
    runs = status["current"] + (status["unverified"] if args.unverified == "include" else [])
    provenance = provenance_note(status, args.unverified == "include")
    print(provenance)
    if not runs:
        print("no finished runs to report")
        return
    summary = summarize(runs, contenders, args.bootstrap_reps)
    # the command that reproduces the outputs: --report-only writes the same ones from the cache
    command = reproducing_command("benchmarks/learning.py", sys.argv[1:] if argv is None else argv)
    question = args.question or previous_question(args.out_dir, name)
    table = markdown(summary, name, command, provenance, question)
    report = dict(
        question=question,
        command=command,
        args=vars(args),
        summary=summary,
        runs=runs,
        provenance=provenance_record(status, provenance),
    )
    write_report(args.out_dir, name, report, table, lambda path: plot(runs, summary, contenders, path))
    print(table)


def previous_question(out_dir: str, name: str) -> str:
    """The question the campaign's last report.json states ("" when it has none), so a rewrite keeps it."""
    path = campaign_files(out_dir, name)["json"]
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return json.load(f).get("question", "")


if __name__ == "__main__":
    main()
