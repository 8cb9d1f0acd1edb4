import os
import tempfile

import torch as th

# The CI machine has two cores and the tests use tiny networks: one intra-op thread is fastest
# and keeps parallel test workers from fighting over cores.
th.set_num_threads(1)

# The key the package signs its files with (docs/guide/security.md): the tests' own, never the user's, shared by the
# processes a test starts (they inherit the environment); one per test process, made at the first save.
os.environ.setdefault("SB3_XPPO_SIGNING_KEY", os.path.join(tempfile.mkdtemp(prefix="sb3_xppo_key_"), "signing.key"))
