"""
The constructors a pickle may call through :class:`~sb3_xppo.loading.unpickler.SafeUnpickler` (docs/guide/security.md),
each checking its arguments before it builds anything: numpy's array, dtype, scalar and random-state rebuilders,
torch's tensor rebuilders, the containers and value types (:data:`CONSTRUCTIBLE`), an attribute by ``getattr`` (an
enum's member, :data:`~sb3_xppo.loading.gate.CLASS_ATTRIBUTES`); and the states numpy's arrays and dtypes may take.
No object array, no buffer of another size than its shape, no tensor hook, no allocation beyond the budget; keys of
dicts and sets whose hashes a file cannot make collide.
"""

from __future__ import annotations

import enum
import io
import math
import pickle
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
import torch._utils
from numpy.random import BitGenerator, SeedSequence
from numpy.random import _pickle as numpy_random_pickle
from numpy.random import bit_generator as numpy_bit_generator

from sb3_xppo.loading.errors import PICKLE_HINT, FileTooLargeError, Refusal, UnsafeFileError
from sb3_xppo.loading.gate import class_attribute
from sb3_xppo.loading.legacy import Call, Symbol

#: What a pickle may allocate beyond its own bytes (arrays made from a shape, ``bytes(n)``), in bytes
ALLOCATION_BUDGET = 256 * 2**20

#: Classes a pickle may call (their arguments checked by :meth:`SafeUnpickler._construct`): containers and values
CONSTRUCTIBLE: dict[tuple[str, str], Any] = {
    **{("builtins", cls.__name__): cls for cls in (set, frozenset, list, tuple, dict, bytearray, bytes)},
    **{("builtins", cls.__name__): cls for cls in (int, float, bool, str, complex, slice, range, object)},
    ("collections", "OrderedDict"): OrderedDict,
    ("collections", "deque"): deque,
    ("torch", "device"): th.device,
    ("torch", "Size"): th.Size,
}
#: numpy's bit generators by name, as its pickles name them
BIT_GENERATORS: dict[str, type[BitGenerator]] = dict(numpy_random_pickle.BitGenerators)  # type: ignore[arg-type]
CONTAINERS = (set, frozenset, list, tuple, dict, bytearray, bytes, OrderedDict, deque)
HASHED_CONTAINERS = (set, frozenset, dict, OrderedDict)

#: Classes a pickle may name as arguments of the checked constructors, never call
ARGUMENT_CLASSES: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy.random.bit_generator", "SeedSequence"): SeedSequence,
    **{(cls.__module__, cls.__name__): cls for cls in BIT_GENERATORS.values()},
    ("numpy.random._generator", "Generator"): np.random.Generator,
    ("numpy.random.mtrand", "RandomState"): np.random.RandomState,
}

#: The functions a pickle may call, by their global: the name of the :class:`SafeUnpickler` method that checks the
#: arguments and calls it
CALLS: dict[tuple[str, str], str] = {
    ("copyreg", "_reconstructor"): "_reconstructor",
    **{(f"numpy.{core}.multiarray", "_reconstruct"): "_numpy_reconstruct" for core in ("core", "_core")},
    **{(f"numpy.{core}.multiarray", "scalar"): "_numpy_scalar" for core in ("core", "_core")},
    **{(f"numpy.{core}.numeric", "_frombuffer"): "_numpy_frombuffer" for core in ("core", "_core")},
    ("numpy", "dtype"): "_numpy_dtype",
    ("numpy.random._pickle", "__bit_generator_ctor"): "_bit_generator",
    ("numpy.random._pickle", "__generator_ctor"): "_generator",
    ("numpy.random._pickle", "__randomstate_ctor"): "_random_state",
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"): "_seed_sequence",
    ("torch._utils", "_rebuild_tensor_v2"): "_rebuild_tensor",
    ("torch._utils", "_rebuild_parameter"): "_rebuild_parameter",
    ("torch.storage", "_load_from_bytes"): "_tensor_from_bytes",
    ("builtins", "getattr"): "_getattr",
    ("_codecs", "encode"): "_encode",
}

