#!/bin/sh
# Makes the virtual environment the Python tests run in (.venv, git-ignored) and installs
# the kernelarena package's dependencies into it: protobuf, pynng, gymnasium, numpy; and
# the official MCP Python SDK (mcp), the client of tests/agents_mcp.sh (installed here,
# not at test time: tests download nothing); and skyrl-gym 0.4.0, the SkyRL-gym package
# that tests/python_faults_test.py (case skyrl) runs kernelarena.integrations.skyrl under
# (about 10 s and 100 MiB here: pandas, omegaconf; docs/trainers.md); openenv-core 0.3.0,
# whose server classes and client tests/python_faults_test.py (case openenv) runs
# kernelarena.integrations.openenv under (22 s on a quiet machine, 49 s beside a build
# here, 237 MiB: fastapi, gradio, fastmcp); transformers 5.24.0 without torch, whose
# get_json_schema renders the TRL tool schema in case trl (21 s beside a build; trl itself
# needs torch and is not installed: docs/trainers.md, "TRL"); and triton 3.6.0, the
# compiler of language triton (gpuexec/backends/triton.h: gpuexec finds .venv/bin/python3
# beside its build; no torch): 5 s here from a warm pip cache (about a minute cold), and
# 641 MiB in .venv (its wheel bundles ptxas and LLVM); wheel, which scripts/build-wheel.sh
# (the wheel with the server programs, tests/python_wheel_test.sh) builds with; and
# kubernetes-validate 1.37.0, the Kubernetes schema check of deploy/k8s
# (tests/deploy_lint.sh; it bundles the schemas, so it works offline): 15 s in a fresh
# venv here, 145 MiB (the schemas of every Kubernetes version).
# Wheels in .whl/ (scripts/fetch-wheels.sh) are used first; PyPI otherwise.
#   scripts/install-python-deps.sh [--verifiers] [--trainers]
# --verifiers (and --trainers) also makes .venv-verifiers (git-ignored) with verifiers
# 0.4.0 and the client's dependencies: verifiers pins mcp==2.0.0, which .venv's mcp 2.3.0
# excludes, so it gets its own venv; 35 to 90 s and about 570 MiB here. Its test, ctest
# python_faults_verifiers, is in lane trainers (scripts/test.sh trainers), not in CI's
# lanes (at their 10 minutes already: docs/benchmarks/2026-12-02-ci-time.md), and fails loudly
# without it. --trainers also makes .venv-nemo with nemo-gym
# 0.4.0 (it needs Python 3.12 or later: KA_PYTHON312, else the first of python3.12,
# python3.13 and pyenv's 3.12/3.13 that runs; about 110 s and 1.35 GiB here: ray), for
# ctest python_faults_nemo_gym (lane trainers too); and .venv-trl with trl 1.16.0 and torch
# 2.15.0 (CPU use; about 130 s and 5.9 GiB here) for ctest python_faults_trl_grpo.
set -eu
cd "$(dirname "$0")/.."
TRAINERS=""
VERIFIERS=""
for a in "$@"; do
  case $a in
    --trainers) TRAINERS=1 VERIFIERS=1 ;;
    --verifiers) VERIFIERS=1 ;;
    *)
      echo "install-python-deps: unknown argument '$a' (--verifiers, --trainers)" >&2
      exit 2
      ;;
  esac
done
if [ ! -x .venv/bin/python3 ]; then
  python3 -m venv .venv
fi
FIND=""
[ -d .whl ] && FIND="--find-links .whl"
# shellcheck disable=SC2086
.venv/bin/python3 -m pip install --quiet $FIND 'protobuf>=5.29' 'pynng>=0.8' 'gymnasium>=1.0' \
  'numpy>=1.21' 'mcp==2.3.0' 'skyrl-gym==0.4.0' 'openenv-core==0.3.0' 'transformers==5.24.0' \
  'triton==3.6.0' 'wheel>=0.42' 'kubernetes-validate==1.37.0'
.venv/bin/python3 -c "import google.protobuf, pynng, gymnasium, mcp, skyrl_gym, openenv.core, transformers.utils, triton; print('install-python-deps: protobuf', google.protobuf.__version__, 'gymnasium', gymnasium.__version__, 'triton', triton.__version__)"
if [ -n "$VERIFIERS" ]; then
  [ -x .venv-verifiers/bin/python3 ] || python3 -m venv .venv-verifiers
  # shellcheck disable=SC2086
  .venv-verifiers/bin/python3 -m pip install --quiet $FIND 'protobuf>=5.29' 'pynng>=0.8' \
    'gymnasium>=1.0' 'numpy>=1.21' 'verifiers==0.4.0'
  .venv-verifiers/bin/python3 -c "import verifiers, pynng, gymnasium; print('install-python-deps: verifiers', verifiers.__version__, 'in .venv-verifiers')"
fi
if [ -n "$TRAINERS" ]; then
  PY312=${KA_PYTHON312:-}
  if [ -z "$PY312" ]; then
    for p in python3.12 python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
             "$HOME"/.pyenv/versions/3.13*/bin/python3; do
      if "$p" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
        PY312=$p
        break
      fi
    done
  fi
  if [ -z "$PY312" ]; then
    echo "install-python-deps: nemo-gym needs Python 3.12 or later; none found (set KA_PYTHON312)" >&2
    exit 1
  fi
  [ -x .venv-nemo/bin/python3 ] || "$PY312" -m venv .venv-nemo
  # shellcheck disable=SC2086
  .venv-nemo/bin/python3 -m pip install --quiet $FIND 'protobuf>=5.29' 'pynng>=0.8' \
    'gymnasium>=1.0' 'numpy>=1.21' 'nemo-gym==0.4.0'
  .venv-nemo/bin/python3 -c "import nemo_gym.base_resources_server, pynng, gymnasium, sys; print('install-python-deps: nemo-gym 0.4.0 in .venv-nemo, Python', sys.version.split()[0])"
  # .venv-trl: trl with torch (PyPI's, which brings CUDA's libraries: the test runs it on
  # the CPU) for ctest python_faults_trl_grpo, a real GRPOTrainer run; 127 s and 5.9 GiB
  # here (3.0 GiB of them nvidia-* wheels), so not in .venv (CI's)
  [ -x .venv-trl/bin/python3 ] || python3 -m venv .venv-trl
  # shellcheck disable=SC2086
  .venv-trl/bin/python3 -m pip install --quiet $FIND 'protobuf>=5.29' 'pynng>=0.8' \
    'gymnasium>=1.0' 'numpy>=1.21' 'trl==1.16.0' 'transformers==5.24.0' 'torch==2.15.0' \
    'datasets==5.2.0'
  .venv-trl/bin/python3 -c "import trl, torch, pynng, gymnasium; print('install-python-deps: trl', trl.__version__, 'torch', torch.__version__, 'in .venv-trl')"
fi
