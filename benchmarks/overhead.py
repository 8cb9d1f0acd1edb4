"""
``train()`` wall time of XPPO variants divided by stock PPO's, on identical rollouts.

One PPO rollout is collected once; before every timed ``train()`` each model gets a fresh copy of it, the same
starting weights and optimizer state, and the same minibatch permutation seed, so every variant does the same
work on the same data. The variants are interleaved in one process (machine noise hits all alike) and the
minimum over repetitions is kept (wall time; beside it the CPU-time ratio, and the median over repetitions of
the ratio to PPO's time in the same repetition, which is robust to bursts of load). Prints a table and writes
``benchmarks/results/single/overhead.json``.

A variant that needs its own rollout layout (e.g. multi-critic, several reward groups) supplies ``make_buffer``,
built from the shared PPO rollout, and is added in ``variants()``.

Also measures what XPPO's non-finite checks cost, in ``train()`` (a variant without them) and in ``learn()``
(alternating runs with and without them), and MaskableXPPO / RecurrentXPPO against their sb3-contrib parents.

usage: python benchmarks/overhead.py [--env CartPole-v1] [--n-steps 2048] [--batch-size 64] [--n-epochs 2]
                                     [--reps 15] [--threads 1] [--device cpu] [--learn-steps 20480] [--learn-reps 6]
                                     [--no-contrib] [--only NAME_PART] [--out PATH]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch as th
from harness.layout import single_file
from harness.paired import paired_times
from harness.provenance import code_record
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger

from sb3_xppo import XPPO

# Multi-critic variants: the shared rollout's reward and value split into four groups, in these shares
GROUP_SHARES = np.array([0.4, 0.3, 0.2, 0.1], dtype=np.float32)


def copy_buffer(rollout: RolloutBuffer, model: PPO) -> RolloutBuffer:
    """The shared rollout as it is (train() mutates its buffer, so every call gets a fresh copy)."""
    return copy.deepcopy(rollout)


def same_state(policy_state: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
    return policy_state


def grouped_buffer(rollout: RolloutBuffer, model: PPO) -> RolloutBuffer:
    """The shared rollout with its rewards and values split into ``len(GROUP_SHARES)`` groups; GAE per group."""
    buffer = model.rollout_buffer_class(model.n_steps, model.observation_space, model.action_space, device=model.device,
                                        gamma=model.gamma, gae_lambda=model.gae_lambda, n_envs=model.n_envs,
                                        **model.rollout_buffer_kwargs)  # fmt: skip
    for name in ("observations", "actions", "episode_starts", "log_probs"):
        setattr(buffer, name, getattr(rollout, name).copy())
    buffer.rewards = rollout.rewards[..., None] * GROUP_SHARES
    buffer.values = rollout.values[..., None] * GROUP_SHARES
    buffer.pos, buffer.full = rollout.pos, rollout.full
    buffer.compute_returns_and_advantage(th.zeros(model.n_envs, len(GROUP_SHARES)), np.zeros(model.n_envs))
    return buffer


def grouped_state(policy_state: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
    """PPO's weights for a shared critic trunk with one value output per group (each starts as PPO's)."""
    groups = len(GROUP_SHARES)
    return {**policy_state, "value_net.weight": policy_state["value_net.weight"].repeat(groups, 1),
            "value_net.bias": policy_state["value_net.bias"].repeat(groups)}  # fmt: skip


def separate_state(policy_state: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
    """PPO's weights for one value MLP per group (each starts as PPO's critic), stacked as ``SeparateCritics``."""
    groups = len(GROUP_SHARES)
    state = {k: v for k, v in policy_state.items() if not k.startswith(("mlp_extractor.value_net.", "value_net."))}
    linears = [
        k[: -len(".weight")] for k in policy_state if k.startswith("mlp_extractor.value_net.") and k.endswith(".weight")
    ]
    for i, name in enumerate([*linears, "value_net"]):
        state[f"value_net.weights.{i}"] = policy_state[f"{name}.weight"].T.repeat(groups, 1, 1)
        state[f"value_net.biases.{i}"] = policy_state[f"{name}.bias"].repeat(groups, 1, 1)
    return state


def normalized_values(adapt: Callable[[dict[str, th.Tensor]], dict[str, th.Tensor]], groups: int = 1):
    """``adapt`` for a policy whose value head sits in a ``ValueNormalizer`` (``normalize_values=True``), at its initial
    statistics (mean 0, std 1)."""

    def adapt_normalized(policy_state: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
        state = {}
        for key, value in adapt(policy_state).items():
            state[key.replace("value_net.", "value_net.head.", 1) if key.startswith("value_net.") else key] = value
        state.update({"value_net.mean": th.zeros(groups), "value_net.var": th.ones(groups), "value_net.count": th.zeros(())})
        return state

    return adapt_normalized


@dataclass
class Variant:
    name: str
    algo: type[PPO]
    kwargs: dict[str, Any] = field(default_factory=dict)
    # Builds the buffer this variant trains on from the shared PPO rollout
    make_buffer: Callable[[RolloutBuffer, PPO], RolloutBuffer] = copy_buffer
    # Maps PPO's initial policy weights to this variant's policy (e.g. one value output per reward group)
    adapt_state: Callable[[dict[str, th.Tensor]], dict[str, th.Tensor]] = same_state
    # XPPO's non-finite checks (the rollback snapshot and the check after the epochs); off to measure their cost
    check_finite: bool = True


def variants(args: argparse.Namespace) -> list[Variant]:
    """PPO first (the reference), then the XPPO variants (with ``--only``, those whose name contains it)."""
    variants = [
        Variant("PPO", PPO),
        Variant("XPPO clip", XPPO),
        Variant("XPPO clip, no checks", XPPO, check_finite=False),
        Variant("XPPO spo", XPPO, dict(actor_loss="spo")),
        Variant("XPPO asymmetric_spo", XPPO, dict(actor_loss="asymmetric_spo")),
        # HPO skips a minibatch of constant advantages (min_advantage_std=1e-6 by default): its statistics each minibatch
        Variant("XPPO hpo", XPPO, dict(actor_loss="hpo")),
        # the KL-adaptive learning rate: one host sync per epoch for the epoch's mean approximate KL
        Variant("XPPO adaptive_kl", XPPO, dict(adaptive_kl=True)),
        Variant("XPPO improved value", XPPO, dict(value_loss="improved", clip_range_vf=0.2)),
        Variant("XPPO dual clip", XPPO, dict(dual_clip=3.0)),
        Variant("XPPO delightful", XPPO, dict(delightful=True)),
        Variant("XPPO clip (0.2, 0.28)", XPPO, dict(clip_range=(0.2, 0.28))),
        Variant("XPPO normalize_values", XPPO, dict(normalize_values=True), adapt_state=normalized_values(same_state)),
        Variant("XPPO 4 critics", XPPO, dict(reward_groups=len(GROUP_SHARES)), grouped_buffer, grouped_state),
        Variant(
            "XPPO 4 critics, normalize_values",
            XPPO,
            dict(reward_groups=len(GROUP_SHARES), normalize_values=True),
            grouped_buffer,
            normalized_values(grouped_state, len(GROUP_SHARES)),
        ),
        Variant(
            "XPPO 4 separate critics",
            XPPO,
            dict(reward_groups=len(GROUP_SHARES), policy_kwargs=dict(separate_critics=True)),
            grouped_buffer,
            separate_state,
        ),
        # PCGrad over the groups' actor losses: one backward pass through the actor per group (the projection has no
        # data-dependent branch, so its cost does not depend on how often the groups' gradients conflict)
        Variant(
            "XPPO 4 critics, pcgrad",
            XPPO,
            dict(reward_groups=len(GROUP_SHARES), group_gradients="pcgrad"),
            grouped_buffer,
            grouped_state,
        ),
    ]
    if args.only:
        # the references (PPO, XPPO clip) and the variants whose name contains the filter
        variants = [v for v in variants if v.name in ("PPO", "XPPO clip") or args.only in v.name]
    return variants


def collect_rollout(args: argparse.Namespace) -> tuple[RolloutBuffer, dict[str, Any]]:
    """One PPO rollout of ``n_steps`` steps and the initial policy/optimizer state."""
    model = PPO(
        "MlpPolicy", make_vec_env(args.env, n_envs=args.n_envs, seed=0), n_steps=args.n_steps, seed=0, device=args.device
    )
    model.set_logger(Logger(folder=None, output_formats=[]))
    _, callback = model._setup_learn(args.n_steps, None)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=args.n_steps)
    return model.rollout_buffer, copy.deepcopy(model.policy.state_dict())


def contrib_ratios(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """
    ``train()`` of MaskableXPPO / RecurrentXPPO against their sb3-contrib parents on one rollout the parent collected,
    as above: same data, weights, optimizer state and minibatch order, interleaved, min over repetitions and the
    paired median ratio (target: <= 1.05x).
    """
    from sb3_contrib import MaskablePPO, RecurrentPPO
    from sb3_contrib.common.envs import InvalidActionEnvDiscrete

    from sb3_xppo import MaskableXPPO, RecurrentXPPO

    pairs = {
        "MaskableXPPO / MaskablePPO": (
            MaskablePPO, MaskableXPPO, "MlpPolicy", lambda: InvalidActionEnvDiscrete(dim=20, n_invalid_actions=10), 1,
            dict(n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs),
        ),
        "RecurrentXPPO / RecurrentPPO": (
            RecurrentPPO, RecurrentXPPO, "MlpLstmPolicy", args.env, 8,
            dict(n_steps=max(args.n_steps // 8, 16), batch_size=128, n_epochs=args.n_epochs),
        ),
    }  # fmt: skip
    results = {}
    for name, (parent_class, xppo_class, policy, env_spec, n_envs, kwargs) in pairs.items():
        models = []
        for algo in (parent_class, xppo_class):
            env = make_vec_env(env_spec, n_envs=n_envs, seed=0)  # an env id or a factory
            model = algo(policy, env, seed=0, device=args.device, **kwargs)
            model.set_logger(Logger(folder=None, output_formats=[]))
            models.append(model)
        parent = models[0]
        _, callback = parent._setup_learn(parent.n_steps * parent.n_envs, None)
        parent.collect_rollouts(parent.env, callback, parent.rollout_buffer, n_rollout_steps=parent.n_steps)
        rollout = parent.rollout_buffer
        policy_state = copy.deepcopy(parent.policy.state_dict())
        optimizer_state = copy.deepcopy(parent.policy.optimizer.state_dict())
        times: list[list[float]] = [[], []]
        for rep in range(args.reps):
            for i in (0, 1) if rep % 2 == 0 else (1, 0):
                model = models[i]
                model.rollout_buffer = copy.deepcopy(rollout)
                model.policy.load_state_dict(policy_state)
                model.policy.optimizer.load_state_dict(optimizer_state)
                np.random.seed(rep)
                start = time.perf_counter()
                model.train()
                times[i].append(time.perf_counter() - start)
        ratio = min(times[1]) / min(times[0])
        spread = paired_times(times[1], times[0])
        paired_median = spread["median"]
        results[name] = dict(ratio=ratio, paired_ratio=paired_median, paired_spread=spread, parent_min_ms=min(times[0]) * 1e3)
        print(f"{name}: {ratio:.3f}x (paired {paired_median:.3f}x), parent train() {min(times[0]) * 1e3:.1f} ms")
    return results


def learn_check_cost(args: argparse.Namespace) -> dict[str, float]:
    """
    ``learn()`` of XPPO with its non-finite checks against without, alternating, ``args.learn_steps`` steps each on
    the same seed (identical work: the checks change no result).
    """
    times: dict[bool, list[float]] = {True: [], False: []}
    for rep in range(args.learn_reps):
        for check in (True, False) if rep % 2 == 0 else (False, True):
            model = XPPO("MlpPolicy", make_vec_env(args.env, n_envs=args.n_envs, seed=rep), n_steps=args.n_steps,
                         batch_size=args.batch_size, n_epochs=args.n_epochs, seed=rep, device=args.device)  # fmt: skip
            model.check_finite = check
            start = time.perf_counter()
            model.learn(args.learn_steps)
            times[check].append(time.perf_counter() - start)
    spread = paired_times(times[True], times[False])
    best = min(times[True]) / min(times[False])
    print(f"non-finite checks, learn({args.learn_steps}): {best:.3f}x (min), {spread['median']:.3f}x (paired median)")
    return dict(learn_ratio=best, learn_paired_ratio=spread["median"], learn_paired_spread=spread)


def parse_args() -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--n-envs", type=int, default=1)
    parser.add_argument("--n-steps", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--n-epochs", type=int, default=2)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--learn-steps", type=int, default=20_480, help="learn() steps per run of the checks' cost (0: skip)")
    parser.add_argument("--learn-reps", type=int, default=6)
    parser.add_argument("--no-contrib", dest="contrib", action="store_false", help="skip MaskableXPPO/RecurrentXPPO rows")
    parser.add_argument("--only", default=None, help="only PPO, XPPO clip and the variants whose name contains this")
    parser.add_argument("--out", default=single_file("overhead.json"))
    args = parser.parse_args()
    if args.reps < 1:
        parser.error(f"--reps must be at least 1, got {args.reps}")
    if args.learn_steps > 0 and args.learn_reps < 1:
        parser.error(f"--learn-reps must be at least 1 when --learn-steps is positive, got {args.learn_reps}")
    return args


def time_train(args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each variant's ``train()`` on the same rollout, ``args.reps`` times: wall-clock and CPU seconds, by variant."""
    rollout, policy_state = collect_rollout(args)
    env = make_vec_env(args.env, n_envs=args.n_envs, seed=0)
    models = []
    for variant in variants(args):
        model = variant.algo("MlpPolicy", env, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                             seed=0, device=args.device, **variant.kwargs)  # fmt: skip
        model.set_logger(Logger(folder=None, output_formats=[]))
        if isinstance(model, XPPO):
            model.check_finite = variant.check_finite
        model.policy.load_state_dict(variant.adapt_state(policy_state))
        models.append((variant, model, copy.deepcopy(model.policy.optimizer.state_dict())))

    times: dict[str, list[float]] = {variant.name: [] for variant, _, _ in models}
    cpu_times: dict[str, list[float]] = {variant.name: [] for variant, _, _ in models}
    for rep in range(args.reps):
        # Rotate the order so that no variant always runs first
        for variant, model, optimizer_state in models[rep % len(models) :] + models[: rep % len(models)]:
            # Same data, weights, optimizer state and minibatch order for every variant
            model.rollout_buffer = variant.make_buffer(rollout, model)
            model.policy.load_state_dict(variant.adapt_state(policy_state))
            model.policy.optimizer.load_state_dict(optimizer_state)
            np.random.seed(rep)
            if model.device.type == "cuda":
                th.cuda.synchronize()
            start, start_cpu = time.perf_counter(), time.process_time()
            model.train()
            if model.device.type == "cuda":
                th.cuda.synchronize()
            times[variant.name].append(time.perf_counter() - start)
            cpu_times[variant.name].append(time.process_time() - start_cpu)
    return times, cpu_times


