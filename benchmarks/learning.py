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
    on the envs of rl-zoo3's ``ppo_lstm.yml`` (``CartPoleNoVel-v1``, ``PendulumNoVel-v1``:
    ``harness.zoo.ENV_CONFIGS``);
  - ``xppo-zoo``: XPPO with its own rl-zoo3 entry, from ``zoo_configs/xppo.yml`` instead of ``ppo.yml``: what
    ``python -m sb3_xppo.train`` trains;
  - ``xppo-paper``: XPPO with the SPO paper's setup (Xie et al. 2025, the authors' MuJoCo code), from
    ``benchmarks/spo_paper.yml`` instead of ``ppo.yml`` (Walker2d-v5, HalfCheetah-v5, Ant-v5): its contenders add
    ``@actor_loss`` and, for the paper's shallow actor, ``@pi_arch=[64,64]``;
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
    and evaluates on gymnasium's env as every contender does; ``@depth=7`` gives the actor and the critic 7 hidden
    layers of the entry's width (its other policy keywords kept), one name for every env of a campaign;
    ``@pi_arch=[64,64]`` gives the actor those hidden layers (the entry's critic and other policy keywords kept);
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
- **Cache**: each (env, budget, contender, seed) run is one JSON in the run cache ``<out-dir>/runs/`` holding a
  key of its full configuration (not the contender's name); a run whose key matches, under any contender's name,
  is not run again, so a campaign continues across sessions. ``--report-only`` writes the outputs from the cache
  alone.
- **Provenance** (``benchmarks/harness/provenance.py``): each run records the code that made it (the package's commit and
  the library versions) and a behavioural fingerprint of its configuration (the parameters after the first update,
  at seed 0). A report recomputes each configuration's fingerprint with today's code: a run whose fingerprint
  differs is stale and left out (``--stale rerun`` runs it again), one made before fingerprints existed is
  unverified (``--unverified include``, the default, keeps it and the report says how many). A bit-exact change
  keeps every fingerprint, so it costs no reruns.
- **Outputs**: the campaign's folder ``<out-dir>/campaigns/<name>/``: ``report.json`` (its question, command, provenance, the
  summary, and the runs it cites, named by env, contender, seed, cache key and file, not copied), ``report.md`` (the
  tables) and ``plot.png`` (eval curves, mean and min-max band over seeds, two panels a row), from the finished runs
  among those asked for. ``benchmarks/render_docs.py`` renders the pages' tables from the ``report.json`` files;
  ``--kind`` declares the claim of the pages the campaign answers (``harness.reports.KINDS``), which is how they find
  it. ``--question`` and ``--kind`` are kept from the campaign's last report. Where the runs recorded the ratio's
  statistics over training (``harness.train_logs``), ``report.json`` holds their summary (``train_logs``) and
  ``train_logs.png`` their plot; where they recorded their training episodes (``harness.train_episodes``), their
  summary (``train_episodes``) and ``train_episodes.png``, with the SPO paper's published returns on the same axes in
  a campaign of kind ``spo-paper`` (``harness.spo_paper``).
- **Workers**: ``--workers N`` runs N trainings at once in a process pool, one torch thread each.

usage: python benchmarks/learning.py [--envs CartPole-v1 ...] [--contenders grid] [--seeds 0 1 2 3 4]
                                     [--budget-scale 1.0] [--workers 1] [--time-limit MINUTES] [--name NAME]
                                     [--question TEXT] [--kind KIND] [--report-only] [--quick]
                                     [--stale exclude|rerun] [--unverified include|exclude]
       (--quick: CartPole-v1, 5k steps, one seed, ppo vs xppo: a smoke test of well under a minute)
"""

from __future__ import annotations

import argparse
import os
import sys

import torch as th
from harness import spo_paper, train_episodes, train_logs
from harness.contenders import Contender, expand_contenders, for_env
from harness.layout import RESULTS, campaign_dir
from harness.reports import (
    add_report_arguments,
    markdown,
    plot,
    provenance_note,
    provenance_record,
    report_words,
    reproducing_command,
    summarize,
    write_report,
)
from harness.runs import THRESHOLDS, Task, load_cached, run_all, verify_runs
from harness.zoo import zoo_budget


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with ``--quick``'s settings filled in."""
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
        "--name", default=None, help="the campaign: its report goes to <out-dir>/campaigns/<name>/ (default: main/quick)"
    )
    add_report_arguments(parser)
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
    return args


