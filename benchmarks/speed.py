"""
``learn()`` speed of XPPO against SB3 PPO: env-steps per second on rl-zoo3's configs, one torch thread, with a
breakdown of where the time goes and the env-only limit beside it.

- **Configs**: each env's rl-zoo3 ``ppo.yml`` entry (``n_envs``, ``n_steps``, ``batch_size``, ``n_epochs``,
  schedules, ``normalize``...), turned into objects and its envs built by rl-zoo3's ``ExperimentManager``
  (``learning.zoo_setup``). XPPO gets the same keywords (its defaults are PPO's options: it must reproduce PPO bit
  for bit) plus ``--xppo-kwargs``, e.g. an opt-in fast path whose difference to PPO is then measured. The entry's
  own callbacks are left out. Each run trains a fresh model and fresh envs with the same seed for
  ``--rollouts`` rollouts (``n_steps * n_envs`` steps each): ``learn()`` with the entry's ``n_timesteps`` as its
  budget, so that schedules are as at the start of a zoo run, ended by a callback at the first step of the next
  rollout (that step is timed too, and not counted).
- **Speed**: per repetition (``--reps``), one uninstrumented ``learn()`` of PPO and one of XPPO and the env-only
  limit, in an order rotated every repetition, all in one process (machine noise hits all alike). Reported: best
  and median env-steps/s, the XPPO/PPO ratio of the bests, of the medians and the median over repetitions of the
  paired ratio (PPO seconds / XPPO seconds in the same repetition), and the same on CPU time (``process_time``).
  Model and env construction are outside the timing.
- **Env-only limit**: the same VecEnv, as rl-zoo3 builds it, stepped with random actions (``action_space.sample``
  per env, drawn outside the timed ``step``) for as many steps as one ``learn()``.
- **Breakdown**: ``--profile-reps`` extra runs of each algorithm with every piece timed (exclusive time: a nested
  piece is not counted again in its parent; the fastest run of each algorithm is shown), by wrapping methods of the
  run's own objects (``VecEnv.step_async/step_wait``, ``policy.forward/predict_values/reset_noise`` during collection,
  ``rollout_buffer.add``, ``compute_returns_and_advantage``, the minibatch generator ``rollout_buffer.get``,
  ``policy.evaluate_actions``) and, for the length of that run only, the optimizer class's ``zero_grad/step``, XPPO's
  exact fast step (``sb3_xppo.core.fast_paths.FlatAdam``: ``zero_grad``, ``clip_grad_norm``, ``step``, under the
  same names; it only takes an optimizer whose own ``step`` nobody wrapped) and two torch functions
  (``torch.autograd.backward``, which ``Tensor.backward`` calls, and ``torch.nn.utils.clip_grad_norm_``).
  The remainders are named "collection other" (``obs_as_tensor``, numpy copies, callbacks, episode info),
  "train other" (losses, advantage normalization, statistics) and "learn other" (logger, setup). Code that stops
  calling one of the wrapped methods (an optimized path) shows up in those remainders. Timing adds a few
  microseconds per wrapped call: the env-steps/s figures come from the uninstrumented runs only, and the JSON
  gives the instrumented runs' steps/s beside them (the instrument's overhead). ``--clock cpu`` (default) times
  the pieces with ``time.process_time``, which leaves out the time the process waited for a core on a shared
  machine (each reading costs ~1 us more than ``perf_counter``'s; it would miss the work of envs stepped in
  subprocesses, which the zoo entries here do not use); ``--clock wall`` with ``time.perf_counter``.
- **Exactness**: the parameters of PPO and XPPO after the first repetition (same seed) are compared: ``bit_exact``
  and the largest absolute difference.
- **Vector envs** (rows ``<env>@<vec env>``, e.g. ``LunarLander-v3@lean``): XPPO's training VecEnv is the one
  ``python -m sb3_xppo.train --vec-env <vec env>`` builds for the entry (``lean``: :class:`~sb3_xppo.vec_env.LeanVecEnv`,
  ``envpool``: :class:`~sb3_xppo.vec_env.EnvPoolVecEnv`), its envs made without a render mode; PPO's is what a PPO
  user trains on, SB3's ``make_vec_env(env_id)`` (``DummyVecEnv`` + ``Monitor``, each env made with
  ``render_mode="rgb_array"``, :data:`SB3_MAKE_VEC_ENV`); the env-only limit is XPPO's VecEnv. With ``lean`` the
  parameters are still PPO's bit for bit (the render mode changes no number); EnvPool's envs are other
  implementations of the tasks, so there the exactness columns show a difference. A plain ``<env>`` row builds both
  algorithms' envs as rl-zoo3 does (``DummyVecEnv``, no render mode): it measures the algorithm alone.
- **Targets** (docs/guide/development.md): on the lean VecEnv, XPPO >= 1.8x PPO's env-steps/s on LunarLander-v3 and
  >= 1.6x on LunarLanderContinuous-v3, and CartPole-v1 at 1.2x or more (:data:`TARGETS`), by the median paired ratio.
- **sb3-contrib** (``--contrib``): MaskableXPPO against MaskablePPO (``InvalidActionEnvDiscrete``) and RecurrentXPPO
  against RecurrentPPO (CartPole-v1, LSTM), fixed small configs (:func:`contrib_cases`): ``learn()`` of ``--rollouts``
  (default 2) rollouts each, alternating, paired ratios, and the same exactness check.
- **Sequence batching** (``--sequences``, issue 48): RecurrentXPPO with ``sequence_batching=True`` (whole-sequence
  LSTM passes in ``train()``) against RecurrentPPO on rl-zoo3's ``ppo_lstm.yml`` entries of ``CartPoleNoVel-v1`` and
  ``PendulumNoVel-v1`` (CartPole and Pendulum with the velocities hidden), envs built the zoo's way
  (``VecNormalize``): per repetition one ``learn()`` of each, alternating, fresh models and envs with the same seed,
  ``--rollouts`` rollouts (default :data:`SEQUENCE_ROLLOUTS`); the time of each ``train()`` call is summed on the
  side. Reported: ``learn()`` env-steps/s and the paired ratios of ``learn()`` and ``train()`` (wall and CPU time),
  against the targets ``train()`` >= 3x, ``learn()`` >= 2x (:data:`SEQUENCE_TARGETS`); the parameters after the first
  repetition differ by float rounding (``max_abs_param_diff``), not bit for bit.
- **Outputs**: a printed table, ``benchmarks/results/single/speed.json`` and ``speed.png`` (stacked bars: microseconds
  per env-step of each piece, per algorithm, per env). ``--envs --sequences --name speed_sequences`` writes the
  sequence-batching rows alone to ``single/speed_sequences.json``, which the docs render (``render_docs.py``).

usage: python benchmarks/speed.py [--envs CartPole-v1 LunarLander-v3@envpool ...] [--rollouts N] [--reps 3]
                                  [--profile-reps 1] [--clock cpu] [--seed 0] [--xppo-kwargs "{...}"] [--contrib]
                                  [--sequences] [--out-dir DIR] [--name speed]
       (``--envs --contrib``: the sb3-contrib comparison alone)
       (the defaults take about 4 minutes on one free core: 40 rollouts of CartPole-v1, 2 of LunarLander-v3, 3 of
       Pendulum-v1, per row; 3 repetitions and 1 instrumented run of each algorithm)
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import stable_baselines3
import torch as th
from harness.layout import RESULTS, SINGLE
from harness.paired import paired_times
from harness.provenance import code_record
from harness.speed_profile import ALGOS, CATEGORIES, CLOCKS, ENV_ONLY, Profiler, instrument, patched
from harness.speed_tables import format_contrib_table, format_sequences_table, format_table, plot
from harness.zoo import PPO_LSTM_CONFIG, zoo_setup  # rl-zoo3's hyperparameters and envs, one copy
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.zoo import VEC_ENV_CHOICES

#: The rows: an env id, or ``<env id>@<vec env>`` for XPPO on that VecEnv (``sb3_xppo.zoo.VEC_ENV_CHOICES``)
DEFAULT_ENVS = (
    "CartPole-v1",
    "LunarLander-v3",
    "Pendulum-v1",
    "CartPole-v1@lean",
    "LunarLander-v3@lean",
    "LunarLanderContinuous-v3@lean",
    "LunarLander-v3@envpool",
)
#: Rollouts per run when ``--rollouts`` is not given: a few seconds of ``learn()`` each (a CartPole rollout is 256 steps)
DEFAULT_ROLLOUTS = {"CartPole-v1": 40, "LunarLander-v3": 2, "LunarLanderContinuous-v3": 2, "Pendulum-v1": 3}
#: XPPO / PPO env-steps/s that docs/guide/development.md sets as targets, per row
TARGETS = {
    "CartPole-v1@lean": 1.2,
    "LunarLander-v3@lean": 1.8,
    "LunarLanderContinuous-v3@lean": 1.6,
}

#: The sequence-batching rows (``--sequences``): ``ppo_lstm.yml`` entries, and rollouts per run (CartPoleNoVel's is 256
#: steps and 20 epochs of one minibatch, PendulumNoVel's 4096 steps and 10 epochs of 32 minibatches)
SEQUENCE_ENVS = ("CartPoleNoVel-v1", "PendulumNoVel-v1")
SEQUENCE_ROLLOUTS = {"CartPoleNoVel-v1": 12, "PendulumNoVel-v1": 1}
#: RecurrentXPPO(sequence_batching=True) / RecurrentPPO: train() time and learn() env-steps/s (issue 48)
SEQUENCE_TARGETS = {"train": 3.0, "learn": 2.0}


def parse_row(row: str) -> tuple[str, str | None]:
    """
    :param row: ``<env id>`` or ``<env id>@<vec env>``
    :return: the env id and XPPO's VecEnv (None: SB3's ``make_vec_env``'s, as PPO's)
    :raises ValueError: for a VecEnv not in ``sb3_xppo.zoo.VEC_ENV_CHOICES``
    """
    env_id, sep, vec_env = row.partition("@")
    if sep and vec_env not in VEC_ENV_CHOICES:
        raise ValueError(f"bad row {row!r}: expected <env id>@<vec env> with vec env in {VEC_ENV_CHOICES}")
    return env_id, vec_env if sep else None


#: the ``vec_env`` of PPO's runs in a ``<env id>@<vec env>`` row: the envs of SB3's ``make_vec_env(env_id)``, what a PPO
#: user trains on (``DummyVecEnv`` + ``Monitor``, each env made with ``render_mode="rgb_array"``)
SB3_MAKE_VEC_ENV = "sb3"


def zoo_env(env_id: str, seed: int, log_folder: str, vec_env: str | None = None) -> tuple[dict[str, Any], VecEnv, int]:
    """
    rl-zoo3's PPO keywords for ``env_id`` (policy included), its training VecEnv built the zoo's way (with the VecEnv
    ``vec_env`` names, as ``python -m sb3_xppo.train --vec-env`` builds it; None: rl-zoo3's ``DummyVecEnv``, its envs
    made without a render mode; :data:`SB3_MAKE_VEC_ENV`: SB3's ``make_vec_env``'s), and the entry's ``n_timesteps``.
    """
    sb3 = vec_env == SB3_MAKE_VEC_ENV
    hyperparams, env, eval_env, _, entry = zoo_setup(
        env_id,
        seed,
        budget=0,
        log_folder=log_folder,
        vec_env=None if sb3 else vec_env,
        render_mode="rgb_array" if sb3 else None,
    )
    eval_env.close()
    return hyperparams, env, int(entry["n_timesteps"])


class StopAfter(BaseCallback):
    """Ends ``learn()`` at the first step after ``steps`` env-steps (a rollout boundary: that step is not trained on)."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def _on_step(self) -> bool:
        return self.num_timesteps <= self.steps


