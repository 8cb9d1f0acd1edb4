"""
Distributed hyperparameter search on a real PostgreSQL server: README.md's "Many machines, one study".

This module starts a throwaway server of Debian's ``postgresql`` package (``.ci/run`` installs it) on
127.0.0.1, one database per test, and stops it at the end; it skips, saying why, only where no server is
installed. The workers run README.md's own commands, its storage URL pointed at that server and a budget of
seconds appended (argparse keeps the last value of an option given twice).
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from test_readme import shell_commands

from sb3_xppo import zoo
from sb3_xppo.zoo import storage as zoo_storage

README_STORAGE = "postgresql+psycopg2://USER:PASSWORD@DB_HOST:5432/optuna"
DB_USER, DB_PASSWORD = "xppo", "xppo-test-password"
# one rollout of LunarLander-v3 with one env, one evaluation of two episodes: a trial takes about a second
BUDGET = ("-n", "64", "--n-evaluations", "1", "--eval-episodes", "2", "-params", "n_envs:1", "--no-optim-plots")
# TPE's first ten trials are random draws from --seed: each of these seeds draws small configurations first
SEEDS = ("33", "35")
FINISHED = re.compile(r"Trial (\d+) (?:finished|pruned)")


@dataclass
class PostgresServer:
    """A running throwaway server: the folder of its binaries, its port."""

    bindir: Path
    port: int

    def create_database(self, name: str) -> str:
        """:return: the optuna storage URL of a new, empty database"""
        env = {**os.environ, "PGPASSWORD": DB_PASSWORD}
        command = [str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER, name]
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)
        return f"postgresql+psycopg2://{DB_USER}:{DB_PASSWORD}@127.0.0.1:{self.port}/{name}"


def _server_bindir() -> Path | None:
    """:return: the folder of ``initdb`` and ``pg_ctl``, newest Debian version first, else from PATH"""
    debian = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: [int(part) for part in Path(path).parts[-3].split(".")]
    )
    if debian:
        return Path(debian[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _run_as(os_user: str | None, command: Sequence[str]) -> None:
    """Run a server command as ``os_user`` (``initdb`` refuses root), failing loudly with its output."""
    user_args = {} if os_user is None else {"user": os_user, "group": os_user, "extra_groups": []}
    result = subprocess.run(list(command), capture_output=True, text=True, timeout=120, **user_args)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 only, password login, data in a temporary folder; stopped afterwards."""
    bindir = _server_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server installed (Debian: `apt-get install postgresql`; .ci/run installs it)")
    os_user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as (initdb refuses root)")
        os_user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="sb3-xppo-postgres-"))
    data, socket_dir = root / "data", root / "socket"
    socket_dir.mkdir()
    password_file = root / "password"
    password_file.write_text(DB_PASSWORD + "\n")
    if os_user is not None:
        for path in (root, socket_dir, password_file):
            shutil.chown(path, os_user, os_user)
    port = _free_port()
    initdb = [str(bindir / "initdb"), "-D", str(data), "-U", DB_USER, f"--pwfile={password_file}"]
    _run_as(os_user, [*initdb, "--auth=scram-sha-256", "--no-locale", "-E", "UTF8", "--no-sync"])
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={socket_dir} -c fsync=off"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-w", "-t", "60"]
    try:
        _run_as(os_user, [*pg_ctl, "-l", str(root / "server.log"), "-o", options, "start"])
        yield PostgresServer(bindir, port)
    finally:
        if (data / "postmaster.pid").exists():
            _run_as(os_user, [*pg_ctl, "-m", "immediate", "stop"])  # its data goes anyway
        shutil.rmtree(root, ignore_errors=True)


def readme_command(url: str, *words: str) -> list[str]:
    """
    :param url: the storage URL to put in place of README.md's placeholder
    :param words: words that single out the command
    :return: the words of README.md's one command on the PostgreSQL study that has all of ``words``
    """
    (command,) = [
        command for command in map(shlex.split, shell_commands()) if README_STORAGE in command and set(words) <= set(command)
    ]
    return [url if word == README_STORAGE else word for word in command]


def search_command(url: str) -> tuple[list[str], str]:
    """:return: README.md's distributed-search command on ``url``, and its study name"""
    command = readme_command(url, "python", "-optimize")
    return command, command[command.index("--study-name") + 1]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """The worker processes a test starts; those still running at its end are killed."""
    processes: list[subprocess.Popen] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def start_worker(
    started: list[subprocess.Popen], command: Sequence[str], extra: Sequence[str], folder: Path
) -> tuple[subprocess.Popen, Path]:
    """Start ``python -m sb3_xppo.train ...`` in its own folder (its own machine); :return: the process, its log."""
    assert list(command[:3]) == ["python", "-m", "sb3_xppo.train"]
    folder.mkdir()
    log = folder / "worker.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, *command[1:], *extra], cwd=folder, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    started.append(process)
    return process, log


def finish(worker: tuple[subprocess.Popen, Path], timeout: float = 180) -> set[int]:
    """Wait for a worker to succeed; :return: the numbers of the trials it reports finished (or pruned)"""
    process, log = worker
    process.wait(timeout=timeout)
    text = log.read_text()
    assert process.returncode == 0, f"worker failed:\n{text[-5000:]}"
    return {int(number) for number in FINISHED.findall(text)}


