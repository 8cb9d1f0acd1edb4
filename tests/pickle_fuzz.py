"""
A fuzzer of the safe loader's pickle machine (docs/guide/security.md), run by ``tests/test_pickle_fuzz.py`` in a
process of its own; longer on demand: ``python tests/pickle_fuzz.py --examples 20000``.

Hypothesis builds pickle streams from the standard opcodes and from globals: every global the loader may hand out
or call (numpy's, torch's, the containers, the libraries' classes), cloudpickle's helpers, gym's spaces, and
globals that would run code (``os.system``, ``subprocess.call``, ``builtins.eval``/``exec``, a canary). The strings
and bytes the streams push include commands that would create a sentinel file, and forged array data. For every
stream, :func:`load_once` checks that loading it with
:func:`~sb3_xppo.loading.unpickler.restricted_loads`:

- runs no code: the sentinel file stays absent and the canary is never called;
- never crashes the interpreter (this process would die: the test sees its exit status);
- takes bounded time (hypothesis's deadline) and memory (an address-space limit on this process, 1 GiB above what
  its imports use);
- ends in a value or an exception (any ``Exception``: a refusal, a malformed stream).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import pickle
import resource
import struct
import sys
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sb3_xppo.loading.unpickler import ARGUMENT_CLASSES, CALLS, CONSTRUCTIBLE, restricted_loads

SENTINEL = pathlib.Path(tempfile.gettempdir()) / f"sb3_xppo_fuzz_ran_{os.getpid()}"

#: globals that would run code, and the canary (this module's :func:`canary`: never imported by the loader)
HOSTILE = [
    ("os", "system"),
    ("posix", "system"),
    ("subprocess", "call"),
    ("subprocess", "Popen"),
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("builtins", "__import__"),
    ("builtins", "open"),
    ("pickle_fuzz", "canary"),
    ("__main__", "canary"),
    ("importlib", "import_module"),
    ("torch", "load"),
    ("numpy", "load"),
    ("pydoc", "pipepager"),
]
#: globals of what SB3, sb3-contrib and the package write, and of the records of older stacks
LIBRARY = [
    ("stable_baselines3.common.utils", "ConstantSchedule"),
    ("stable_baselines3.common.utils", "FloatSchedule"),
    ("stable_baselines3.common.utils", "LinearSchedule"),
    ("stable_baselines3.common.type_aliases", "TrainFreq"),
    ("stable_baselines3.common.type_aliases", "TrainFrequencyUnit"),
    ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
    ("stable_baselines3.common.running_mean_std", "RunningMeanStd"),
    ("stable_baselines3.common.policies", "ActorCriticPolicy"),
    ("stable_baselines3.common.policies", "BasePolicy"),
    ("gymnasium.spaces.box", "Box"),
    ("gymnasium.spaces.discrete", "Discrete"),
    ("gymnasium.spaces.dict", "Dict"),
    ("torch.nn.modules.activation", "Tanh"),
    ("torch.optim.adam", "Adam"),
    ("sb3_xppo.common.options", "XPPOOptions"),
    ("sb3_xppo.loading.legacy", "InertFunction"),
    ("gym.spaces.box", "Box"),
    ("gym.spaces.dict", "Dict"),
    *(("cloudpickle.cloudpickle", name) for name in ("_make_function", "_builtin_type", "_make_cell", "_make_empty_cell")),
    *(("cloudpickle.cloudpickle", name) for name in ("_function_setstate", "subimport", "_make_skeleton_class")),
]
GLOBALS = sorted({*CALLS, *CONSTRUCTIBLE, *ARGUMENT_CLASSES, *LIBRARY, *HOSTILE})

COMMAND = f"touch '{SENTINEL}'"
STRINGS = [
    COMMAND,
    f"__import__('os').system({COMMAND!r})",
    "O8",
    "f4",
    "<f8",
    "b",
    "|",
    "<",
    "latin1",
    "PCG64",
    "MT19937",
    "CodeType",
    "FunctionType",
    "__setstate__",
    "__class__",
    "__dict__",
    "val",
    "STEP",
    "_dummy_schedule",
    "",
]
BLOBS = [b"A" * 8, b"b", b"\x00" * 4, b"\x00\x00\x80?", b"\xff" * 16, COMMAND.encode(), b""]


def canary(*args: Any, **kwargs: Any) -> None:
    """Called only if the loader ever called a global outside its allowlist."""
    SENTINEL.touch()


def _short(text: bytes) -> bytes:
    return bytes([len(text)]) + text


def _instructions() -> st.SearchStrategy[bytes]:
    op = pickle
    small_int = st.integers(0, 255).map(lambda n: op.BININT1 + bytes([n]))
    any_int = st.sampled_from([-1, 0, 1, 2, 3, 2**31 - 1, -(2**31), 2**40, 2**62, 2**64 - 1, 10**18]).map(
        lambda n: op.LONG1 + _short(n.to_bytes((n.bit_length() + 8) // 8 or 1, "little", signed=True))
    )
    floats = st.sampled_from([0.0, 0.5, -1.0, 1e300, float("nan"), float("inf")]).map(
        lambda x: op.BINFLOAT + struct.pack(">d", x)
    )
    strings = st.sampled_from(STRINGS).map(lambda s: op.BINUNICODE + struct.pack("<I", len(s.encode())) + s.encode())
    blobs = st.sampled_from(BLOBS).map(lambda b: op.SHORT_BINBYTES + _short(b))
    globals_ = st.sampled_from(GLOBALS).map(lambda g: op.GLOBAL + f"{g[0]}\n{g[1]}\n".encode())
    stack_globals = st.sampled_from(GLOBALS).map(
        lambda g: b"".join(op.BINUNICODE + struct.pack("<I", len(p.encode())) + p.encode() for p in g) + op.STACK_GLOBAL
    )
    memo = st.integers(0, 6).flatmap(lambda k: st.sampled_from([op.BINPUT + bytes([k]), op.BINGET + bytes([k])]))
    plain = st.sampled_from(
        [
            op.NONE,
            op.NEWTRUE,
            op.NEWFALSE,
            op.EMPTY_TUPLE,
            op.EMPTY_LIST,
            op.EMPTY_DICT,
            op.EMPTY_SET,
            op.MARK,
            op.TUPLE,
            op.TUPLE1,
            op.TUPLE2,
            op.TUPLE3,
            op.LIST,
            op.DICT,
            op.FROZENSET,
            op.REDUCE,
            op.NEWOBJ,
            op.NEWOBJ_EX,
            op.BUILD,
            op.SETITEM,
            op.SETITEMS,
            op.APPEND,
            op.APPENDS,
            op.ADDITEMS,
            op.OBJ,
            op.MEMOIZE,
            op.DUP,
            op.POP,
            op.POP_MARK,
            op.EXT1 + b"\x01",
            op.BINPERSID,
            op.NEXT_BUFFER,
        ]
    )
    return st.one_of(small_int, any_int, floats, strings, blobs, globals_, stack_globals, memo, plain)


def _call() -> st.SearchStrategy[bytes]:
    """A call the machine would make: a global, a tuple of arguments, REDUCE (and perhaps a state to BUILD)."""
    op = pickle
    return st.tuples(
        st.sampled_from(GLOBALS),
        st.lists(_instructions(), max_size=4),
        st.booleans(),
        st.lists(_instructions(), max_size=3),
    ).map(
        lambda t: (
            op.GLOBAL
            + f"{t[0][0]}\n{t[0][1]}\n".encode()
            + op.MARK
            + b"".join(t[1])
            + op.TUPLE
            + op.REDUCE
            + ((op.MARK + b"".join(t[3]) + op.TUPLE + op.BUILD) if t[2] else b"")
        )
    )


def streams() -> st.SearchStrategy[bytes]:
    """Pickle streams: a protocol header, instructions and calls, STOP."""
    body = st.lists(st.one_of(_instructions(), _call()), min_size=1, max_size=40)
    return st.tuples(st.sampled_from([0, 2, 4, 5]), body).map(
        lambda t: (pickle.PROTO + bytes([t[0]]) if t[0] else b"") + b"".join(t[1]) + pickle.STOP
    )


def load_once(blob: bytes, load: Any = restricted_loads) -> None:
    """Load one stream; any ``Exception`` is an answer; code that ran, or anything else, is not."""
    with contextlib.suppress(Exception):  # (a refusal or a malformed stream: both fine)
        load(blob, "fuzz")
    ran = SENTINEL.exists()
    SENTINEL.unlink(missing_ok=True)  # (so that hypothesis shrinks to a stream that runs code itself)
    assert not ran, f"code ran: {blob!r}"


def limit_memory(extra: int = 2**30) -> None:
    """An address-space limit of what this process uses now (its imports) plus ``extra`` bytes."""
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, resource.getrlimit(resource.RLIMIT_AS)[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=int(os.environ.get("SB3_XPPO_FUZZ_EXAMPLES", 500)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--unsafe", action="store_true", help="negative control: load with pickle.loads, which the fuzzer must catch"
    )
    args = parser.parse_args(argv)
    load = (lambda blob, field: pickle.loads(blob)) if args.unsafe else restricted_loads
    SENTINEL.unlink(missing_ok=True)
    limit_memory()

    @settings(
        max_examples=args.examples,
        deadline=2000,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(streams())
    def fuzz(blob: bytes) -> None:
        load_once(blob, load)

    from hypothesis import seed

    seed(args.seed)(fuzz)()
    print(f"{args.examples} streams loaded, no code ran, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
