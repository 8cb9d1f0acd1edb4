"""Keywords that tools see: each algorithm's module holds its full constructor signature (the parent's parameters, then
every option, with types and defaults) as an explicit ``__init__`` for type checkers and IDEs, generated from the
options object (sb3_xppo/core/signatures.py). ``python tests/test_signatures.py`` rewrites the generated regions."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from sb3_xppo import XPPO, MaskableRecurrentXPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.common import loss_registry
from sb3_xppo.core.setup import parent_algorithm
from sb3_xppo.core.signatures import (
    INIT_START,
    annotation_source,
    loss_names_region,
    module_path,
    rewrite,
    rewrite_loss_names,
    stale_regions,
)

ALGORITHMS = [XPPO, MaskableXPPO, RecurrentXPPO, MaskableRecurrentXPPO]
TYPING = Path(__file__).parent / "typing"
REPO = Path(__file__).parent.parent


def static_init(cls: type) -> ast.FunctionDef:
    """The ``__init__`` that type checkers read in ``cls``'s module (the generated one, under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(module_path(cls).read_text())
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls.__name__).body
    guarded = [node for node in body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    return next(node for block in guarded for node in block.body if isinstance(node, ast.FunctionDef))


@pytest.mark.parametrize("cls", ALGORITHMS, ids=lambda c: c.__name__)
def test_generated_signature_is_current(cls) -> None:
    stale = stale_regions(cls, module_path(cls).read_text())
    assert not stale, f"{module_path(cls)}: regenerate with python tests/test_signatures.py ({stale})"


@pytest.mark.parametrize("cls", ALGORITHMS, ids=lambda c: c.__name__)
def test_static_signature_is_the_runtime_one_and_the_options(cls) -> None:
    init = static_init(cls)
    positional = [a.arg for a in init.args.args][1:]
    keywords = [a.arg for a in init.args.kwonlyargs]
    runtime = inspect.signature(cls)
    assert [*positional, *keywords] == list(runtime.parameters)
    parent = list(inspect.signature(parent_algorithm(cls).__init__).parameters)[1:]
    assert positional == parent
    fields = dataclasses.fields(cls.options_class)
    assert keywords == ["options", *(f.name for f in fields)]
    # every option's default and type, as the options object declares them
    defaults = dict(zip(keywords, (ast.literal_eval(d) for d in init.args.kw_defaults), strict=True))
    hints = typing.get_type_hints(cls.options_class)
    annotations = {a.arg: ast.unparse(a.annotation) for a in init.args.kwonlyargs}
    for f in fields:
        assert defaults[f.name] == f.default, f.name
        assert annotations[f.name] == annotation_source(hints[f.name]).replace('"', "'"), f.name
    assert runtime.parameters["actor_loss"].default == "clip"
    # the loss names by their registry's types, written by name
    assert annotations["actor_loss"] == "sb3_xppo.common.loss_registry.ActorLossName"
    assert annotations["value_loss"] == "sb3_xppo.common.loss_registry.ValueLossName | None"


def test_loss_name_types_are_the_registry_s() -> None:
    """The ``Literal`` types of ``actor_loss`` and ``value_loss`` hold the built-in losses' names, in their order."""
    assert loss_names_region() in Path(loss_registry.__file__).read_text(), "regenerate: python tests/test_signatures.py"
    assert (
        typing.get_args(loss_registry.ActorLossName) == loss_registry.ACTOR_LOSSES == ("clip", "spo", "asymmetric_spo", "hpo")
    )
    assert typing.get_args(loss_registry.ValueLossName) == loss_registry.VALUE_LOSSES


def test_stale_loss_names_are_found(monkeypatch) -> None:
    """Negative control: a built-in loss declared without regenerating the types is found."""
    monkeypatch.setattr(loss_registry, "ACTOR_LOSSES", (*loss_registry.ACTOR_LOSSES, "new_loss"))
    assert loss_names_region() not in Path(loss_registry.__file__).read_text()


def test_stale_region_is_found(tmp_path) -> None:
    """Negative control: an option missing from the generated constructor is found."""
    text = module_path(XPPO).read_text().replace("            fast_paths: bool = True,\n", "")
    assert stale_regions(XPPO, text) == [INIT_START.strip()]


MYPY = shutil.which("mypy")


def mypy(path: Path) -> str:
    result = subprocess.run(
        [MYPY, "--config-file", str(REPO / "pyproject.toml"), str(path)], cwd=REPO, capture_output=True, text=True
    )
    return result.stdout


@pytest.mark.slow
@pytest.mark.skipif(MYPY is None, reason="mypy is not installed (the tests extra)")
def test_mypy_sees_the_keywords() -> None:
    """mypy rejects an unknown keyword and a wrong type, and accepts the file's good calls (which it checks too)."""
    out = mypy(TYPING / "check_keywords.py")
    assert 'Unexpected keyword argument "not_a_keyword" for "XPPO"' in out, out
    assert 'Argument "n_steps" to "XPPO" has incompatible type "str"; expected "int"' in out, out
    literal = "Literal['clip', 'spo', 'asymmetric_spo', 'hpo']"
    assert f'Argument "actor_loss" to "RecurrentXPPO" has incompatible type "Literal[1]"; expected "{literal}"' in out, out
    assert f'Argument "actor_loss" to "XPPO" has incompatible type "Literal[\'cilp\']"; expected "{literal}"' in out, out
    assert 'Unexpected keyword argument "sequence_batching" for "MaskableXPPO"' in out, out
    assert "Found 5 errors in 1 file" in out, out  # the good calls pass


if __name__ == "__main__":
    for algorithm in ALGORITHMS:
        print(f"{module_path(algorithm)}: {'rewritten' if rewrite(algorithm) else 'up to date'}")
    print(f"{loss_registry.__file__}: {'rewritten' if rewrite_loss_names() else 'up to date'}")
    sys.exit(0)