def load_trials(url: str, study_name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(storage=url, study_name=study_name).trials


def test_workers_started_together_on_a_fresh_database_all_open_it(postgres: PostgresServer) -> None:
    # optuna creates its tables when a process first opens the database; on PostgreSQL, processes doing so at
    # the same moment collide (all but one fail on a duplicate key): python -m sb3_xppo.train retries
    url = postgres.create_database("fresh")
    barrier, errors = threading.Barrier(4), []

    def open_storage() -> None:
        barrier.wait()
        try:
            zoo.prepare_storage(url)
        except Exception as error:  # collected: an exception in a thread does not fail the test
            errors.append(error)

    threads = [threading.Thread(target=open_storage) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert optuna.get_all_study_names(storage=url) == []  # the tables are there, and empty


class SearchStarted(Exception):
    """Raised where rl-zoo3's search would open its study."""


def test_optimize_prepares_the_storage_before_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rl_zoo3.exp_manager import ExperimentManager

    from sb3_xppo.train import main as train_main

    search = ExperimentManager.hyperparameters_optimization
    prepared = []

    def prepare_storage(storage: str) -> None:
        prepared.append(storage)
        raise SearchStarted

    monkeypatch.setattr(zoo_storage, "prepare_storage", prepare_storage)
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    with pytest.raises(SearchStarted):  # one short trial at most, should the storage be prepared too late
        argv = ["--env", "CartPole-v1", "-optimize", "--storage", storage, "--study-name", "s", "-n", "64", "--n-trials", "1"]
        train_main(argv)
    assert prepared == [storage]
    assert ExperimentManager.hyperparameters_optimization is search  # rl-zoo3 is left as it was


@pytest.mark.slow
def test_two_workers_share_one_study(postgres: PostgresServer, started: list[subprocess.Popen], tmp_path: Path) -> None:
    url = postgres.create_database("two_workers")
    command, study_name = search_command(url)
    cap = 4
    extra = (*BUDGET, "--max-total-trials", str(cap))
    # both start at once on a fresh database, as a search started on every machine
    workers = [start_worker(started, command, (*extra, "--seed", seed), tmp_path / f"machine{seed}") for seed in SEEDS]
    reported = [finish(worker) for worker in workers]

    trials = load_trials(url, study_name)
    numbers = [trial.number for trial in trials]
    assert numbers == list(range(len(trials)))  # no number lost or given twice
    # the cap counts running trials; a worker that ends a trial at the very moment another does may start one more
    assert cap <= len(trials) <= cap + len(workers) - 1
    assert {trial.state for trial in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert all(reported), f"a worker ran no trial: {reported}"
    assert set.intersection(*reported) == set()  # no trial run twice
    assert set.union(*reported) == set(numbers)  # every trial of the study was run by one of the workers
    assert all(set(zoo.XPPO_SEARCH_KEYS) <= set(trial.params) for trial in trials)


@pytest.mark.slow
def test_a_worker_killed_mid_trial_leaves_the_study_usable(
    postgres: PostgresServer, started: list[subprocess.Popen], tmp_path: Path
) -> None:
    url = postgres.create_database("killed_worker")
    command, study_name = search_command(url)
    extra = (*BUDGET, "--max-total-trials", "3")

    # a worker with the README's own budget is killed (SIGKILL, as a machine that is lost) in its first trial
    zoo.prepare_storage(url)  # the tables, so that watching the study does not race the worker to create them
    doomed, doomed_log = start_worker(started, command, ("--no-optim-plots",), tmp_path / "doomed")
    deadline = time.monotonic() + 120
    while not (study_name in optuna.get_all_study_names(storage=url) and load_trials(url, study_name)):
        assert doomed.poll() is None, f"the worker ended before its first trial:\n{doomed_log.read_text()[-5000:]}"
        assert time.monotonic() < deadline, "the worker started no trial in time"
        time.sleep(0.2)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    # nothing marks its trial failed: rl-zoo3 gives optuna no heartbeat, so it stays RUNNING
    assert [trial.state for trial in load_trials(url, study_name)] == [TrialState.RUNNING]

    # another worker joins and goes on; the stale trial counts toward --max-total-trials
    reported = finish(start_worker(started, command, (*extra, "--seed", SEEDS[0]), tmp_path / "second"))
    trials = load_trials(url, study_name)
    assert [trial.number for trial in trials] == [0, 1, 2]
    assert reported == {1, 2}
    assert trials[0].state == TrialState.RUNNING
    assert {trial.state for trial in trials[1:]} <= {TrialState.COMPLETE, TrialState.PRUNED}

    # README.md's command marks the stale trial failed: that frees its place under the cap
    tell = readme_command(url, "optuna", "tell")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "optuna"), *tell[1:]], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    reported = finish(start_worker(started, command, (*extra, "--seed", SEEDS[1]), tmp_path / "third"))
    trials = load_trials(url, study_name)
    assert reported == {3}
    assert trials[0].state == TrialState.FAIL
    assert {trial.state for trial in trials[1:]} <= {TrialState.COMPLETE, TrialState.PRUNED}
