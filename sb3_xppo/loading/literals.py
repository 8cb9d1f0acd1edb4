"""
Python values written as text (rl-zoo3's ``normalize: "dict(norm_obs=True)"``, ``policy_kwargs`` and
``--env-kwargs``), read without executing them: literals, ``dict(key=value, ...)``, and the torch activation and
optimizer classes that rl-zoo3's configs name (``nn.ReLU``, ``th.nn.Tanh``, ``th.optim.Adam``, ``RMSpropTFLike``),
each checked by the gate (:func:`~sb3_xppo.loading.gate.library_global`). Nothing is ``eval``-ed.
"""

from __future__ import annotations

import ast
from typing import Any

import torch as th
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

from sb3_xppo.loading.errors import LITERALS_ONLY, UnsafeFileError
from sb3_xppo.loading.gate import library_global

#: How rl-zoo3's configs spell torch's namespaces (its ``eval`` sees ``nn`` and ``th``)
NAMESPACES = {"nn": th.nn, "th.nn": th.nn, "torch.nn": th.nn, "optim": th.optim, "th.optim": th.optim, "torch.optim": th.optim}


def _dotted(node: ast.expr) -> str | None:
    """``th.nn.ReLU`` -> ``'th.nn.ReLU'``; None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _class(name: str, field: str) -> Any:
    """An activation or optimizer class named as rl-zoo3's configs name it, if the allowlist holds it."""
    if name == "RMSpropTFLike":
        return RMSpropTFLike
    namespace, _, attr = name.rpartition(".")
    value = getattr(NAMESPACES[namespace], attr, None) if namespace in NAMESPACES else None
    if not isinstance(value, type) or library_global(value.__module__, value.__name__) is None:
        raise UnsafeFileError(field, name, "a name that is not a torch activation or optimizer class", LITERALS_ONLY)
    return value


def _value(node: ast.expr, field: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_value(item, field) for item in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        return {_value(key, field): _value(value, field) for key, value in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _value(node.operand, field)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    dict_call = isinstance(node, ast.Call) and _dotted(node.func) == "dict" and not node.args
    if isinstance(node, ast.Call) and dict_call and all(keyword.arg is not None for keyword in node.keywords):
        return {keyword.arg: _value(keyword.value, field) for keyword in node.keywords}
    name = _dotted(node)
    if name is not None:
        return _class(name, field)
    raise UnsafeFileError(field, ast.unparse(node)[:80], "code, not a literal", LITERALS_ONLY)


def python_literal(text: str, field: str) -> Any:
    """
    A value written as Python text, read without running it.

    :param text: a literal (``"0.5"``, ``"[64, 64]"``, ``"{'a': 1}"``), ``dict(key=value, ...)`` (nested), or a
        torch activation / optimizer class name as rl-zoo3 writes it (``nn.ReLU``, ``th.nn.Tanh``)
    :param field: what the text is (``--policy-kwargs``, ``config.yml: normalize``), named in errors
    :return: the value
    :raises UnsafeFileError: for code (a call, a name outside the allowlist): a ``ValueError`` naming ``field``
    :raises ValueError: for text that is not Python
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"{field}: cannot read {text!r} ({error.msg})") from None
    return _value(tree.body, field)