@dataclass
class Run:
    """One timed ``learn()`` (or env-only loop)."""

    name: str
    rep: int
    steps: int
    seconds: float
    cpu_seconds: float
    # exclusive seconds per piece (instrumented runs) and the number of timed calls
    breakdown: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


def run_learn(
    name: str,
    env_id: str,
    seed: int,
    rollouts: int,
    log_folder: str,
    extra_kwargs: dict[str, Any] | None = None,
    profile: bool = False,
    rep: int = 0,
    clock: str = "cpu",
    vec_env: str | None = None,
) -> tuple[Run, dict[str, th.Tensor]]:
    """
    One ``learn()`` of a fresh model on fresh envs, construction not timed: its budget is the zoo's ``n_timesteps``
    (schedules as at the start of a zoo run) and :class:`StopAfter` ends it after ``rollouts`` rollouts, at the
    first step of the next (that one step and its policy forward are timed too).

    :param name: ``'PPO'`` or ``'XPPO'``
    :param extra_kwargs: keywords added to the zoo's (XPPO's options)
    :param profile: time the pieces (:func:`instrument`)
    :param rep: the repetition, recorded
    :param clock: the breakdown's clock, a key of :data:`CLOCKS`; the run's own time is always wall and CPU time
    :param vec_env: the VecEnv (:func:`zoo_env`)
    :return: the run and the policy's parameters after it
    """
    hyperparams, env, budget = zoo_env(env_id, seed, log_folder, vec_env)
    model = ALGOS[name](env=env, seed=seed, verbose=0, device="cpu", **hyperparams, **(extra_kwargs or {}))
    model.set_logger(Logger(folder=None, output_formats=[]))
    steps = rollouts * model.n_steps * env.num_envs
    profiler = Profiler(CLOCKS[clock])
    gc.collect()
    with instrument(model, profiler) if profile else contextlib.nullcontext():
        start, start_cpu = time.perf_counter(), time.process_time()
        model.learn(max(budget, steps + 1), callback=StopAfter(steps))
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    assert model.num_timesteps == steps + env.num_envs, (model.num_timesteps, steps)  # one step into the next rollout
    run = Run(name, rep, steps, seconds, cpu_seconds)
    if profile:
        run.breakdown = {k: profiler.seconds.get(k, 0.0) for k in CATEGORIES if k != "learn_other"}
        run.breakdown["learn_other"] = (seconds if clock == "wall" else cpu_seconds) - sum(run.breakdown.values())
        run.calls = dict(profiler.calls)
    params = {k: v.detach().clone() for k, v in model.policy.state_dict().items()}
    env.close()
    return run, params


