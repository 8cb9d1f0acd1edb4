"""
Loading files without running their code (layer 0: imports nothing else of the package; docs/guide/security.md).

One room, one job: the gate for every name a file holds (:mod:`.gate`), the pickle machine that checks each opcode
(:mod:`.unpickler`), what older stacks wrote rebuilt (:mod:`.legacy`), zips and torch files with their sizes checked
(:mod:`.archive`), pickle files (:mod:`.files`), rl-zoo3's YAML and literals (:mod:`.zoo_files`, :mod:`.literals`),
the user's own files signed (:mod:`.signing`), and the errors (:mod:`.errors`).
"""

from sb3_xppo.loading.archive import checked_data, checked_zip, safe_torch_load
from sb3_xppo.loading.errors import FileTooLargeError, UnreadableFileError, UnsafeFileError, refusals_exit
from sb3_xppo.loading.files import load_pickle, load_vec_normalize
from sb3_xppo.loading.legacy import InertFunction
from sb3_xppo.loading.signing import sign_file, verified
from sb3_xppo.loading.unpickler import restricted_loads

__all__ = [
    "FileTooLargeError",
    "InertFunction",
    "UnreadableFileError",
    "UnsafeFileError",
    "checked_data",
    "checked_zip",
    "load_pickle",
    "load_vec_normalize",
    "refusals_exit",
    "restricted_loads",
    "safe_torch_load",
    "sign_file",
    "verified",
]
