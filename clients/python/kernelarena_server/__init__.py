"""The kernelarena server programs inside a Python installation (docs/install.md,
"A wheel with the server"): a wheel built by scripts/build-wheel.sh carries the
`cmake --install` tree (bin/, libexec/kernelarena/, share/kernelarena/tasks/) in this
package, and the console scripts envctl, envserver and gpuexec exec those binaries
(statically linked against nng, mbedtls, protobuf-c, libyaml and sqlite; they need
glibc, libgomp and, for host tasks, a C compiler). Imports nothing but the standard
library, so the programs run without the client's dependencies. A source install of
./clients/python has the scripts but no binaries: they say so and exit 2."""

import os
import sys

__all__ = ["prefix", "program", "envctl", "envserver", "gpuexec"]


def prefix() -> str:
    """The install prefix inside this package (bin/, libexec/, share/ below it)."""
    return os.path.dirname(os.path.abspath(__file__))


def program(name: str) -> str:
    """The path of the bundled program `name` (bin/NAME); it may not exist."""
    return os.path.join(prefix(), "bin", name)


def _exec(name: str) -> int:
    exe = program(name)
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"{name}: this kernelarena has no server programs ({exe} is missing): "
                         "it was installed from source; install a wheel built by "
                         "scripts/build-wheel.sh (docs/install.md)\n")
        return 2
    os.execv(exe, [exe] + sys.argv[1:])
    return 127  # not reached


def envctl() -> int:
    """The console script envctl: execs the bundled bin/envctl with the arguments."""
    return _exec("envctl")


def envserver() -> int:
    """The console script envserver: execs the bundled bin/envserver."""
    return _exec("envserver")


def gpuexec() -> int:
    """The console script gpuexec: execs the bundled bin/gpuexec."""
    return _exec("gpuexec")
