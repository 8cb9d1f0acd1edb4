import os

from setuptools import find_packages, setup

with open(os.path.join("sb3_xppo", "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

with open("README.md", encoding="utf-8") as f:
    long_description = f.read()

setup(
    name="sb3-xppo",
    version=__version__,
    description="Stable-Baselines3 extension: PPO with SPO, decoupled/dual clipping, improved value clipping, "
    "multi-critic advantages and DAgger distillation.",
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=find_packages(include=["sb3_xppo", "sb3_xppo.*"]),
    package_data={"sb3_xppo": ["py.typed", "version.txt", "zoo_configs/*.yml"]},
    python_requires=">=3.10",
    install_requires=[
        "stable-baselines3>=2.9,<3.0",
        "sb3-contrib>=2.9,<3.0",
        "gymnasium[box2d]>=1.0,<2.0",
        "torch>=2.3",
        "tqdm",
        "rich",
    ],
    extras_require={
        "tests": [
            "pytest>=7.0",
            "pytest-xdist",
            "pytest-timeout",
            "mo-gymnasium>=1.3",
            "ruff>=0.5",
            # .ci/run type-checks the package with SB3's configuration ([tool.mypy] in pyproject.toml)
            "mypy>=1.10",
            # tests/test_beta.py checks the Beta distribution against scipy.stats
            "scipy",
            # tests/test_pickle_fuzz.py: the safe loader's property test
            "hypothesis>=6.0",
            # tests/test_editable_types.py: the README's editable install (editable_mode=compat, PEP 660), built offline
            "setuptools>=64",
        ],
        "extra": [
            "rl-zoo3>=2.9,<3.0",
            # the MuJoCo benchmark tasks (Hopper-v5, HalfCheetah-v5) of benchmarks/learning.py
            "gymnasium[mujoco]>=1.0,<2.0",
            # optuna's driver for a PostgreSQL --storage (distributed search); URLs name it: postgresql+psycopg2://
            "psycopg2-binary",
            "tensorboard>=2.9",
            "rliable>=1.0",
            # rliable needs arch<8, and arch 7 does not import under pandas 3
            "pandas<3",
            "matplotlib",
            "moviepy",
            # rl-zoo3's enjoy imports requests (through rl_zoo3.load_from_hub) without declaring it
            "requests",
            # rl-zoo3's Atari entries: the ALE (its ROMs included since 0.9) and OpenCV for SB3's AtariWrapper; the exact
            # resume of an Atari run is tested on Breakout (tests/test_resume.py)
            "ale-py>=0.9",
            "opencv-python-headless",
            # the EnvPool backend (make_vec_env(backend="envpool"), --vec-env envpool); 1.2.5 is the release tested
            # (gymnasium 1.x, NumPy 2, LunarLander-v3 and the MuJoCo v5 tasks, per-env seeds); ~0.7 GB with its assets
            "envpool>=1.2.5,<2.0",
        ],
        # RayVecEnv (make_vec_env(backend="ray"), --vec-env ray): the envs in Ray actors on a cluster's nodes
        "ray": ["ray>=2.40,<3"],
        # the documentation: sphinx-build -W --keep-going -b html docs docs/_build/html
        "docs": [
            "sphinx>=7.0",
            "sphinx-rtd-theme>=2.0",
            "myst-parser>=3.0",
        ],
    },
    entry_points={
        "console_scripts": [
            "xppo-train=sb3_xppo.train:main",
            "xppo-enjoy=sb3_xppo.enjoy:main",
            "xppo-distill=sb3_xppo.distill:main",
            "xppo-trust=sb3_xppo.trust:main",
        ]
    },
    license="MIT",
)