def run_env_only(
    env_id: str, seed: int, rollouts: int, log_folder: str, rep: int = 0, clock: str = "cpu", vec_env: str | None = None
) -> Run:
    """
    The env-only limit: the zoo's VecEnv for ``env_id`` stepped with random actions as many steps as
    :func:`run_learn`; only ``env.step`` is timed.

    :param clock: the clock of its breakdown (all ``env``), as :func:`run_learn`'s
    :param vec_env: the VecEnv (:func:`zoo_env`)
    """
    hyperparams, env, _ = zoo_env(env_id, seed, log_folder, vec_env)
    n_steps = int(hyperparams.get("n_steps", 2048))
    env.action_space.seed(seed)
    env.reset()
    seconds = cpu_seconds = 0.0
    gc.collect()
    for _ in range(rollouts * n_steps):
        actions = np.array([env.action_space.sample() for _ in range(env.num_envs)])
        start, start_cpu = time.perf_counter(), time.process_time()
        env.step(actions)
        seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - start_cpu
    breakdown = {"env": seconds if clock == "wall" else cpu_seconds}
    run = Run(ENV_ONLY, rep, rollouts * n_steps * env.num_envs, seconds, cpu_seconds, breakdown=breakdown)
    env.close()
    return run


def params_difference(a: dict[str, th.Tensor], b: dict[str, th.Tensor]) -> tuple[bool, float]:
    """Whether two state dicts are identical, and their largest absolute difference (inf when keys or shapes differ)."""
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        return False, float("inf")
    exact = all(th.equal(a[k], b[k]) for k in a)
    diff = max((float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].numel()), default=0.0)
    return exact, diff


