#!/bin/sh
# Makes the virtual environment the Python tests run in (.venv, git-ignored) and installs
# the kernelarena package's dependencies into it: protobuf, pynng, gymnasium, numpy; and
# the official MCP Python SDK (mcp), the client of tests/agents_mcp.sh (installed here,
# not at test time: tests download nothing).
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
  'numpy>=1.21' 'mcp==2.3.0'
.venv/bin/python3 -c "import google.protobuf, pynng, gymnasium, mcp; print('install-python-deps: protobuf', google.protobuf.__version__, 'gymnasium', gymnasium.__version__)"
