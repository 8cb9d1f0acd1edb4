"""
How a checkpoint's state is written without pickle: nested dicts, lists, tuples, numbers and strings as JSON (Python's
``repr`` of a float reads back to the same bits), every numpy array and numpy scalar in an ``.npz`` read with
``allow_pickle=False``. Nothing in a checkpoint names code, so reading one runs none (docs/guide/security.md).
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np


def encode(state: Any) -> tuple[bytes, bytes]:
    """
    :param state: nested dicts (string keys), lists, tuples, None, bools, ints, floats, strings, numpy arrays and scalars
    :return: the JSON and the ``.npz`` bytes
    :raises TypeError: naming the path of a value of another type
    """
    arrays: dict[str, np.ndarray] = {}

    def walk(value: Any, path: str) -> Any:
        if value is None or (isinstance(value, (bool, int, float, str)) and not isinstance(value, np.generic)):
            return value
        if isinstance(value, (np.ndarray, np.generic)):
            key = f"a{len(arrays)}"
            arrays[key] = np.asarray(value)
            if arrays[key].dtype == object:
                raise TypeError(f"checkpoint state {path}: an array of Python objects cannot be saved without pickle")
            return {"__array__" if isinstance(value, np.ndarray) else "__scalar__": key}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TypeError(f"checkpoint state {path}: dict keys must be strings, got {list(value)!r}")
            return {"__dict__": {k: walk(v, f"{path}.{k}") for k, v in value.items()}}
        if isinstance(value, tuple):
            return {"__tuple__": [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
        raise TypeError(f"checkpoint state {path}: cannot save a {type(value).__name__} without pickle")

    tree = walk(state, "state")
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return json.dumps(tree).encode(), buffer.getvalue()


def decode(text: bytes, npz: bytes) -> Any:
    """
    :return: the state :func:`encode` was given (arrays read with ``allow_pickle=False``)
    :raises ValueError: for an array of Python objects (which needs pickle), naming it
    """
    arrays = {}
    with np.load(io.BytesIO(npz), allow_pickle=False) as files:
        for key in files.files:
            try:
                arrays[key] = files[key]
            except ValueError as error:
                raise ValueError(f"the state's array {key!r} cannot be read without pickle ({error})") from None

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            if "__array__" in value:
                return arrays[value["__array__"]]
            if "__scalar__" in value:
                return arrays[value["__scalar__"]][()]
            if "__tuple__" in value:
                return tuple(walk(v) for v in value["__tuple__"])
            return {k: walk(v) for k, v in value["__dict__"].items()}
        return value

    return walk(json.loads(text))