def throughput(runs: dict[str, list[Run]]) -> dict[str, dict[str, float]]:
    """Per name: the best and the median env-steps/s of its runs, and the best on CPU time."""
    return {
        name: dict(
            best=max(r.steps_per_s for r in rs),
            median=statistics.median(r.steps_per_s for r in rs),
            cpu_best=max(r.steps / r.cpu_seconds for r in rs),
        )
        for name, rs in runs.items()
    }


def summarize_env(env_id: str, runs: list[Run], profiled: list[Run], exact: bool, diff: float) -> dict[str, Any]:
    """
    Speeds, ratios and breakdown of one env.

    :param runs: the uninstrumented runs (PPO, XPPO, env only)
    :param profiled: the instrumented runs
    :param exact: whether PPO and XPPO ended with the same parameters
    :param diff: their largest absolute difference
    :return: the env's record; its breakdown is, per algorithm, the fastest instrumented run's exclusive time per
        piece in microseconds per env-step (by the breakdown's clock)
    """
    by_name: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_name[run.name].append(run)
    speed = throughput(by_name)
    pairs = list(zip(by_name["PPO"], by_name["XPPO"], strict=True))
    assert all(p.rep == x.rep for p, x in pairs)
    breakdown: dict[str, dict[str, Any]] = {}
    for name in (*ALGOS, ENV_ONLY):
        rs = by_name[ENV_ONLY] if name == ENV_ONLY else [r for r in profiled if r.name == name]
        if not rs:
            continue
        # the fastest run by the breakdown's clock: the one least disturbed by the rest of the machine
        fastest = min(rs, key=lambda r: sum(r.breakdown.values()))
        breakdown[name] = dict(us_per_step={k: 1e6 * fastest.breakdown.get(k, 0.0) / fastest.steps for k in CATEGORIES})
        if name != ENV_ONLY:
            breakdown[name]["calls"] = {k: fastest.calls.get(k, 0) for k in CATEGORIES if k != "learn_other"}
            breakdown[name]["instrumented_steps_per_s"] = fastest.steps_per_s
            breakdown[name]["instrumented_cpu_steps_per_s"] = fastest.steps / fastest.cpu_seconds
    ratio = speed["XPPO"]["best"] / speed["PPO"]["best"]
    target = TARGETS.get(env_id)
    # the pairs and the median's 95% bootstrap interval (harness/paired.py)
    spread = paired_times([p.seconds for p, _ in pairs], [x.seconds for _, x in pairs])
    return dict(
        env=env_id,
        steps_per_run=runs[0].steps,
        speed=speed,
        ratio_best=ratio,
        ratio_median=speed["XPPO"]["median"] / speed["PPO"]["median"],
        ratio_paired=spread["median"],
        ratio_paired_spread=spread,
        cpu_ratio_best=speed["XPPO"]["cpu_best"] / speed["PPO"]["cpu_best"],
        cpu_ratio_paired=statistics.median(p.cpu_seconds / x.cpu_seconds for p, x in pairs),
        share_of_env_limit={n: speed[n]["best"] / speed[ENV_ONLY]["best"] for n in ALGOS},
        target=target,
        target_met=None if target is None else spread["median"] >= target,
        bit_exact=exact,
        max_abs_param_diff=diff,
        breakdown=breakdown,
        runs=[dict(name=r.name, rep=r.rep, steps=r.steps, seconds=r.seconds, cpu_seconds=r.cpu_seconds) for r in runs],
    )


