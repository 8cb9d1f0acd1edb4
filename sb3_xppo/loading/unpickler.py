"""
The pickle reader of the safe loader (docs/guide/security.md): :class:`SafeUnpickler`, Python's own pickle machine
with every opcode that names, calls, builds or changes an object checked. A pickle here is a program for that
machine; this one runs only what the libraries write:

- **Names** (``GLOBAL``, ``STACK_GLOBAL``, ``INST``) go through the gate
  (:func:`~sb3_xppo.loading.gate.library_global`): nothing is imported for a name. A name outside the allowlist is
  kept as an inert :class:`~sb3_xppo.loading.legacy.Symbol`; cloudpickle's helpers, and the old ``gym`` package's
  spaces, are read as records (:mod:`~sb3_xppo.loading.legacy`).
- **Calls** (``REDUCE``, ``NEWOBJ``, ``OBJ``) run only the checked constructors of :data:`CALLS` (numpy's array,
  dtype, scalar and random-state rebuilders, torch's tensor rebuilders, containers, ``copyreg._reconstructor``,
  an enum's member by name), each checking its arguments first: no object array, no buffer of another size than its
  shape, no tensor hook, no allocation beyond the budget. A class the file may name is created only by
  ``object.__new__`` (then given its state), never called. A call of a record makes another record.
- **Changes** (``BUILD``, ``SETITEM(S)``, ``APPEND(S)``, ``ADDITEMS``) apply only to objects this pickle made,
  never to a class, an enum member or anything else it only named; numpy arrays and dtypes take only states that
  describe plain data. Keys of dicts and sets are strings, bytes, small integers and the like, whose hashes a file
  cannot make collide.
- ``EXT*`` (the extension registry) and persistent ids (outside torch's own files) are refused.

At the end no record may be left outside a function pickled by value: a name outside the allowlist that the result
would hold is refused (:class:`~sb3_xppo.loading.errors.UnsafeFileError`, every such name listed).
"""

from __future__ import annotations

import _compat_pickle
import enum
import io
import os
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.random import SeedSequence

from sb3_xppo.loading.constructors import (
    ALLOCATION_BUDGET,
    ARGUMENT_CLASSES,
    CALLS,
    CONSTRUCTIBLE,
    CONTAINERS,
    Checked,
    CheckedConstructors,
    dotted,
)
from sb3_xppo.loading.errors import PICKLE_HINT, Refusal, UnsafeFileError
from sb3_xppo.loading.gate import library_global
from sb3_xppo.loading.legacy import (
    CLOUDPICKLE_MODULES,
    FUNCTION_SETTERS,
    GYM_SPACE_CLASSES,
    Call,
    GymSpace,
    InertFunction,
    Symbol,
    is_function,
    reachable,
    rebuild_function,
)

#: Python's own pickle machine, opcode by opcode: what each checked opcode does once checked
PYTHON_DISPATCH: dict[int, Callable[..., None]] = pickle._Unpickler.dispatch  # type: ignore[attr-defined]


