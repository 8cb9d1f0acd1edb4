#!/usr/bin/env bash
# Build checkpoint fixtures with OLD Stable-Baselines3 / sb3-contrib / rl-zoo3 stacks.
#
#   bash tests/old_stacks/build.sh                 # all three stacks
#   bash tests/old_stacks/build.sh sb3_2.0         # one stack
#   OLD_STACKS_DIR=/somewhere bash tests/old_stacks/build.sh
#
# Each stack gets its own venv (python3.11 -m venv) under
# ${OLD_STACKS_DIR:-/tmp/sb3_xppo_old_stacks}/<stack>, then make_fixtures.py runs in
# it and writes tests/data/old_stacks/<stack>/ (the folder is replaced). Re-runnable:
# a venv whose install finished (marker file .installed holding the install recipe)
# is reused; delete the venv folder, or change the recipe, to reinstall it.
#
# How each stack is installed (torch first, always the local CPU wheel torch==2.13.0:
# any other torch version would pull GBs of CUDA wheels). The side packages are pinned
# to releases of the stack's own time, because today's releases no longer work with
# these old rl-zoo3 versions; cloudpickle is pinned to the release current when the
# stack came out, since it decides how the saved schedules/lambdas are pickled.
#
# sb3_1.8  stable-baselines3==1.8.0 sb3-contrib==1.8.0 rl-zoo3==1.8.0 gym==0.21.0
#   - gym 0.21.0 is an sdist whose setup.py has an extras spec ("opencv-python>=3.")
#     that setuptools>=66 rejects: install setuptools==65.5.0 wheel==0.38.4 first and
#     build it with --no-build-isolation. (Later installs move setuptools up again,
#     as torch 2.13 asks for setuptools>=77; gym is installed by then.)
#   - numpy==1.26.4 (gym 0.21 / SB3 1.8 predate numpy 2), cloudpickle==2.2.1.
#   - huggingface-sb3==2.2.4 (3.x imports gymnasium, which this stack lacks),
#     huggingface-hub==0.14.1 (rl-zoo3 1.8 imports huggingface_hub.Repository),
#     optuna==3.1.1 (rl-zoo3 1.8 imports optuna.integration.skopt, gone in optuna 4).
# sb3_2.0  stable-baselines3==2.0.0 sb3-contrib==2.0.0 rl-zoo3==2.0.0 gymnasium==0.28.1
#   - numpy==1.26.4, cloudpickle==2.2.1, optuna==3.2.0, huggingface-sb3==2.2.5,
#     huggingface-hub==0.15.1.
# sb3_2.3  stable-baselines3==2.3.2 sb3-contrib==2.3.0 rl-zoo3==2.3.0 gymnasium==0.29.1
#   - numpy==1.26.4, cloudpickle==3.0.0, optuna==3.6.1, huggingface-sb3==3.0,
#     huggingface-hub==0.22.2.
# The exact versions pip installed are in each manifest.json ("versions") and in
# tests/data/old_stacks/<stack>/pip_freeze.txt.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BASE="${OLD_STACKS_DIR:-/tmp/sb3_xppo_old_stacks}"
DATA="$REPO/tests/data/old_stacks"
PYTHON="${PYTHON:-python3.11}"
TORCH="torch==2.13.0"

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH || true

# Install steps per stack, one pip command a line ("--no-build-isolation" and the
# rest are passed through as written).
recipe() {
    case "$1" in
    sb3_1.8)
        echo "$TORCH"
        echo "setuptools==65.5.0 wheel==0.38.4 numpy==1.26.4 cloudpickle==2.2.1"
        echo "--no-build-isolation gym==0.21.0"
        echo "stable-baselines3==1.8.0 sb3-contrib==1.8.0 rl-zoo3==1.8.0 gym==0.21.0 numpy==1.26.4 cloudpickle==2.2.1 optuna==3.1.1 huggingface-sb3==2.2.4 huggingface-hub==0.14.1 $TORCH"
        ;;
    sb3_2.0)
        echo "$TORCH"
        echo "stable-baselines3==2.0.0 sb3-contrib==2.0.0 rl-zoo3==2.0.0 gymnasium==0.28.1 numpy==1.26.4 cloudpickle==2.2.1 optuna==3.2.0 huggingface-sb3==2.2.5 huggingface-hub==0.15.1 $TORCH"
        ;;
    sb3_2.3)
        echo "$TORCH"
        echo "stable-baselines3==2.3.2 sb3-contrib==2.3.0 rl-zoo3==2.3.0 gymnasium==0.29.1 numpy==1.26.4 cloudpickle==3.0.0 optuna==3.6.1 huggingface-sb3==3.0 huggingface-hub==0.22.2 $TORCH"
        ;;
    *)
        echo "unknown stack: $1" >&2
        return 1
        ;;
    esac
}

install_stack() {
    local stack="$1" venv="$BASE/$1" want
    want="$(recipe "$stack")"
    if [ -f "$venv/.installed" ] && [ "$(cat "$venv/.installed")" = "$want" ]; then
        echo "== $stack: venv $venv already installed"
        return 0
    fi
    echo "== $stack: creating venv $venv"
    rm -rf "$venv"
    mkdir -p "$BASE"
    "$PYTHON" -m venv "$venv"
    while IFS= read -r line; do
        echo "== $stack: pip install $line"
        # shellcheck disable=SC2086
        "$venv/bin/python" -m pip install -q $line
    done <<<"$want"
    "$venv/bin/python" -m pip check || true
    printf '%s\n' "$want" >"$venv/.installed"
}

build_stack() {
    local stack="$1" venv="$BASE/$1" out="$DATA/$1" work
    install_stack "$stack"
    echo "== $stack: making fixtures in $out"
    work="$(mktemp -d)"
    # Run from an empty folder so nothing of this repository is importable.
    (cd "$work" && "$venv/bin/python" "$HERE/make_fixtures.py" --stack "$stack" --out "$out")
    rm -rf "$work"
    "$venv/bin/python" -m pip freeze --exclude-editable | LC_ALL=C sort >"$out/pip_freeze.txt"
    find "$out" -name __pycache__ -prune -exec rm -rf {} +
    du -sh "$out"
}

STACKS=("$@")
[ ${#STACKS[@]} -eq 0 ] && STACKS=(sb3_1.8 sb3_2.0 sb3_2.3)
for stack in "${STACKS[@]}"; do
    build_stack "$stack"
done
du -sh "$DATA"
