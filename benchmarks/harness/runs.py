"""
One training run of a campaign (:class:`Task`), its cache and provenance check, and the pool that runs them.

- **Cache**: each (env, budget, contender, seed) run is one JSON in the run cache (:func:`harness.layout.run_cache`),
  holding a key of its full configuration (not the contender's name): a run whose key matches, under any contender's
  name, is not run again (:func:`load_cached`).
- **Provenance**: each run records the code that made it and the behavioural fingerprint of its configuration
  (:mod:`harness.provenance`); :func:`verify_runs` sorts cited runs into current, stale and unverified.
- **Resume**: an XPPO run of the pool writes resumable checkpoints (``sb3_xppo.ResumableCheckpoint``, every
  :data:`CHECKPOINT_SECONDS`) into ``partial/<key>-<fingerprint>/`` (:func:`harness.layout.partial_runs`). A campaign
  killed at a session's end starts its runs under way from there next time and finishes them as they would have
  finished (docs/guide/resume.md: exact resume), so a long run may span sessions; the record sums each session's
  seconds and lists the steps it was resumed at (``resumed_at``; null for a run never resumed). The behavioural
  fingerprint in the folder's name keeps a session whose code trains differently from resuming another code's run:
  it starts the run afresh.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import glob
import hashlib
import json
import os
import pickle
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing import get_context
from typing import Any

import numpy as np
import torch as th
from sb3_contrib import RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, sync_envs_normalization

from harness.contenders import (
    DEPTH_OVERRIDE,
    PI_ARCH_OVERRIDE,
    POLICY_OPTIONS,
    RANKS_OVERRIDE,
    SCHEDULE_KEYS,
    VEC_ENV_OVERRIDE,
    ZOO_ENV_KEYS,
    Contender,
    deepened,
    with_actor,
)
from harness.layout import partial_runs, run_cache
from harness.provenance import behaviour_fingerprint, code_record
from harness.train_episodes import TrainEpisodes
from harness.train_logs import TrainLogs
from harness.zoo import zoo_entry_of, zoo_setup
from sb3_xppo import XPPO, RecurrentXPPO, ResumableCheckpoint
from sb3_xppo.common.options import CLIPPING_VALUE_LOSSES

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
#: Part of every run's cache key: bump it when a change to ``run_task`` makes cached runs incomparable
RUN_FORMAT = 1
#: How often a run of the pool writes a resumable checkpoint, in seconds of wall-clock time (at the next rollout
#: boundary; where checkpoints are written does not change the run)
CHECKPOINT_SECONDS = 300.0


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
        return os.path.join(run_cache(out_dir), f"{self.env_id}_{self.budget}", folder, f"seed{self.seed}.json")


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

    def resumable_state(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.seconds = float(state["seconds"])


class Stopwatch(BaseCallback):
    """
    The wall-clock seconds of a run's earlier sessions and the steps it was resumed at: resumable (its state in the
    run's checkpoints), so a run that spans sessions sums them. Reads only: a run trains the same with it.
    """

    def __init__(self) -> None:
        super().__init__()
        #: seconds of the sessions before this one, up to their last checkpoint
        self.before = 0.0
        #: ``num_timesteps`` at each resume
        self.resumed_at: list[int] = []
        self._start = time.perf_counter()

    def _on_step(self) -> bool:
        return True

    def seconds(self) -> float:
        """:return: the run's seconds so far: the earlier sessions' and this one's since the stopwatch was made"""
        return self.before + time.perf_counter() - self._start

    def resumable_state(self) -> dict[str, Any]:
        return {"seconds": self.seconds(), "resumed_at": self.resumed_at}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.before, self.resumed_at = float(state["seconds"]), [*state["resumed_at"], self.model.num_timesteps]


def init_worker() -> None:
    """A pool worker's setup: one torch thread."""
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
    ranks = kwargs.pop(RANKS_OVERRIDE, 1)
    depth = kwargs.pop(DEPTH_OVERRIDE, None)
    pi_arch = kwargs.pop(PI_ARCH_OVERRIDE, None)
    if ranks > 1:  # one rank's part: the entry's envs and minibatch divided; data-parallel where launched
        entry = zoo_entry_of(task.contender.config, task.env_id)
        entry_overrides["n_envs"] = entry_overrides.get("n_envs", entry.get("n_envs", 1)) // ranks
        kwargs["batch_size"] = kwargs.get("batch_size", entry.get("batch_size", 64)) // ranks
        kwargs["distributed"] = "RANK" in os.environ  # outside the launcher (the fingerprint): rank 0's model alone
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
    if depth is not None:  # the entry's networks, deeper
        policy_kwargs = hyperparams.get("policy_kwargs", {})
        hyperparams["policy_kwargs"] = {**policy_kwargs, "net_arch": deepened(policy_kwargs.get("net_arch"), depth)}
    if pi_arch is not None:  # the entry's actor, other layers
        policy_kwargs = hyperparams.get("policy_kwargs", {})
        hyperparams["policy_kwargs"] = {**policy_kwargs, "net_arch": with_actor(policy_kwargs.get("net_arch"), pi_arch)}
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