class SafeUnpickler(CheckedConstructors, pickle._Unpickler):
    """
    Python's pickle machine with the checks of this module. Not thread-safe (one per load).

    :param file: the pickle (``read`` and ``readline``)
    :param field: where it comes from (``model.zip: data['clip_range']``, a path), named in errors
    :param hint: how to go on after a refusal (default: :data:`~sb3_xppo.loading.errors.PICKLE_HINT`)
    :param budget: what it may allocate beyond its own bytes, in bytes
    :param kwargs: ``pickle.Unpickler``'s (``encoding``, ``errors``; torch passes them)
    """

    dispatch: ClassVar[dict[int, Callable[..., None]]] = dict(PYTHON_DISPATCH)
    # the pure-Python machine's state (typeshed does not declare it)
    stack: list[Any]
    metastack: list[list[Any]]
    append: Callable[[Any], None]
    proto: int
    fix_imports: bool

    def __init__(
        self,
        file: Any,
        field: str = "pickle",
        hint: str = PICKLE_HINT,
        budget: int = ALLOCATION_BUDGET,
        **kwargs: Any,
    ) -> None:
        super().__init__(file, **kwargs)
        self.field, self.hint, self.budget = field, hint, budget
        self._notes: dict[int, str] = {}  # what was rebuilt, by record: an old schedule, a gym space, a stand-in
        #: the inert stand-ins made (:class:`~sb3_xppo.loading.legacy.InertFunction`)
        self.inert: list[InertFunction] = []
        self._calls = {key: Checked(".".join(key), getattr(self, name)) for key, name in CALLS.items()}
        self._named: dict[int, Any] = {}  # objects the pickle only named (and enum members): never changed
        self._records: list[Call] = []
        self._refused: list[Symbol] = []
        self._absorbed: set[int] = set()
        self._gym: list[GymSpace] = []

    # --- names ---------------------------------------------------------------------------------------------------

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[module, name]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        key = (module, name)
        if key in self._calls:
            return self._calls[key]
        if module in CLOUDPICKLE_MODULES:
            return Symbol(module, name)
        value = CONSTRUCTIBLE.get(key) or ARGUMENT_CLASSES.get(key)
        if value is None and (module == "gym.spaces" or module.startswith("gym.spaces.")):
            value = GYM_SPACE_CLASSES.get(name)
        if value is None:
            value = library_global(module, name)
        if value is None:
            symbol = Symbol(module, name)
            self._refused.append(symbol)
            return symbol
        return self._name(value)

    # --- calls ---------------------------------------------------------------------------------------------------

    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self._call(self.stack[-1], args, {})

    def load_newobj(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self._new(self.stack[-1], args, {})

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        self.stack[-1] = self._new(self.stack[-1], args, kwargs)

    def _instantiate(self, klass: Any, args: list[Any]) -> None:
        if args or not isinstance(klass, type):
            self.append(self._call(klass, tuple(args), {}))
        else:
            self.append(self._new(klass, (), {}))

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def _record(self, callee: Symbol | Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
        record = Call(callee, args, kwargs)
        self._records.append(record)
        return record

    def _call(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise pickle.UnpicklingError("a call whose arguments are not a tuple")
        if isinstance(func, Symbol) and func.is_cloudpickle and func.name in FUNCTION_SETTERS:
            return self._set_function_state(func.name, args)
        if isinstance(func, (Symbol, Call)):
            return self._record(func, args, kwargs)
        if isinstance(func, Checked):
            return func.function(*args, **kwargs)
        if any(func is cls for cls in CONSTRUCTIBLE.values()):
            return self._construct(func, args, kwargs)
        if isinstance(func, enum.EnumMeta) and len(args) == 1 and not kwargs:
            return self._name(func(args[0]))  # the member of that value
        raise self._refuse(dotted(func), "a class the file may name, not call")

    def _new(self, cls: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if isinstance(cls, (Symbol, Call)):
            return self._record(cls, args, kwargs)
        if not isinstance(cls, type) or not isinstance(args, tuple):
            raise pickle.UnpicklingError("NEWOBJ of something that is not a class")
        if isinstance(cls, enum.EnumMeta):
            return self._call(cls, args, kwargs)
        if issubclass(cls, GymSpace):
            space = cls()
            self._gym.append(space)
            return space
        if any(cls is base for base in CONSTRUCTIBLE.values()) or issubclass(cls, CONTAINERS):
            self._check_items(cls, args)
            return cls.__new__(cls, *args, **kwargs)
        if cls.__new__ is object.__new__ and not args and not kwargs:
            return object.__new__(cls)
        raise self._refuse(dotted(cls), "a class the file may name, not create")

    def _reconstructor(self, cls: Any, base: Any, state: Any) -> Any:
        """``copyreg._reconstructor`` (protocols 0 and 1): ``base.__new__(cls, state)``, for plain bases only."""
        if isinstance(cls, (Symbol, Call)):
            return self._record(cls, (base, state), {})
        if base is object:
            return self._new(cls, (), {})
        if not (isinstance(cls, type) and base in (dict, list, set, tuple) and issubclass(cls, base)):
            raise self._refuse(dotted(cls), "a class the file may name, not create")
        self._check_items(base, (state,))
        obj = base.__new__(cls, state)
        base.__init__(obj, state)
        return obj

    def _set_function_state(self, setter: str, args: tuple[Any, ...]) -> Any:
        """cloudpickle's ``_function_setstate(func, state)`` / ``_fill_function(func, ...)``: the record completed."""
        if not args or not is_function(args[0]):
            raise pickle.UnpicklingError(f"cloudpickle's {setter} on something that is not a function record")
        function = args[0]
        if len(args) == 2:  # _function_setstate(func, state), _fill_function(func, state)
            function.state = args[1]
        elif len(args) in (5, 6):  # _fill_function(func, globals, defaults, dict[, module], closure_values)
            function.state = {"module": args[4] if len(args) == 6 else "?", "closure_values": args[-1]}
        else:
            raise pickle.UnpicklingError(f"cloudpickle's {setter} with {len(args)} arguments")
        self._finish_function(function)
        return None if setter == "_function_setstate" else function

    def _finish_function(self, function: Call) -> None:
        inner = {id(item) for item in reachable(function)}
        self._absorbed |= inner
        for key in inner & set(self._notes):  # (a schedule around another: what the outer one became says it)
            del self._notes[key]
        self._notes[id(function)] = rebuild_function(function, self.field)
        if isinstance(function, InertFunction):
            self.inert.append(function)

    @property
    def notes(self) -> list[str]:
        """What was rebuilt (an old schedule, a gym space, an inert stand-in), for the loader's warnings."""
        return list(self._notes.values())

    # --- changes ---------------------------------------------------------------------------------------------------

    def _changeable(self, obj: Any) -> None:
        if id(obj) in self._named or isinstance(obj, (Symbol, Checked, type)):
            raise self._refuse(dotted(obj) if isinstance(obj, type) else repr(obj), "changes an object it only named")

    def load_build(self) -> None:
        state, inst = self.stack[-1], self.stack[-2]
        if isinstance(inst, Call):
            self.stack.pop()
            inst.state = state
            if is_function(inst):
                self._finish_function(inst)
            return
        if isinstance(inst, GymSpace):
            self.stack.pop()
            self._notes[id(inst)] = inst.rebuild(state)
            return
        self._changeable(inst)
        if isinstance(inst, np.ndarray):
            self._check_array_state(state)
        elif isinstance(inst, np.dtype):
            self._check_dtype_state(inst, state)
        PYTHON_DISPATCH[pickle.BUILD[0]](self)
        if isinstance(inst, SeedSequence) and (len(inst.pool) != inst.pool_size or inst.pool_size > 2**16):
            raise pickle.UnpicklingError("a SeedSequence whose pool is not its pool size")

    def load_setitem(self) -> None:
        self._changeable(self.stack[-3])
        if isinstance(self.stack[-3], dict):
            self._check_keys([self.stack[-2]])
        PYTHON_DISPATCH[pickle.SETITEM[0]](self)

    def load_setitems(self) -> None:
        target = self.metastack[-1][-1] if self.metastack and self.metastack[-1] else None
        self._changeable(target)
        if isinstance(target, dict):
            self._check_keys(self.stack[0::2])
        PYTHON_DISPATCH[pickle.SETITEMS[0]](self)

    def load_append(self) -> None:
        self._changeable(self.stack[-2])
        PYTHON_DISPATCH[pickle.APPEND[0]](self)

    def load_appends(self) -> None:
        self._changeable(self.metastack[-1][-1] if self.metastack and self.metastack[-1] else None)
        PYTHON_DISPATCH[pickle.APPENDS[0]](self)

    def load_additems(self) -> None:
        target = self.metastack[-1][-1] if self.metastack and self.metastack[-1] else None
        self._changeable(target)
        self._check_keys(self.stack)
        PYTHON_DISPATCH[pickle.ADDITEMS[0]](self)

    def load_dict(self) -> None:
        self._check_keys(self.stack[0::2])
        PYTHON_DISPATCH[pickle.DICT[0]](self)

    def load_frozenset(self) -> None:
        self._check_keys(self.stack)
        PYTHON_DISPATCH[pickle.FROZENSET[0]](self)

    def load_ext(self) -> None:
        raise self._refuse("an extension code (EXT1/EXT2/EXT4)", "copyreg's extension registry, which the libraries never use")

    def persistent_load(self, pid: Any) -> Any:
        raise self._refuse("a persistent id", "a reference outside the pickle, which the libraries write only in torch files")

    for _opcode, _method in (
        (pickle.BUILD, load_build),
        (pickle.SETITEM, load_setitem),
        (pickle.SETITEMS, load_setitems),
        (pickle.APPEND, load_append),
        (pickle.APPENDS, load_appends),
        (pickle.ADDITEMS, load_additems),
        (pickle.DICT, load_dict),
        (pickle.FROZENSET, load_frozenset),
        (pickle.EXT1, load_ext),
        (pickle.EXT2, load_ext),
        (pickle.EXT4, load_ext),
    ):
        dispatch[_opcode[0]] = _method
    del _opcode, _method

    # --- the end ---------------------------------------------------------------------------------------------------

    def load(self) -> Any:
        """
        :return: the object, with what older stacks wrote rebuilt (:attr:`notes`)
        :raises UnsafeFileError: listing every name outside the allowlist the object would hold
        """
        value = super().load()
        if isinstance(value, Checked):
            raise self._refuse(value.dotted, "a function the loader calls only while it reads the pickle")
        for record in self._records:
            if type(record) is Call and id(record) not in self._absorbed and is_function(record):
                self._finish_function(record)  # a function whose state never came: inert
        refused = [symbol.dotted for symbol in self._refused if id(symbol) not in self._absorbed]
        refused += [
            record.root.dotted for record in self._records if type(record) is Call and id(record) not in self._absorbed
        ]
        refused += [f"gym.spaces.{space.kind}" for space in self._gym if isinstance(space, GymSpace)]
        if refused:
            by_value = "code pickled by value: a class or module of someone's script"
            listed = [
                Refusal(self.field, name, by_value if name.startswith("cloudpickle") else "")
                for name in dict.fromkeys(refused)
            ]
            raise UnsafeFileError.of(listed, self.hint)
        return value


def restricted_loads(blob: bytes, field: str, hint: str = PICKLE_HINT) -> Any:
    """
    :param blob: a pickle
    :param field: where it comes from, named in errors
    :param hint: how to go on after a refusal
    :return: the object
    :raises UnsafeFileError: when it asks for a global outside the allowlist
    """
    return SafeUnpickler(io.BytesIO(blob), field, hint, budget=ALLOCATION_BUDGET + 4 * len(blob)).load()


def loads_with_notes(blob: bytes, field: str, hint: str = PICKLE_HINT) -> tuple[Any, SafeUnpickler]:
    """:func:`restricted_loads`, also returning the unpickler (its :attr:`~SafeUnpickler.notes` and ``inert``)."""
    unpickler = SafeUnpickler(io.BytesIO(blob), field, hint, budget=ALLOCATION_BUDGET + 4 * len(blob))
    return unpickler.load(), unpickler


def read_file(path: str | os.PathLike) -> bytes:
    """:return: a file's bytes (a pickle is read whole before any of it is decoded)"""
    with open(path, "rb") as file:
        return file.read()