_SMALL_INT = 2**31


class Checked:
    """
    A function of :data:`CALLS` as the pickle names it: the machine calls it (its arguments checked); anywhere else
    (a value the result would hold) it is refused when called.
    """

    def __init__(self, dotted: str, function: Callable[..., Any]) -> None:
        self.dotted, self.function = dotted, function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        why = "a function the loader calls only while it reads the pickle, here held as a value"
        raise UnsafeFileError.of([Refusal("a loaded object", self.dotted, why)], PICKLE_HINT)

    def __reduce__(self) -> Any:
        raise TypeError(f"{self.dotted} held as a value was not loaded: it cannot be pickled")

    def __repr__(self) -> str:
        return f"<not loaded: {self.dotted}>"


def dotted(value: Any) -> str:
    module = getattr(value, "__module__", None) or type(value).__module__
    return f"{module}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def plain_key(key: Any) -> bool:
    """A dict or set key whose hash a file cannot make collide (hash-flooding would take quadratic time)."""
    if key is None or isinstance(key, (str, bytes, bool, enum.Enum, Symbol, Call)):
        return True
    if isinstance(key, int):
        return -_SMALL_INT < key < _SMALL_INT
    if isinstance(key, tuple):
        return len(key) <= 16 and all(map(plain_key, key))
    return isinstance(key, type)