def ratio_rows(args: argparse.Namespace, times: dict[str, list[float]], cpu_times: dict[str, list[float]]) -> list[dict]:
    """Each variant's times and ratios to PPO's, printed as a table."""
    reference = min(times["PPO"])
    n_minibatches = args.n_epochs * -(-args.n_steps * args.n_envs // args.batch_size)
    print(f"train(): {args.env}, {args.n_steps} x {args.n_envs} steps, batch {args.batch_size}, {args.n_epochs} epochs "
          f"({n_minibatches} minibatches), min of {args.reps}, {args.threads} thread(s), {args.device}")  # fmt: skip
    print(f"{'variant':<24} {'min ms':>9} {'median ms':>10} {'ratio':>7} {'CPU ratio':>10} {'paired':>8}")
    rows = []
    cpu_reference = min(cpu_times["PPO"])
    for name, samples in times.items():
        best, median, cpu_ratio = min(samples), float(np.median(samples)), min(cpu_times[name]) / cpu_reference
        # Median over repetitions of the ratio to PPO's time in the same repetition: robust to bursts of load
        spread = paired_times(samples, times["PPO"])
        rows.append(
            dict(
                variant=name,
                min_ms=best * 1e3,
                median_ms=median * 1e3,
                ratio=best / reference,
                cpu_ratio=cpu_ratio,
                paired_ratio=spread["median"],
                paired_spread=spread,
            )
        )
        print(
            f"{name:<24} {best * 1e3:9.2f} {median * 1e3:10.2f} {best / reference:6.3f}x {cpu_ratio:9.3f}x "
            f"{spread['median']:7.3f}x"
        )
    return rows


def pairwise_ratios(times: dict[str, list[float]]) -> tuple[dict, dict, dict]:
    """The ratios against another variant than PPO: multi-critic, PCGrad and the non-finite checks' (train() only)."""
    # Multi-critic against single-critic XPPO (the target in docs/guide/development.md: <= 1.15x with 4 groups)
    multi_critic = {}
    for name, samples in times.items():
        if "critics" in name:
            spread = paired_times(samples, times["XPPO clip"])
            multi_critic[name] = dict(
                ratio=min(samples) / min(times["XPPO clip"]), paired_ratio=spread["median"], paired_spread=spread
            )
            print(f"{name} / XPPO clip: {multi_critic[name]['ratio']:.3f}x (paired {spread['median']:.3f}x)")
    # PCGrad over the reward groups against the plain multi-critic on the same groups
    pcgrad = {}
    if "XPPO 4 critics, pcgrad" in times and "XPPO 4 critics" in times:
        samples, plain = times["XPPO 4 critics, pcgrad"], times["XPPO 4 critics"]
        spread = paired_times(samples, plain)
        pcgrad = dict(ratio=min(samples) / min(plain), paired_ratio=spread["median"], paired_spread=spread)
        print(f"XPPO 4 critics, pcgrad / XPPO 4 critics: {pcgrad['ratio']:.3f}x (paired {pcgrad['paired_ratio']:.3f}x)")
    # What XPPO's non-finite checks cost (target: <= 2% of train() and of learn())
    checks = {}
    if "XPPO clip, no checks" in times:
        spread = paired_times(times["XPPO clip"], times["XPPO clip, no checks"])
        checks.update(train_paired_ratio=spread["median"], train_paired_spread=spread)
        print(f"non-finite checks, train(): {checks['train_paired_ratio']:.3f}x (paired, XPPO clip / no checks)")
    return multi_critic, pcgrad, checks


def main() -> None:
    args = parse_args()
    th.set_num_threads(args.threads)
    times, cpu_times = time_train(args)
    rows = ratio_rows(args, times, cpu_times)
    multi_critic, pcgrad, checks = pairwise_ratios(times)
    if args.learn_steps > 0:
        checks.update(learn_check_cost(args))
    contrib = contrib_ratios(args) if args.contrib else {}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        config = {k: v for k, v in vars(args).items() if k != "out"}
        results = dict(config=config, code=code_record(), torch=th.__version__, machine=platform.machine(), rows=rows,
                       multi_critic=multi_critic, pcgrad=pcgrad, finite_checks=checks, contrib=contrib)  # fmt: skip
        json.dump(results, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