def benchmark_env(
    row: str,
    rollouts: int,
    reps: int,
    profile_reps: int,
    seed: int,
    xppo_kwargs: dict[str, Any],
    log_folder: str,
    clock: str = "cpu",
) -> dict[str, Any]:
    """
    All runs of one row: ``reps`` rotations of (PPO, XPPO, env only), then ``profile_reps`` instrumented runs of
    each algorithm (alternating), and the exactness check on the first repetition's parameters.

    :param row: an env id, or ``<env id>@<vec env>`` for XPPO (and the env-only limit) on that VecEnv (:func:`parse_row`)
    :param rollouts: rollouts per run
    :param xppo_kwargs: keywords XPPO gets on top of the zoo entry
    :param log_folder: a scratch folder for rl-zoo3
    :param clock: the breakdown's clock, a key of :data:`CLOCKS`
    """
    env_id, vec_env = parse_row(row)
    ppo_vec_env = None if vec_env is None else SB3_MAKE_VEC_ENV
    contenders = [*ALGOS, ENV_ONLY]
    runs: list[Run] = []
    params: dict[str, dict[str, th.Tensor]] = {}
    for rep in range(reps):
        for name in contenders[rep % 3 :] + contenders[: rep % 3]:
            if name == ENV_ONLY:
                runs.append(run_env_only(env_id, seed, rollouts, log_folder, rep, clock, vec_env))
                continue
            extra, algo_vec_env = (xppo_kwargs, vec_env) if name == "XPPO" else (None, ppo_vec_env)
            run, state = run_learn(name, env_id, seed, rollouts, log_folder, extra, rep=rep, vec_env=algo_vec_env)
            runs.append(run)
            params.setdefault(name, state)
    profiled = []
    for rep in range(profile_reps):
        for name in list(ALGOS)[rep % 2 :] + list(ALGOS)[: rep % 2]:
            extra, algo_vec_env = (xppo_kwargs, vec_env) if name == "XPPO" else (None, ppo_vec_env)
            profiled.append(
                run_learn(name, env_id, seed, rollouts, log_folder, extra, True, rep, clock, vec_env=algo_vec_env)[0]
            )
    exact, diff = params_difference(params["PPO"], params["XPPO"])
    return dict(**summarize_env(row, runs, profiled, exact, diff), rollouts=rollouts, clock=clock, vec_env=vec_env)


