"""
The machinery the benchmark scripts share (``benchmarks/README.md`` maps the scripts, their results and the doc regions
rendered from them).

- :mod:`harness.layout`: where results go: campaigns, single benchmarks, the run cache;
- :mod:`harness.provenance`: the code that made a run, and its behavioural fingerprint;
- :mod:`harness.zoo`: rl-zoo3's hyperparameters and envs, built the zoo's way;
- :mod:`harness.contenders`: the contenders of a learning campaign, by name;
- :mod:`harness.runs`: one training run, its cache and provenance check, and the pool that runs them;
- :mod:`harness.reports`: a campaign's statistics, tables, plot and report folder;
- :mod:`harness.regions`: the doc regions ``benchmarks/render_docs.py`` renders, a module per producer.

A script run as a file (``python benchmarks/learning.py``) has its own folder first on ``sys.path``, so it imports
``harness`` as it is; the tests find it through ``pythonpath`` in ``pyproject.toml``.
"""
