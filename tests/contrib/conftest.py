"""
sb3-contrib's own tests of ``MaskablePPO`` and ``RecurrentPPO`` (vendored here unchanged, see README.md), run against
:class:`~sb3_xppo.MaskableXPPO` and :class:`~sb3_xppo.RecurrentXPPO`: ``sb3_contrib.MaskablePPO`` and
``sb3_contrib.RecurrentPPO`` are replaced by our classes before the test modules import them, and the tests of the
files shared with sb3-contrib's other algorithms (TQC, QRDQN, ARS, ...) run only where they exercise ours.

They are slow (minutes), so they run only when asked for by path, never in the default ``pytest`` run::

    pytest tests/contrib -p no:cacheprovider
"""

from pathlib import Path

import pytest
import sb3_contrib

from sb3_xppo import MaskableXPPO, RecurrentXPPO

HERE = Path(__file__).resolve().parent
#: the names the vendored modules import (``from sb3_contrib import MaskablePPO``) and what they resolve to here
REPLACED = {"MaskablePPO": MaskableXPPO, "RecurrentPPO": RecurrentXPPO}
#: modules that test only MaskablePPO / RecurrentPPO: every test runs
OWN_MODULES = {"test_invalid_actions.py", "test_lstm.py"}
#: the parameter through which the shared modules run one test over several algorithms
ALGORITHM_PARAMETERS = ("algo", "model_class")

_originals: dict[str, type] = {}


def requested(config: pytest.Config) -> bool:
    """
    Whether the command line names this folder, or a file or test in it (plain ``pytest`` runs ``testpaths``).

    :param config: pytest's configuration
    :return: True to collect and run the vendored tests
    """
    for arg in config.args:
        path = Path(arg.split("::")[0])
        if not path.is_absolute():
            path = config.invocation_params.dir / path
        path = path.resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    # Before collection imports the test modules, so that their `from sb3_contrib import MaskablePPO` gets ours
    if requested(config) and not _originals:
        for name, replacement in REPLACED.items():
            _originals[name] = getattr(sb3_contrib, name)
            setattr(sb3_contrib, name, replacement)


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, original in _originals.items():
        setattr(sb3_contrib, name, original)
    _originals.clear()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # Out of the default run: True skips this folder's files; None leaves the decision to pytest
    if collection_path.resolve().parent == HERE and not requested(config):
        return True
    return None


def exercises_ours(item: pytest.Item) -> bool:
    """
    Whether a vendored test exercises MaskablePPO or RecurrentPPO (now ours).

    :param item: a collected test
    :return: True for every test of :data:`OWN_MODULES`; in the shared modules, a test parametrised over algorithms
        when the algorithm is ours, another when its code names one of the replaced classes
    """
    if item.path.name in OWN_MODULES:
        return True
    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    for name in ALGORITHM_PARAMETERS:
        if name in params:
            return params[name] in REPLACED.values()
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and bool(set(code.co_names) & set(REPLACED))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if item.path.parent == HERE]
    if _originals and len(ours) < len(items):
        # The other test modules would import the replaced names too, and compare our classes with themselves
        raise pytest.UsageError("run the vendored sb3-contrib tests on their own: `pytest tests/contrib`")
    # The replacement must have happened before the modules were imported, else the tests would run sb3-contrib's
    for module in {item.module for item in ours if isinstance(item, pytest.Function)}:
        for name, replacement in REPLACED.items():
            if name in vars(module) and vars(module)[name] is not replacement:
                raise pytest.UsageError(f"{module.__name__}.{name} is not {replacement.__name__}: run `pytest tests/contrib`")
    deselected = [item for item in ours if not exercises_ours(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        dropped = set(deselected)
        items[:] = [item for item in items if item not in dropped]