def contrib_cases() -> dict[str, tuple[type[PPO], type[PPO], str, Callable[[int], VecEnv], dict[str, Any]]]:
    """
    The sb3-contrib comparisons: name -> (parent, XPPO's subclass, policy, ``make_env(seed)``, keywords of both).
    """
    from sb3_contrib import MaskablePPO, RecurrentPPO
    from sb3_contrib.common.envs import InvalidActionEnvDiscrete
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_xppo import MaskableXPPO, RecurrentXPPO

    def invalid_actions(seed: int) -> VecEnv:
        return make_vec_env(lambda: InvalidActionEnvDiscrete(dim=20, n_invalid_actions=10), n_envs=8, seed=seed)

    def cartpole(seed: int) -> VecEnv:
        return make_vec_env("CartPole-v1", n_envs=8, seed=seed)

    return {
        "MaskableXPPO / MaskablePPO": (
            MaskablePPO, MaskableXPPO, "MlpPolicy", invalid_actions, dict(n_steps=256, batch_size=64, n_epochs=4)
        ),
        "RecurrentXPPO / RecurrentPPO": (
            RecurrentPPO, RecurrentXPPO, "MlpLstmPolicy", cartpole, dict(n_steps=128, batch_size=256, n_epochs=4)
        ),
    }  # fmt: skip


