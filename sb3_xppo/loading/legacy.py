"""
What older stacks wrote, rebuilt without running it (docs/guide/security.md, "Files from older stacks"):

- a function that cloudpickle wrote *by value* (a closure, a lambda) is read as inert records (:class:`Symbol`,
  :class:`Call`): its code is never built, nothing of it is called. When the records describe one of the closures
  that SB3 and rl-zoo3 used as schedules (:data:`KNOWN_CLOSURES`), the schedule is rebuilt from the numbers in its
  closure, as the class that replaced it (SB3's ``constant_fn`` as ``ConstantSchedule``, ``get_linear_fn`` as
  ``LinearSchedule``, rl-zoo3's ``linear_schedule`` as its ``SimpleLinearSchedule``); any other function becomes an
  :class:`InertFunction`, which refuses to be called;
- a space of the old ``gym`` package (SB3 1.x) is rebuilt as the gymnasium space of the same fields, without gym.

A record takes the place of what it describes by becoming it (``__class__`` assignment), so that every reference
the pickle holds to it sees the rebuilt object.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule

from sb3_xppo.loading.errors import ZIP_HINT, Refusal, UnsafeFileError

#: The modules cloudpickle's own globals live in: what they name is read as inert records, never imported
CLOUDPICKLE_MODULES = ("cloudpickle", "cloudpickle.cloudpickle", "cloudpickle.cloudpickle_fast")

#: The old ``gym`` package's spaces by class name (``gym.spaces.box.Box``, ``gym.spaces.Box``)
GYM_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple")


class Symbol:
    """
    A global a pickle names that is not loaded: cloudpickle's own helpers, or a name outside the allowlist. Never
    imported; calling it makes a :class:`Call` record.
    """

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def is_cloudpickle(self) -> bool:
        return self.module in CLOUDPICKLE_MODULES

    def __call__(self, *args: Any, **kwargs: Any) -> Call:
        return Call(self, args, kwargs)

    def __reduce__(self) -> Any:
        raise TypeError(f"{self.dotted} was not loaded (no code from a file runs): it cannot be pickled")

    def __repr__(self) -> str:
        return f"<not loaded: {self.dotted}>"


class Call:
    """
    What calling a :class:`Symbol` (or a :class:`Call`) would have made: the callee, its arguments, and the state and
    items the pickle set on the result. Nothing is called.
    """

    def __init__(self, callee: Symbol | Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.callee, self.args, self.kwargs = callee, args, kwargs
        self.state: Any = None
        self.items: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Call:
        return Call(self, args, kwargs)

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: list[Any]) -> None:
        self.items.extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))

    @property
    def root(self) -> Symbol:
        """The symbol at the start of the call chain (``_builtin_type`` for ``_builtin_type('CodeType')(...)``)."""
        callee = self.callee
        while isinstance(callee, Call):
            callee = callee.callee
        return callee

    def __reduce__(self) -> Any:
        raise TypeError(f"{self.root.dotted}(...) was not loaded (no code from a file runs): it cannot be pickled")

    def __repr__(self) -> str:
        return f"<not loaded: {self.root.dotted}(...)>"


class InertFunction:
    """
    The stand-in for a function that a file pickled by value (a lambda or closure of someone's code): the model loads
    and acts, and calling the function (training with it as a schedule) raises
    :class:`~sb3_xppo.loading.errors.UnsafeFileError` naming the field. While the loader builds the model
    (:func:`building`), a schedule's call (one number in) gives :data:`BUILD_VALUE`: the optimizer's initial learning
    rate, which the saved optimizer state then replaces.

    :param field: where the function was (``model.zip: data['learning_rate']``)
    :param name: its module and qualified name as the file states them
    """

    def __init__(self, field: str, name: str) -> None:
        self.field, self.name = field, name
        self.building = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.building and len(args) == 1 and isinstance(args[0], (int, float)) and not kwargs:
            return BUILD_VALUE
        why = "a function pickled by value, not loaded: the model acts without it, training would call it"
        raise UnsafeFileError.of([Refusal(self.field, self.name, why)], ZIP_HINT)

    def __repr__(self) -> str:
        return f"InertFunction({self.name!r} of {self.field})"


#: What an :class:`InertFunction` gives a schedule's call while the model is built (never seen once it is loaded)
BUILD_VALUE = 1.0


@contextlib.contextmanager
def building(stand_ins: list[InertFunction]) -> Iterator[None]:
    """While the block runs (SB3's ``load()`` building the model), the stand-ins answer a schedule's call."""
    for stand_in in stand_ins:
        stand_in.building = True
    try:
        yield
    finally:
        for stand_in in stand_ins:
            stand_in.building = False


def _number(closure: dict[str, Any], *names: str) -> float | None:
    """The closure's one number, under any of ``names`` (the variable was renamed across versions)."""
    if len(closure) != 1 or next(iter(closure)) not in names:
        return None
    value = next(iter(closure.values()))
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _constant(closure: dict[str, Any]) -> Any:
    value = _number(closure, "val")
    return None if value is None else ConstantSchedule(value)


def _linear(closure: dict[str, Any]) -> Any:
    start, end, fraction = (closure.get(name) for name in ("start", "end", "end_fraction"))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, end, fraction))
    return LinearSchedule(start, end, fraction) if numbers and len(closure) == 3 else None  # type: ignore[arg-type]