def resumable(task: Task) -> bool:
    """Whether ``task``'s runs write resumable checkpoints: XPPO's family in one process."""
    return task.contender.algo in ("xppo", "xppo_lstm") and task.contender.kwargs.get(RANKS_OVERRIDE, 1) == 1


def run_task(task: Task, partial: str | None = None) -> dict[str, Any]:
    """
    Train one contender on one env and seed; evaluate it along the way and at the end. A contender with ``@ranks=N``
    trains on ``N`` processes started by PyTorch's launcher (:func:`run_on_ranks`).

    :param partial: the folder of the runs under way (:func:`harness.layout.partial_runs`): a :func:`resumable` run
        checkpoints into its ``<key>-<fingerprint>/`` and resumes from there (None: it runs whole, as before)
    """
    th.set_num_threads(1)
    code, behaviour = code_record(), fingerprint(task)
    ranks = task.contender.kwargs.get(RANKS_OVERRIDE, 1)
    if ranks != 1:
        record = run_on_ranks(task, ranks)
    else:
        # (named by the fingerprint too: a session whose code trains differently starts the run afresh)
        folder = os.path.join(partial, f"{task.key()}-{behaviour}") if partial is not None and resumable(task) else None
        record = train_and_evaluate(task, folder)
    return {**record, "code": code, "fingerprint": behaviour}


def run_on_ranks(task: Task, ranks: int) -> dict[str, Any]:
    """
    ``task`` on ``ranks`` processes: ``python -m torch.distributed.run --standalone`` runs :mod:`harness.ranked` on
    each, which trains its part (:func:`train_and_evaluate`); rank 0 evaluates and writes the record.
    """
    with tempfile.TemporaryDirectory() as folder:
        task_file, out = os.path.join(folder, "task.pickle"), os.path.join(folder, "run.json")
        with open(task_file, "wb") as f:
            pickle.dump(task, f)
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)]
        benchmarks = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([benchmarks, os.environ.get("PYTHONPATH", "")]),
        }
        done = subprocess.run([*launcher, "-m", "harness.ranked", task_file, out], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{task.contender.name} seed {task.seed} failed on {ranks} ranks:\n{done.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)


def train_and_evaluate(task: Task, resume: str | None = None, every_seconds: float = CHECKPOINT_SECONDS) -> dict[str, Any]:
    """
    One run's training and evaluations (on a data-parallel run's every rank; rank 0 evaluates).

    :param resume: a folder of resumable checkpoints: the run resumes from its newest one, if any, and writes there
        every ``every_seconds`` (None: no checkpoints)
    """
    main = int(os.environ.get("RANK", 0)) == 0
    with tempfile.TemporaryDirectory() as log_folder:
        model, env, eval_env, zoo_callbacks, hyperparams, zoo_entry = build_run(task, log_folder)
        checkpoints: list[BaseCallback] = []
        if resume is not None:
            # no checkpoint yet: the run starts (the model built above sets the envs up as the first session did)
            with contextlib.suppress(FileNotFoundError):
                model = type(model).resume(resume, env=env, device="cpu")
            # first: the callbacks after it see a boundary written at once, in a resumed run too
            checkpoints.append(ResumableCheckpoint(resume, every_rollouts=None, every_seconds=every_seconds, keep=2))
        n_envs = env.num_envs * int(os.environ.get("WORLD_SIZE", 1))  # every rank's, as num_timesteps counts
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
        train_timer, train_logs, train_episodes, stopwatch = TrainTimer(), TrainLogs(), TrainEpisodes(), Stopwatch()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            evaluation = [eval_callback] if main else []
            callbacks = [*checkpoints, *zoo_callbacks, *evaluation, train_timer, train_logs, train_episodes, stopwatch]
            model.learn(task.budget, callback=callbacks)
        learn_s = stopwatch.seconds()
        sync_envs_normalization(model.get_env(), eval_env)
        final_returns = [float("nan")]  # (a rank other than 0: no record)
        if main:
            final_returns, _ = evaluate_policy(
                model, eval_env, n_eval_episodes=task.final_episodes, deterministic=True, return_episode_rewards=True
            )
        total_s = stopwatch.seconds()
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
        train_logs=train_logs.record(task.budget),
        train_episodes=train_episodes.record(model.n_steps * model.n_envs),
        learn_seconds=learn_s,
        train_seconds=train_timer.seconds,
        total_seconds=total_s,
        resumed_at=stopwatch.resumed_at or None,  # (null: never resumed)
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        host=dict(platform=platform.platform(), cpus=os.cpu_count(), torch=th.__version__, loadavg=os.getloadavg()),
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
    runner = functools.partial(run_task, partial=partial_runs(out_dir)) if runner is None else runner

    rerun_done: set[str] = set()

    def pending(task: Task) -> bool:
        return (task.key() in rerun and task.key() not in rerun_done) or load_cached(task, out_dir) is None

    todo = [t for t in tasks if pending(t)]
    print(f"{len(tasks) - len(todo)} of {len(tasks)} runs cached, {len(todo)} to run with {workers} worker(s)", flush=True)
    start = time.monotonic()
    queue = iter(todo)

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
        for folder in glob.glob(os.path.join(glob.escape(partial_runs(out_dir)), f"{task.key()}-*")):  # (cached now)
            shutil.rmtree(folder, ignore_errors=True)
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
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=init_worker) as pool:
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