def campaign_tasks(args: argparse.Namespace, contenders: list[Contender]) -> list[Task]:
    """The campaign's runs, seed-major: an interrupted campaign has every env and contender at the same seeds."""
    budgets = {env_id: max(int(zoo_budget(env_id) * args.budget_scale), 1) for env_id in args.envs}
    return [
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
        for seed in args.seeds
        for env_id in args.envs
        for c in contenders
    ]


def finished_runs(args: argparse.Namespace, tasks: list[Task]) -> tuple[list[dict], dict[str, list]]:
    """
    Run what the cache lacks (unless ``--report-only``; stale runs again with ``--stale rerun``), then the finished
    runs the report cites (the unverified ones with ``--unverified include``) and every run's provenance status.
    """
    if not args.report_only:
        time_limit = None if args.time_limit is None else 60.0 * args.time_limit
        run_all(tasks, args.out_dir, args.workers, time_limit)
    runs = [run for run in (load_cached(t, args.out_dir) for t in tasks) if run is not None]
    status = verify_runs(tasks, runs)
    if status["stale"] and args.stale == "rerun" and not args.report_only:
        run_all(tasks, args.out_dir, args.workers, None, rerun=frozenset(r["key"] for r in status["stale"]))
        runs = [run for run in (load_cached(t, args.out_dir) for t in tasks) if run is not None]
        status = verify_runs(tasks, runs)
    return status["current"] + (status["unverified"] if args.unverified == "include" else []), status


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    name = args.name or ("quick" if args.quick else "main")
    th.set_num_threads(1)
    contenders = expand_contenders(args.contenders)
    tasks = campaign_tasks(args, contenders)
    runs, status = finished_runs(args, tasks)
    provenance = provenance_note(status, args.unverified == "include")
    print(provenance)
    words = report_words(args, args.out_dir, name)
    if not runs:
        print("no finished runs to report")
        if "kind" not in words:
            return  # a campaign a page quotes reports even before its first run is done: "0 of N runs"
    summary = summarize(runs, contenders, args.bootstrap_reps)
    # the command that reproduces the outputs: --report-only writes the same ones from the cache
    command = reproducing_command("benchmarks/learning.py", sys.argv[1:] if argv is None else argv)
    table = markdown(summary, name, command, provenance, words["question"])
    # the ratio's statistics over training, where the runs recorded them (runs since issue 56)
    ratio = train_logs.summarize(runs, contenders)
    # the training episodes' returns, where the runs recorded them (the SPO paper's metric)
    episodes = train_episodes.summarize(runs, contenders, args.bootstrap_reps)
    report = dict(
        **words,
        command=command,
        args=vars(args),
        summary=summary,
        **({"train_logs": ratio} if ratio else {}),
        **({"train_episodes": episodes} if episodes else {}),
        runs=runs,
        provenance=provenance_record(status, provenance),
    )
    write_report(args.out_dir, name, report, table, lambda path: plot(runs, summary, contenders, path) if runs else None)
    if ratio:
        path = os.path.join(campaign_dir(args.out_dir, name), train_logs.PLOT)
        train_logs.plot(ratio, path, f"{name}: the probability ratio over training (mean over seeds)")
        print(f"wrote {path}")
    if episodes:
        path = os.path.join(campaign_dir(args.out_dir, name), train_episodes.PLOT)
        paper = words.get("kind") == spo_paper.KIND
        train_episodes.plot(
            episodes,
            path,
            f"{name}: training-episode returns (mean over seeds; each seed faint)"
            + (", the SPO paper's at its end (stars)" if paper else ""),
            spo_paper.reference() if paper else None,
            spo_paper.PAPER_STEPS if paper else None,
        )
        print(f"wrote {path}")
    print(table)


if __name__ == "__main__":
    main()
