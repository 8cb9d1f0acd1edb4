"""
Options declared once: a frozen dataclass whose fields are the options, each with its type, default, documentation
and check (:func:`option`), checked in the declared order by :func:`check_declared`. :class:`~sb3_xppo.XPPOOptions`
and :class:`~sb3_xppo.dagger_distill.DistillOptions` are both made of them; :mod:`~sb3_xppo.common.option_docs`
renders their documentation.
"""

from collections.abc import Callable, Mapping
from dataclasses import field, fields
from typing import Any

import numpy as np

#: ``check(value, checked) -> value``: raises for a bad value, naming the keyword, and returns the canonical value;
#: ``checked`` holds the context the options class gives (XPPO: PPO's ``clip_range`` and ``clip_range_vf``) and the
#: options declared before, canonical
OptionCheck = Callable[[Any, Mapping[str, Any]], Any]


def option(default: Any, doc: str, check: OptionCheck, **metadata: Any) -> Any:
    """
    One option, a field of an options dataclass.

    :param default: its default (also what a model saved before the option existed reads)
    :param doc: its ``:param:`` text (reST, citing the paper)
    :param check: its check (:data:`OptionCheck`)
    :param metadata: what else the options class declares with it (``DistillOptions``: which classes read it, its
        command-line flag)
    :return: the dataclass field
    """
    return field(default=default, metadata={"doc": doc, "check": check, **metadata})


def check_declared(options: Any, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """
    Every option of an options dataclass checked, in the declared order (each check sees the ones before it,
    canonical).

    :param options: an instance of the options dataclass
    :param context: values the checks read besides the options (not returned)
    :return: the options' canonical values, by name
    :raises ValueError: (or ``TypeError``) from the first check that refuses, naming the option
    """
    checked: dict[str, Any] = dict(context or {})
    for f in fields(options):
        checked[f.name] = f.metadata["check"](getattr(options, f.name), checked)
    return {f.name: checked[f.name] for f in fields(options)}


def is_number(x: Any) -> bool:
    """A real number (numpy's too), not a bool."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def check_choice(name: str, value: Any, choices: tuple) -> Any:
    """:raises ValueError: naming the option and its choices, for a value that is not one of them"""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def as_bool(value: Any, checked: Mapping[str, Any]) -> bool:
    """A switch read as Python truth (``delightful``, ``normalize_groups``)."""
    return bool(value)


def check_fast_paths(fast_paths: Any, checked: Mapping[str, Any]) -> bool:
    if not isinstance(fast_paths, (bool, np.bool_)):
        raise TypeError(f"fast_paths must be True or False, got {fast_paths!r}")
    return bool(fast_paths)
