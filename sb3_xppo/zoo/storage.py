"""
The optuna storage of a distributed search (an RDB URL such as PostgreSQL's): its tables, created before rl-zoo3
opens it so that workers may start together on a fresh database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def prepare_storage(storage: str, attempts: int = 5) -> None:
    """
    Create optuna's tables in the RDB storage of a distributed search before rl-zoo3 opens it.

    optuna creates its tables the first time a process opens a database. Workers started together on a
    fresh PostgreSQL database all try to, and all but one fail (a duplicate key in ``pg_type``), so that
    one worker of a search started on every machine at once would die at start. Here a worker that loses
    that race tries again: its attempt was rolled back, and by then the winner's tables are in place.

    :param storage: rl-zoo3's ``--storage``: an optuna RDB URL. A journal file (``*.log``) has no tables
        and is left alone.
    :param attempts: how many times to try before the error is raised
    """
    if storage.endswith(".log"):
        return
    import optuna
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(attempts):
        try:
            optuna.storages.RDBStorage(storage).engine.dispose()
            return
        except (IntegrityError, ProgrammingError):  # a concurrent creator won: its tables exist now
            if attempt == attempts - 1:
                raise
            time.sleep(0.1 * (attempt + 1))


def with_tables(search: Callable[[Any], None]) -> Callable[[Any], None]:
    """
    :param search: rl-zoo3's ``ExperimentManager.hyperparameters_optimization``, which opens the study itself and
        offers no hook there
    :return: ``search``, the storage's tables created first (:func:`prepare_storage`)
    """

    def search_with_tables(manager: Any) -> None:
        if manager.storage is not None:
            prepare_storage(manager.storage)
        search(manager)

    return search_with_tables
