"""
The pytest plugin under which ``tests/upstream/run.py`` runs a library's own tests: the library's names (``PPO``,
``MaskablePPO``, ``RecurrentPPO``) are replaced by the package's classes before any test module imports them, and
only the tests that exercise them run (a test parametrised over algorithms where the algorithm is ours, another
where its code names a replaced class), less the suite's ``deselected``. ``SB3_XPPO_UPSTREAM_SUITE`` names the suite.
"""

from __future__ import annotations

import importlib
import os

import pytest
from suites import SUITES

import sb3_xppo

#: the parameters through which a test runs over several algorithms
ALGORITHM_PARAMETERS = ("model_class", "algo", "algo_class")

_originals: dict[str, object] = {}


def _suite():
    return SUITES[os.environ["SB3_XPPO_UPSTREAM_SUITE"]]


def pytest_configure(config: pytest.Config) -> None:
    suite = _suite()
    library = importlib.import_module(suite.module)
    for name, ours in suite.replaced.items():
        _originals[name] = getattr(library, name)
        setattr(library, name, getattr(sb3_xppo, ours))


def pytest_unconfigure(config: pytest.Config) -> None:
    library = importlib.import_module(_suite().module)
    for name, original in _originals.items():
        setattr(library, name, original)


def exercises_ours(item: pytest.Item) -> bool:
    """Whether a collected test runs one of the package's classes in its parent's place."""
    replaced = _suite().replaced
    ours = tuple(getattr(sb3_xppo, name) for name in replaced.values())
    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    for name in ALGORITHM_PARAMETERS:
        if name in params:
            return params[name] in ours
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and bool(set(code.co_names) & set(replaced))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite = _suite()
    replaced, deselected_ids = suite.replaced, suite.deselected
    for module in {item.module for item in items if isinstance(item, pytest.Function)}:
        for name, ours in replaced.items():
            if name in vars(module) and vars(module)[name] is not getattr(sb3_xppo, ours):
                raise pytest.UsageError(f"{module.__name__}.{name} is not sb3_xppo.{ours}: the replacement did not take")
    unknown = set(deselected_ids) - {item.nodeid for item in items}
    if unknown and not (config.option.keyword or config.option.markexpr or config.args != ["tests"]):
        raise pytest.UsageError(f"the deselect list names tests this suite no longer has: {sorted(unknown)}")
    deselected = [item for item in items if item.nodeid in deselected_ids or not exercises_ours(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        dropped = set(deselected)
        items[:] = [item for item in items if item not in dropped]


def pytest_report_header(config: pytest.Config) -> str:
    suite = _suite()
    names = ", ".join(f"{name} -> sb3_xppo.{ours}" for name, ours in suite.replaced.items())
    return f"{suite.distribution} {suite.version}'s own tests, with {names}"