def benchmark_contrib(
    rollouts: int,
    reps: int,
    seed: int,
    cases: dict[str, tuple[type[PPO], type[PPO], str, Callable[[int], VecEnv], dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """
    ``learn()`` of each sb3-contrib parent and its XPPO subclass, ``rollouts`` rollouts per run, ``reps`` runs of each
    in alternating order, fresh models and envs with the same seed, construction not timed.

    :param cases: the comparisons (default :func:`contrib_cases`)
    :return: per comparison: env-steps/s (best, median, CPU best) of both, the ratios (of the bests, the medians,
        median paired, median paired CPU), and whether the parameters after the first run are the same bit for bit
    """
    results = []
    for name, (parent, ours, policy, make_env, kwargs) in (cases or contrib_cases()).items():
        runs: dict[str, list[Run]] = {"parent": [], "XPPO": []}
        params: dict[str, dict[str, th.Tensor]] = {}
        for rep in range(reps):
            for key, cls in [("parent", parent), ("XPPO", ours)][:: 1 if rep % 2 == 0 else -1]:
                env = make_env(seed)
                model = cls(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)
                model.set_logger(Logger(folder=None, output_formats=[]))
                steps = rollouts * model.n_steps * env.num_envs
                gc.collect()
                start, start_cpu = time.perf_counter(), time.process_time()
                model.learn(steps)
                runs[key].append(Run(key, rep, steps, time.perf_counter() - start, time.process_time() - start_cpu))
                params.setdefault(key, {k: v.detach().clone() for k, v in model.policy.state_dict().items()})
                env.close()
        speed = throughput(runs)
        pairs = list(zip(runs["parent"], runs["XPPO"], strict=True))
        exact, diff = params_difference(params["parent"], params["XPPO"])
        spread = paired_times([p.seconds for p, _ in pairs], [x.seconds for _, x in pairs])
        results.append(
            dict(
                name=name,
                steps_per_run=runs["XPPO"][0].steps,
                speed=speed,
                ratio_best=speed["XPPO"]["best"] / speed["parent"]["best"],
                ratio_median=speed["XPPO"]["median"] / speed["parent"]["median"],
                ratio_paired=spread["median"],
                ratio_paired_spread=spread,
                cpu_ratio_paired=statistics.median(p.cpu_seconds / x.cpu_seconds for p, x in pairs),
                bit_exact=exact,
                max_abs_param_diff=diff,
                runs=[
                    dict(name=r.name, rep=r.rep, seconds=r.seconds, cpu_seconds=r.cpu_seconds)
                    for rs in runs.values()
                    for r in rs
                ],
            )
        )
    return results


def run_sequences(
    name: str, env_id: str, seed: int, rollouts: int, log_folder: str, rep: int = 0
) -> tuple[Run, float, float, dict[str, th.Tensor]]:
    """
    One ``learn()`` of RecurrentPPO (``name='RecurrentPPO'``) or RecurrentXPPO with ``sequence_batching=True`` on
    ``env_id``'s ``ppo_lstm.yml`` entry, fresh model and envs, ``rollouts`` rollouts as :func:`run_learn`, each
    ``train()`` call timed.

    :return: the run, the seconds and CPU seconds spent in ``train()``, and the policy's parameters after it
    """
    from sb3_contrib import RecurrentPPO

    from sb3_xppo import RecurrentXPPO

    hyperparams, env, eval_env, _, entry = zoo_setup(env_id, seed, budget=0, log_folder=log_folder, config=PPO_LSTM_CONFIG)
    eval_env.close()
    algo, extra = (RecurrentPPO, {}) if name == "RecurrentPPO" else (RecurrentXPPO, {"sequence_batching": True})
    model = algo(env=env, seed=seed, verbose=0, device="cpu", **hyperparams, **extra)
    model.set_logger(Logger(folder=None, output_formats=[]))
    steps = rollouts * model.n_steps * env.num_envs
    in_train = [0.0, 0.0]
    train = model.train

    def timed_train() -> None:
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            train()
        finally:
            in_train[0] += time.perf_counter() - start
            in_train[1] += time.process_time() - start_cpu

    gc.collect()
    with patched(model, "train", timed_train):
        start, start_cpu = time.perf_counter(), time.process_time()
        model.learn(max(int(entry["n_timesteps"]), steps + 1), callback=StopAfter(steps))
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    assert model.num_timesteps == steps + env.num_envs, (model.num_timesteps, steps)
    params = {k: v.detach().clone() for k, v in model.policy.state_dict().items()}
    env.close()
    return Run(name, rep, steps, seconds, cpu_seconds), in_train[0], in_train[1], params


def benchmark_sequences(
    envs: Iterable[str], reps: int, seed: int, log_folder: str, rollouts: int | None = None
) -> list[dict[str, Any]]:
    """
    RecurrentXPPO with ``sequence_batching=True`` against RecurrentPPO (:func:`run_sequences`), ``reps`` runs of each
    per env in alternating order.

    :param rollouts: rollouts per run (None: :data:`SEQUENCE_ROLLOUTS`)
    :return: per env: ``learn()`` env-steps/s of both, the paired ratios of ``learn()`` and ``train()`` (wall, CPU),
        the targets and whether they are met, the largest parameter difference after the first repetition
    """
    names = ("RecurrentPPO", "RecurrentXPPO")
    results = []
    for env_id in envs:
        n_rollouts = rollouts or SEQUENCE_ROLLOUTS.get(env_id, 2)
        runs: dict[str, list[tuple[Run, float, float]]] = {name: [] for name in names}
        params: dict[str, dict[str, th.Tensor]] = {}
        for rep in range(reps):
            for name in names[:: 1 if rep % 2 == 0 else -1]:
                run, train_seconds, train_cpu, run_params = run_sequences(name, env_id, seed, n_rollouts, log_folder, rep)
                runs[name].append((run, train_seconds, train_cpu))
                params.setdefault(name, run_params)
        pairs = list(zip(runs["RecurrentPPO"], runs["RecurrentXPPO"], strict=True))
        # the pairs and the medians' 95% bootstrap intervals (harness/paired.py)
        parent, ours = runs["RecurrentPPO"], runs["RecurrentXPPO"]
        spreads = dict(
            learn=paired_times([r.seconds for r, _, _ in parent], [r.seconds for r, _, _ in ours]),
            train=paired_times([t for _, t, _ in parent], [t for _, t, _ in ours]),
        )
        ratios = dict(
            learn=spreads["learn"]["median"],
            learn_cpu=statistics.median(p.cpu_seconds / x.cpu_seconds for (p, _, _), (x, _, _) in pairs),
            train=spreads["train"]["median"],
            train_cpu=statistics.median(p / x for (_, _, p), (_, _, x) in pairs),
        )
        _, diff = params_difference(params["RecurrentPPO"], params["RecurrentXPPO"])
        results.append(
            dict(
                env=env_id,
                rollouts=n_rollouts,
                steps_per_run=runs["RecurrentXPPO"][0][0].steps,
                speed={name: dict(best=max(r.steps_per_s for r, _, _ in rs)) for name, rs in runs.items()},
                train_seconds={name: dict(best=min(t for _, t, _ in rs)) for name, rs in runs.items()},
                ratio_paired=ratios,
                ratio_paired_spread=spreads,
                seconds_median=statistics.median(r.seconds for r, _, _ in runs["RecurrentXPPO"]),
                train_seconds_median=statistics.median(t for _, t, _ in runs["RecurrentXPPO"]),
                targets=SEQUENCE_TARGETS,
                targets_met={key: ratios[key] >= target for key, target in SEQUENCE_TARGETS.items()},
                max_abs_param_diff=diff,
                runs=[
                    dict(name=r.name, rep=r.rep, seconds=r.seconds, cpu_seconds=r.cpu_seconds, train_seconds=t, train_cpu=c)
                    for rs in runs.values()
                    for r, t, c in rs
                ],
            )
        )
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="*", default=list(DEFAULT_ENVS), help="rows: <env id> or <env id>@<vec env>")
    parser.add_argument("--rollouts", type=int, default=None, help="rollouts per run (default: per env, DEFAULT_ROLLOUTS)")
    parser.add_argument("--reps", type=int, default=3, help="uninstrumented runs of each algorithm per env")
    parser.add_argument("--profile-reps", type=int, default=1, help="instrumented runs of each algorithm per env")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu", help="the breakdown's clock")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--xppo-kwargs", default="{}", help="python dict literal of extra XPPO keywords")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--contrib", action="store_true", help="also MaskableXPPO / RecurrentXPPO against their parents")
    parser.add_argument(
        "--sequences", action="store_true", help="also RecurrentXPPO(sequence_batching=True) against RecurrentPPO"
    )
    parser.add_argument("--out-dir", default=os.path.join(RESULTS, SINGLE))
    parser.add_argument("--name", default="speed", help="output files <out-dir>/<name>.json, .png")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.profile_reps < 1:
        raise ValueError(f"--reps and --profile-reps must be >= 1, got {args.reps} and {args.profile_reps}")
    if args.rollouts is not None and args.rollouts < 1:
        raise ValueError(f"--rollouts must be >= 1, got {args.rollouts}")
    for row in args.envs:
        parse_row(row)  # a bad row fails before the first run
    xppo_kwargs = ast.literal_eval(args.xppo_kwargs)
    if not isinstance(xppo_kwargs, dict):
        raise TypeError(f"--xppo-kwargs must be a python dict literal, got {args.xppo_kwargs!r}")
    th.set_num_threads(args.threads)

    load_start = os.getloadavg()
    code = code_record()  # the code measured: read before the runs
    results = []
    with tempfile.TemporaryDirectory() as log_folder:
        for row in args.envs:
            rollouts = args.rollouts if args.rollouts is not None else DEFAULT_ROLLOUTS.get(parse_row(row)[0], 2)
            start = time.perf_counter()
            results.append(
                benchmark_env(row, rollouts, args.reps, args.profile_reps, args.seed, xppo_kwargs, log_folder, args.clock)
            )
            print(f"{row}: {time.perf_counter() - start:.0f} s", flush=True)
        sequences = (
            benchmark_sequences(SEQUENCE_ENVS, args.reps, args.seed, log_folder, args.rollouts) if args.sequences else []
        )
    contrib = benchmark_contrib(args.rollouts or 2, args.reps, args.seed) if args.contrib else []
    if results:
        print(format_table(results))
    if contrib:
        print(format_contrib_table(contrib))
    if sequences:
        print(format_sequences_table(sequences))

    os.makedirs(args.out_dir, exist_ok=True)
    record = dict(
        command=shlex.join(["python", "benchmarks/speed.py", *(sys.argv[1:] if argv is None else argv)]),
        config={k: v for k, v in vars(args).items() if k != "out_dir"},
        xppo_kwargs={k: repr(v) for k, v in xppo_kwargs.items()},
        host=dict(
            platform=platform.platform(),
            cpus=os.cpu_count(),
            torch=th.__version__,
            stable_baselines3=stable_baselines3.__version__,
            loadavg_start=load_start,
            loadavg_end=os.getloadavg(),
        ),
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        code=code,
        categories=CATEGORIES,
        results=results,
        contrib=contrib,
        sequences=sequences,
    )
    path = os.path.join(args.out_dir, args.name)
    with open(path + ".json", "w") as f:
        json.dump(record, f, indent=1)
    if results:
        plot(results, path + ".png")
    print(f"wrote {path}.json" + (f", {path}.png" if results else ""))
    return record


if __name__ == "__main__":
    main()
