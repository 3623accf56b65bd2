#!/bin/sh
# Makes the virtual environment the Python tests run in (.venv, git-ignored) and installs
# the kernelarena package's dependencies into it: protobuf, pynng, gymnasium, numpy; and
# the official MCP Python SDK (mcp), the client of tests/agents_mcp.sh (installed here,
# not at test time: tests download nothing); and skyrl-gym 0.4.0, the SkyRL-gym package
# that tests/python_faults_test.py (case skyrl) runs kernelarena.integrations.skyrl under
# (about 10 s and 100 MiB here: pandas, omegaconf; docs/trainers.md); and triton 3.6.0, the
# compiler of language triton (gpuexec/backends/triton.h: gpuexec finds .venv/bin/python3
# beside its build; no torch): 5 s here from a warm pip cache (about a minute cold), and
# 641 MiB in .venv (its wheel bundles ptxas and LLVM).
# And kubernetes-validate 1.37.0, the Kubernetes schema check of deploy/k8s
# (tests/deploy_lint.sh; it bundles the schemas, so it works offline): 15 s in a fresh
# venv here, 145 MiB (the schemas of every Kubernetes version).
# Wheels in .whl/ (scripts/fetch-wheels.sh) are used first; PyPI otherwise.
set -eu
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python3 ]; then
  python3 -m venv .venv
fi
FIND=""
[ -d .whl ] && FIND="--find-links .whl"
# shellcheck disable=SC2086
.venv/bin/python3 -m pip install --quiet $FIND 'protobuf>=5.29' 'pynng>=0.8' 'gymnasium>=1.0' \
  'numpy>=1.21' 'mcp==2.3.0' 'skyrl-gym==0.4.0' 'triton==3.6.0' 'kubernetes-validate==1.37.0'
.venv/bin/python3 -c "import google.protobuf, pynng, gymnasium, mcp, skyrl_gym, triton; print('install-python-deps: protobuf', google.protobuf.__version__, 'gymnasium', gymnasium.__version__, 'triton', triton.__version__)"