def _zoo_linear(closure: dict[str, Any]) -> Any:
    """rl-zoo3's ``linear_schedule``, as rl-zoo3 builds it today (its class), else SB3's equal ``LinearSchedule``."""
    value = _number(closure, "initial_value", "initial_value_")
    if value is None:
        return None
    try:
        from rl_zoo3.utils import SimpleLinearSchedule
    except ImportError:
        return LinearSchedule(value, 0.0, 1.0)
    return SimpleLinearSchedule(value)


def _float_wrapper(closure: dict[str, Any]) -> Any:
    """SB3 2.x's ``get_schedule_fn``: ``lambda p: float(value_schedule(p))`` around a schedule already rebuilt."""
    inner = closure.get("value_schedule")
    plain = len(closure) == 1 and callable(inner) and not isinstance(inner, (Symbol, Call))
    return FloatSchedule(inner) if plain else None  # type: ignore[arg-type]


#: Closures SB3 and rl-zoo3 pickled as schedules: (module, qualified name) -> (the schedule object that replaced
#: it, built from the closure's variables, or None where they are not what that closure holds; what it was)
KNOWN_CLOSURES: dict[tuple[str, str], tuple[Callable[[dict[str, Any]], Any], str]] = {
    ("stable_baselines3.common.utils", "constant_fn.<locals>.func"): (_constant, "Stable-Baselines3's constant_fn"),
    ("stable_baselines3.common.utils", "get_linear_fn.<locals>.func"): (_linear, "Stable-Baselines3's get_linear_fn"),
    ("stable_baselines3.common.utils", "get_schedule_fn.<locals>.<lambda>"): (
        _float_wrapper,
        "Stable-Baselines3's get_schedule_fn",
    ),
    ("rl_zoo3.utils", "linear_schedule.<locals>.func"): (_zoo_linear, "rl-zoo3's linear_schedule"),
    ("utils.utils", "linear_schedule.<locals>.func"): (_zoo_linear, "rl-zoo3's linear_schedule"),
}

#: cloudpickle's helpers that make a function from its parts, over its versions
FUNCTION_MAKERS = ("_make_function", "_make_skel_func")
#: ... and that set its state once made
FUNCTION_SETTERS = ("_function_setstate", "_fill_function")


def is_function(record: Any) -> bool:
    """A :class:`Call` that makes a function: cloudpickle's ``_make_function`` / ``_make_skel_func``, or
    ``types.FunctionType`` (``LambdaType``) called through its ``_builtin_type``."""
    if not isinstance(record, Call):
        return False
    callee = record.callee
    if isinstance(callee, Symbol):
        return callee.is_cloudpickle and callee.name in FUNCTION_MAKERS
    return (
        isinstance(callee, Call)
        and callee.root.name == "_builtin_type"
        and callee.args in (("FunctionType",), ("LambdaType",))
    )


def _cell_value(cell: Any) -> Any:
    """The value of a closure cell record (``_make_cell(value)``, ``CellType(value)``), else the record itself."""
    if isinstance(cell, Call) and len(cell.args) == 1:
        return cell.args[0]
    return cell


def _function_parts(record: Call) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """:return: the function's ``module.qualname``, its code's free variables and its closure's values"""
    state = record.state if isinstance(record.state, (dict, tuple)) else {}
    slots = state[1] if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict) else {}
    flat = {**(state if isinstance(state, dict) else {}), **slots}
    code = record.args[0] if record.args else None
    code_args = code.args if isinstance(code, Call) else ()
    freevars = code_args[-2] if len(code_args) >= 2 and isinstance(code_args[-2], tuple) else ()
    name = flat.get("__qualname__", flat.get("qualname", flat.get("__name__", flat.get("name", "<lambda>"))))
    module = flat.get("__module__", flat.get("module", "?"))
    if "closure_values" in flat:  # cloudpickle 1.x's _fill_function
        closure: Any = flat["closure_values"] or ()
    else:
        closure = flat.get("__closure__", record.args[4] if len(record.args) > 4 else ())
    values = tuple(_cell_value(cell) for cell in closure) if isinstance(closure, (tuple, list)) else ()
    return f"{module}.{name}", tuple(freevars), values


