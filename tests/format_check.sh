#!/bin/sh
# The format lane: the project's C sources and headers (git's list, else find) against
# the root .clang-format, with clang-format --dry-run --Werror; prints the files that
# differ and how many. Changes nothing. Not checked: task kernels (tasks/) and the
# kernels tests submit (candidates, adversarial submissions, fixtures: the folders below
# tests/ other than tests/adversarial itself), whose exact text can be what is tested.
# usage: format_check.sh SOURCE_DIR [CLANG_FORMAT]
set -u
SRC=$(cd "$1" && pwd)
CF=${2:-clang-format}
case $CF in *NOTFOUND | "") CF=clang-format ;; esac
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init format
if ! command -v "$CF" >/dev/null 2>&1; then
  echo "FAIL - clang-format not found (scripts/install-deps.sh installs it)"
  exit 1
fi
cd "$SRC" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files '*.c' '*.h' >"$WORK/all"
else
  find . -name '*.[ch]' ! -path './build*' ! -path './.venv/*' | sed 's|^\./||' | sort >"$WORK/all"
fi
awk -F/ '$1 == "tasks" {next} $1 == "tests" && !(NF == 2 || (NF == 3 && $2 == "adversarial")) {next}
  {print}' "$WORK/all" >"$WORK/files"
n=0
bad=0
while read -r f; do
  [ -f "$f" ] || continue
  n=$((n + 1))
  if ! "$CF" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "differs from .clang-format: $f"
    bad=$((bad + 1))
  fi
done <"$WORK/files"
echo "$bad of $n C files differ from .clang-format ($("$CF" --version | head -1))"
check "every C file matches .clang-format (clang-format -i FILE fixes one)" [ "$bad" -eq 0 ]
check "C files found" [ "$n" -gt 0 ]
exit $fail
