#!/bin/sh
# Regenerates clients/python/kernelarena/kernelarena_pb2.py from proto/kernelarena.proto
# with protoc 29.0 (grpcio-tools 1.71.0, in a throw-away venv): gencode 5.29.0 loads
# under protobuf 5.29 and every later runtime (6.x, 7.x). Run it after editing the proto;
# tests/python_client_test.py fails while the file is stale.
set -eu
cd "$(dirname "$0")/.."
V=$(mktemp -d /tmp/ka-protoc-XXXXXX)
trap 'rm -rf "$V"' EXIT
python3 -m venv "$V"
"$V/bin/pip" install --quiet 'grpcio-tools==1.71.0'
"$V/bin/python" -m grpc_tools.protoc -Iproto --python_out=clients/python/kernelarena \
  proto/kernelarena.proto
echo "gen-python-proto: wrote clients/python/kernelarena/kernelarena_pb2.py"