def rebuild_function(record: Call, field: str) -> str:
    """
    Turn a function record into the schedule it was (:data:`KNOWN_CLOSURES`, from its closure's numbers) or into an
    :class:`InertFunction`, in place.

    :param record: a :class:`Call` for which :func:`is_function` holds, its state set
    :param field: where it was, for the stand-in's error
    :return: what it became, for the loader's warning
    """
    dotted, freevars, values = _function_parts(record)
    known = next((entry for (mod, qual), entry in KNOWN_CLOSURES.items() if dotted == f"{mod}.{qual}"), None)
    closure = dict(zip(freevars, values, strict=True)) if len(freevars) == len(values) else {}
    rebuilt = None if known is None else known[0](closure)
    if rebuilt is not None:
        _become(record, rebuilt)
        return f"{known[1]} (pickled by value), rebuilt as {rebuilt!r}"  # type: ignore[index]
    _become(record, InertFunction(field, dotted))
    return (
        f"a function pickled by value ({dotted}), loaded as an inert stand-in: the model acts, training would call it "
        "(give the field with custom_objects, or trust the file)"
    )


def _become(record: Any, value: Any) -> None:
    """``record`` becomes ``value`` (same identity, so that every reference the pickle holds sees it)."""
    record.__dict__.clear()
    record.__class__ = type(value)
    record.__dict__.update(vars(value))


def reachable(value: Any) -> Iterator[Any]:
    """``value`` and everything reachable from it through records (:class:`Symbol`, :class:`Call`) and containers."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        if isinstance(item, Call):
            todo += [item.callee, *item.args, *item.kwargs.values(), item.state, *item.items]
        elif isinstance(item, dict):
            todo += [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo += list(item)


class GymSpace(spaces.Space):
    """
    A space of the old ``gym`` package as a pickle makes it (``__new__`` then its state): at its state it becomes the
    gymnasium space of the same fields (:meth:`rebuild`). Which one is the class attribute ``kind``. (A gymnasium
    ``Space``, so that it can become one.)
    """

    kind = ""

    def rebuild(self, state: Any) -> str:
        """
        Become the gymnasium space that ``state`` (gym's ``__dict__``) describes.

        :return: what it became, for the loader's warning
        :raises ValueError: for a state that is not such a space's
        """
        if not isinstance(state, dict):
            raise ValueError(f"a gym {self.kind} space whose state is not a dict")
        _become(self, gym_space(self.kind, state))
        return f"a space of the old gym package, rebuilt as {self!r}"


def gym_space(kind: str, state: dict[str, Any]) -> spaces.Space:
    """
    :param kind: the gym space's class name (:data:`GYM_SPACES`)
    :param state: its ``__dict__`` as gym pickled it
    :return: the gymnasium space of the same fields
    """
    dtype: Any = state.get("dtype")
    if kind == "Box":
        return spaces.Box(low=np.asarray(state["low"]), high=np.asarray(state["high"]), dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(state["n"]), start=int(state.get("start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(state["nvec"]), dtype=dtype or np.int64)
    if kind == "MultiBinary":
        return spaces.MultiBinary(state["n"])
    if kind == "Dict":
        return spaces.Dict(dict(state["spaces"]))
    if kind == "Tuple":
        return spaces.Tuple(tuple(state["spaces"]))
    raise ValueError(f"gym.spaces.{kind} is not a space the loader rebuilds")


#: The stand-in class of each gym space (``gym.spaces.box.Box`` -> ``GYM_SPACE_CLASSES["Box"]``)
GYM_SPACE_CLASSES: dict[str, type[GymSpace]] = {
    name: type(f"Gym{name}", (GymSpace,), {"kind": name, "__module__": __name__}) for name in GYM_SPACES
}


def inert_functions(values: Any, wrappers: tuple[type, ...] = (FloatSchedule,)) -> list[InertFunction]:
    """
    :param values: a model's attributes (``vars(model).values()``)
    :param wrappers: the schedule classes that hold other schedules as attributes (SB3's ``FloatSchedule``)
    :return: the :class:`InertFunction` stand-ins among them, also inside ``wrappers`` (the schedules training would
        call)
    """
    found: list[InertFunction] = []
    todo = list(values)
    while todo:
        value = todo.pop()
        if isinstance(value, InertFunction):
            found.append(value)
        elif isinstance(value, wrappers):
            todo += list(vars(value).values())
    return found


def refuse_inert(model: Any, wrappers: tuple[type, ...] = (FloatSchedule,)) -> None:
    """
    Before training: a model loaded from a file whose schedule was a function pickled by value holds an inert
    stand-in, which training would call.

    :param model: the model
    :param wrappers: as :func:`inert_functions`'s
    :raises UnsafeFileError: naming each such field
    """
    inert = inert_functions(vars(model).values(), wrappers)
    if inert:
        why = "a function pickled by value, not loaded: training would call it"
        raise UnsafeFileError.of([Refusal(f.field, f.name, why) for f in inert], ZIP_HINT)
