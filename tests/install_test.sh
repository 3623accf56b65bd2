#!/bin/sh
# `cmake --install` gives a working, relocatable tree (docs/install.md): every program,
# ka-runner and the backend modules, the tasks, the C client with a right kaclient.pc
# and a kernelarenaConfig.cmake. The tree is installed, then moved, then used from a
# folder without tasks/: the installed envctl runs an episode on its own envserver and
# gpuexec with the installed tasks, and a C program builds against the client through
# pkg-config and through find_package.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$1
SRC=$2
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init install

cmake --install "$BUILD" --prefix "$WORK/first" >"$WORK/install.log" 2>&1
check "cmake --install into a fresh prefix" test $? -eq 0
mv "$WORK/first" "$WORK/moved"
P=$WORK/moved
for f in bin/envserver bin/envctl bin/gpuexec bin/ka-validate libexec/kernelarena/ka-runner \
         libexec/kernelarena/ka_triton_compile.py \
         share/kernelarena/tasks/host/gelu/task.yaml lib/libkaclient.a lib/libka_proto.a \
         include/kernelarena/kaclient.h lib/pkgconfig/kaclient.pc \
         lib/cmake/kernelarena/kernelarenaConfig.cmake; do
  check "installed: $f" test -e "$P/$f"
done
if [ -e "$BUILD/bin/ka_backend_cuda.so" ]; then
  check "installed: the cuda backend module beside ka-runner" \
    test -e "$P/libexec/kernelarena/ka_backend_cuda.so"
fi
ntasks=$(find "$SRC/tasks" -name task.yaml | wc -l)
ninst=$(find "$P/share/kernelarena/tasks" -name task.yaml | wc -l)
check "all $ntasks tasks installed (found $ninst)" test "$ntasks" -eq "$ninst"

# the moved tree, from a folder without tasks/: its own tasks, its own gpuexec
mkdir -p "$WORK/elsewhere"
cd "$WORK/elsewhere" || exit 1
"$P/bin/envctl" tasks >"$WORK/tasks.txt" 2>&1
check "installed envctl tasks lists host/gelu" grep -q "host/gelu" "$WORK/tasks.txt"
ka_run timeout 120 "$P/bin/envctl" episode --task host/gelu --max-steps 1 >"$WORK/episode.txt" 2>&1
rc=$?
check "installed envctl episode exits 0 (rc $rc)" test "$rc" -eq 0
check "it used the installed tasks" grep -q "tasks: $P/share/kernelarena/tasks" "$WORK/episode.txt"
check "its step is OK" grep -q "step 1: status OK" "$WORK/episode.txt"

# The installed tasks' hidden files stay out of a command task's reach (docs/sandbox.md,
# "Hidden folders"): a command task installed beside them, whose candidate (Python run
# by the harness's commands) tries to read another task's hidden reference.c. The prefix
# is made readable to the sandbox through CUDA_HOME, as /usr or /opt are where it is
# installed there; the rest of the prefix stays readable.
cp -r "$SRC/tests/fixtures/command/tasks/suite" "$P/share/kernelarena/tasks/"
cp "$SRC/tests/fixtures/command/tasks/suite/demo/sum_py/kernel.py" "$WORK/peek.py"
cat >>"$WORK/peek.py" <<EOF
for _p in ("$P/share/kernelarena/tasks/host/gelu/reference.c", "$P/lib/libkaclient.a"):
    try:
        open(_p, "rb").close()
        print("PEEK readable " + _p)
    except OSError:
        print("PEEK refused " + _p)
EOF
CUDA_HOME=$P ka_run timeout 120 "$P/bin/envctl" episode --tasks "$P/share/kernelarena/tasks" \
  --backends host --task suite/demo/sum_py --max-steps 1 --verbose \
  --agent "command:cp $WORK/peek.py kernel.py" >"$WORK/peek.txt" 2>&1
check "the command task installed beside the tasks ran its step" grep -q "step 1: status" "$WORK/peek.txt"
check "its Python could not open another task's hidden reference.c" \
  grep -q "PEEK refused $P/share/kernelarena/tasks/host/gelu/reference.c" "$WORK/peek.txt"
check "nor did it find it readable" sh -c "! grep -q 'PEEK readable .*reference.c' '$WORK/peek.txt'"
check "while the rest of the prefix stayed readable" \
  grep -q "PEEK readable $P/lib/libkaclient.a" "$WORK/peek.txt"

# the C client through pkg-config (the .pc file locates the moved prefix itself)
cat >"$WORK/app.c" <<'EOF'
#include <stdio.h>
#include "kaclient.h"
int main(void) {
  ka_client *c = NULL;
  char err[256];
  /* nothing listens there: a clear error, no crash */
  int rc = ka_client_open_timeout("ipc:///nonexistent/ka.ipc", 100, &c, err, sizeof err);
  printf("rc %d\n", rc);
  if (c) ka_client_close(c);
  return 0;
}
EOF
PKG_CONFIG_PATH=$P/lib/pkgconfig cc -o "$WORK/app_pc" "$WORK/app.c" \
  $(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs kaclient) >"$WORK/pc.log" 2>&1
check "a C program builds with pkg-config kaclient" test $? -eq 0
check "and runs" "$WORK/app_pc"

# the C client through find_package(kernelarena)
mkdir -p "$WORK/cm"
cp "$WORK/app.c" "$WORK/cm/app.c"
cat >"$WORK/cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(kernelarena REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE kernelarena::kaclient)
EOF
cmake -S "$WORK/cm" -B "$WORK/cm/build" -DCMAKE_PREFIX_PATH="$P" >"$WORK/cm.log" 2>&1 &&
  cmake --build "$WORK/cm/build" >>"$WORK/cm.log" 2>&1
check "a C program builds with find_package(kernelarena)" test $? -eq 0
check "and runs" "$WORK/cm/build/app"
exit $fail