def array_shape(value: Any) -> tuple[int, ...]:
    """:return: an array shape (an int or a tuple of non-negative ints), checked"""
    shape = (value,) if isinstance(value, int) else value
    if not (isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise pickle.UnpicklingError(f"an array shape that is not a tuple of sizes: {value!r}")
    return shape


def plain_dtype(value: Any) -> np.dtype:
    """:return: ``value`` as a numpy dtype of plain data (no Python objects, no fields, no sub-arrays), checked"""
    if isinstance(value, (str, bytes)):
        value = np.dtype(value.decode() if isinstance(value, bytes) else value)
    if not isinstance(value, np.dtype) or value.hasobject or value.names is not None or value.subdtype is not None:
        raise pickle.UnpicklingError(f"a numpy dtype that is not plain data: {value!r}")
    return value


class CheckedConstructors:
    """
    The checked constructors of :class:`~sb3_xppo.loading.unpickler.SafeUnpickler` (:data:`CALLS`) and the checks
    of what they build: each looks at its arguments before it builds anything (a mixin: the unpickler holds the
    budget, the field and the objects it only named).
    """

    field: str
    hint: str
    budget: int
    _named: dict[int, Any]

    def _name(self, value: Any) -> Any:
        self._named[id(value)] = value
        return value

    def _refuse(self, asked: str, why: str) -> UnsafeFileError:
        return UnsafeFileError.of([Refusal(self.field, asked, why)], self.hint)

    def _charge(self, nbytes: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise FileTooLargeError(f"{self.field}: the pickle asks for more memory than its size accounts for")

    def _check_items(self, cls: type, args: tuple[Any, ...]) -> None:
        """A container's constructor arguments: sized, within the budget, keys that hash safely."""
        for arg in args:
            if isinstance(arg, int) and not isinstance(arg, bool) and issubclass(cls, (bytes, bytearray)):
                self._charge(arg)
            elif isinstance(arg, range):
                if not all(-_SMALL_INT < bound < _SMALL_INT for bound in (arg.start, arg.stop, arg.step)):
                    raise pickle.UnpicklingError(f"a range too large to read: {arg!r}")
                self._charge(8 * len(arg))
            if issubclass(cls, HASHED_CONTAINERS) and isinstance(arg, (list, tuple, range)):
                keys = arg if issubclass(cls, (set, frozenset)) else [pair[0] for pair in arg if isinstance(pair, tuple)]
                self._check_keys(keys)

    def _check_keys(self, keys: Any) -> None:
        if isinstance(keys, range):
            return  # small ints, checked with the range
        bad = next((key for key in keys if not plain_key(key)), None)
        if bad is not None:
            raise pickle.UnpicklingError(f"a dict or set key of type {type(bad).__name__}, which the libraries never write")

    def _construct(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call of a :data:`CONSTRUCTIBLE` class, its arguments checked."""
        plain = (str, bytes, bytearray, int, float, complex, bool, type(None))
        values = (str, int, float, complex, bool, slice, range, th.device, object)
        if cls in values and not all(isinstance(arg, plain) for arg in (*args, *kwargs.values())):
            raise pickle.UnpicklingError(f"{cls.__name__}() of something else than plain values")
        if cls is th.Size and not (len(args) == 1 and isinstance(args[0], (tuple, list)) and all(map(plain_key, args[0]))):
            raise pickle.UnpicklingError("torch.Size() of something else than sizes")
        self._check_items(cls, args)
        return cls(*args, **kwargs)

    def _numpy_reconstruct(self, subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
        if subtype is not np.ndarray:
            raise self._refuse(dotted(subtype), "an array subclass, which the libraries never write")
        self._charge(math.prod(array_shape(shape)) * plain_dtype(dtype).itemsize)
        return np.ndarray.__new__(np.ndarray, array_shape(shape), plain_dtype(dtype))

    def _numpy_scalar(self, dtype: Any, data: Any = None) -> Any:
        dtype = plain_dtype(dtype)
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise pickle.UnpicklingError(f"a numpy scalar of {dtype} whose bytes are not its size")
        return np.frombuffer(data, dtype=dtype)[0]  # (numpy's own scalar(), without its object-dtype path)

    def _numpy_frombuffer(self, buffer: Any, dtype: Any, shape: Any, order: Any, axis_order: Any = None) -> np.ndarray:
        dtype, shape = plain_dtype(dtype), array_shape(shape)
        if not isinstance(buffer, (bytes, bytearray)) or len(buffer) != math.prod(shape) * dtype.itemsize:
            raise pickle.UnpicklingError("an array whose buffer is not the size of its shape")
        if order not in ("C", "F", "K") or not (axis_order is None or isinstance(axis_order, (tuple, list))):
            raise pickle.UnpicklingError(f"an array of order {order!r}")
        array = np.frombuffer(buffer, dtype=dtype)  # numpy's own _frombuffer, its arguments checked
        if order == "K" and axis_order is not None:
            return array.reshape(shape, order="C").transpose(axis_order)
        return array.reshape(shape, order=order)

    def _numpy_dtype(self, spec: Any, align: Any = False, copy: Any = True) -> np.dtype:
        if not isinstance(spec, str) or not isinstance(align, (bool, int)) or not isinstance(copy, (bool, int)):
            raise pickle.UnpicklingError(f"numpy.dtype({spec!r}, ...): only a type string is read")
        return plain_dtype(np.dtype(spec, align=bool(align), copy=True))  # a copy: its state may be set

    def _bit_generator(self, name: Any = "MT19937") -> BitGenerator:
        generators = BIT_GENERATORS
        if not (name in generators or any(name is cls for cls in generators.values())):
            raise self._refuse(dotted(name) if isinstance(name, type) else repr(name), "not a numpy bit generator")
        return (generators[name] if isinstance(name, str) else name)()

    def _generator(self, bit_generator: Any = "MT19937", *rest: Any) -> np.random.Generator:
        return np.random.Generator(self._around(bit_generator, rest, "Generator"))

    def _random_state(self, bit_generator: Any = "MT19937", *rest: Any) -> np.random.RandomState:
        return np.random.RandomState(self._around(bit_generator, rest, "RandomState"))

    def _around(self, bit_generator: Any, rest: tuple[Any, ...], what: str) -> BitGenerator:
        """numpy's ``__generator_ctor`` / ``__randomstate_ctor``: a bit generator built, or one of this pickle's; a
        constructor argument of the file's own (``rest``) is never called."""
        if rest or isinstance(bit_generator, str):
            bit_generator = self._bit_generator(bit_generator)
        if not isinstance(bit_generator, BitGenerator):
            raise pickle.UnpicklingError(f"a numpy {what} of something else than a bit generator")
        return bit_generator

    def _seed_sequence(self, cls: Any, checksum: Any, state: Any) -> SeedSequence:
        if cls is not SeedSequence or state is not None:
            raise pickle.UnpicklingError("a SeedSequence of another class, or with its state inline")
        return getattr(numpy_bit_generator, "__pyx_unpickle_SeedSequence")(cls, checksum, None)

    def _rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> th.Tensor:
        requires_grad, hooks, metadata = (*rest, None, None, None)[:3]
        if not isinstance(storage, (th.storage.TypedStorage, th.UntypedStorage)):
            raise pickle.UnpicklingError("a tensor whose storage is not a torch storage")
        if hooks or metadata or not isinstance(offset, int) or not all(map(plain_key, (*size, *stride))):
            raise pickle.UnpicklingError("a tensor with hooks, metadata or sizes the libraries never write")
        return torch._utils._rebuild_tensor_v2(storage, offset, size, stride, bool(requires_grad), OrderedDict())

    def _rebuild_parameter(self, data: Any, requires_grad: Any, hooks: Any) -> th.Tensor:
        if not isinstance(data, th.Tensor) or hooks:
            raise pickle.UnpicklingError("a parameter with hooks, or of something else than a tensor")
        return torch._utils._rebuild_parameter(data, bool(requires_grad), OrderedDict())

    def _tensor_from_bytes(self, blob: Any) -> Any:
        """torch's ``_load_from_bytes`` (a pickled tensor's storage) would run ``torch.load`` unchecked: tensors only."""
        if not isinstance(blob, bytes):
            raise pickle.UnpicklingError("torch.storage._load_from_bytes of something else than bytes")
        try:
            return th.load(io.BytesIO(blob), weights_only=True)
        except pickle.UnpicklingError as error:
            why = f"a tensor pickle that holds more than tensors: {error}"
            raise self._refuse("torch.storage._load_from_bytes", why) from None

    def _getattr(self, owner: Any, name: Any, *default: Any) -> Any:
        value = class_attribute(owner, name) if isinstance(owner, type) and isinstance(name, str) else None
        if value is None:
            asked = f"{dotted(owner)}.{name}" if isinstance(owner, type) else "builtins.getattr"
            raise self._refuse(asked, "an attribute outside the allowlist (builtins.getattr)")
        return self._name(value)

    def _encode(self, text: Any, encoding: Any = "utf-8", *rest: Any) -> bytes:
        """``_codecs.encode(text, 'latin1')``: how protocol 2 writes ``bytes``."""
        if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or rest:
            raise pickle.UnpicklingError("_codecs.encode other than protocol 2's bytes")
        return text.encode("latin1")

    def _check_array_state(self, state: Any) -> None:
        """ndarray's state ``(version, shape, dtype, is_fortran, bytes)``: plain data, as many bytes as the shape."""
        if not (isinstance(state, tuple) and len(state) in (4, 5)):
            raise pickle.UnpicklingError("an ndarray state that is not numpy's")
        shape, dtype, data = array_shape(state[-4]), plain_dtype(state[-3]), state[-1]
        if not isinstance(data, (bytes, bytearray)) or len(data) != math.prod(shape) * dtype.itemsize:
            raise pickle.UnpicklingError("an ndarray whose bytes are not the size of its shape")

    def _check_dtype_state(self, dtype: np.dtype, state: Any) -> None:
        """A dtype's state: exactly the one numpy writes for that type, in some byte order."""
        if not (isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "=")):
            raise pickle.UnpicklingError("a numpy dtype state that is not numpy's")
        fresh = np.dtype(dtype.str)
        expected = (fresh if state[1] in ("|", "=") else fresh.newbyteorder(state[1])).__reduce__()[2]
        if tuple(state[2:]) != tuple(expected[2:]) or state[0] != expected[0]:
            raise pickle.UnpicklingError(f"a numpy dtype state that is not numpy's for {fresh}")
