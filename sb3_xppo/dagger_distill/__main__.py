"""
``python -m sb3_xppo.dagger_distill``: the command :mod:`sb3_xppo.distill` (``python -m sb3_xppo.distill``), run by
name. The command reads rl-zoo3 runs through :mod:`sb3_xppo.zoo`, a layer above this package, so it lives beside
``train`` and ``enjoy``; this module only starts it (docs/guide/development.md, Layout).
"""

import runpy

if __name__ == "__main__":
    runpy.run_module("sb3_xppo.distill", run_name="__main__", alter_sys=True)
