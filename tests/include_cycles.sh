#!/bin/sh
# The include-cycle check (format lane): within each folder of C sources, the quoted
# includes (#include "NAME") that name a file of the same folder must not form a cycle
# (a.h includes b.h includes a.h, directly or through others). Prints each cycle found
# and fails on any. Changes nothing.
# usage: include_cycles.sh SOURCE_DIR [FOLDER...]
#   FOLDER...: folders relative to SOURCE_DIR (default: every folder holding a .c or .h
#   file in git's list, else in find's; not build folders, tasks/ nor the folders below
#   tests/ but tests/adversarial, as the format lane)
set -u
SRC=$(cd "$1" && pwd)
shift
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init include_cycles
cd "$SRC" || exit 1
if [ $# -gt 0 ]; then
  for d in "$@"; do echo "$d"; done >"$WORK/dirs"
else
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files '*.c' '*.h' >"$WORK/all"
  else
    find . -name '*.[ch]' ! -path './build*' ! -path './.venv/*' | sed 's|^\./||' >"$WORK/all"
  fi
  # as the format lane: not tasks/ nor the folders below tests/ other than
  # tests/adversarial (submitted kernels; fixtures, the planted cycle among them)
  awk -F/ '$1 == "tasks" {next} $1 == "tests" && !(NF == 2 || (NF == 3 && $2 == "adversarial")) {next}
    { NF--; print (NF ? $0 : ".") }' OFS=/ "$WORK/all" | sort -u >"$WORK/dirs"
fi

# Edges "FROM TO" of one folder's files; then a depth-first search prints every cycle
# it meets as "a.h -> b.h -> a.h".
ndirs=0
: >"$WORK/cycles"
while read -r d; do
  [ -d "$d" ] || continue
  ndirs=$((ndirs + 1))
  for f in "$d"/*.c "$d"/*.h; do
    [ -f "$f" ] || continue
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
      while read -r inc; do
        [ -f "$d/$inc" ] && echo "${f##*/} ${inc##*/}"
      done
  done >"$WORK/edges"
  awk -v dir="$d" '
    { n[$1]++; e[$1, n[$1]] = $2; nodes[$1] = 1; nodes[$2] = 1 }
    function visit(v,   i, j, w, p) {
      state[v] = 1
      stack[++depth] = v
      for (i = 1; i <= n[v]; i++) {
        w = e[v, i]
        if (state[w] == 1) {
          for (j = depth; stack[j] != w; j--) {}
          p = w
          for (j++; j <= depth; j++) p = p " -> " stack[j]
          print dir ": " p " -> " w
        } else if (!state[w]) visit(w)
      }
      depth--
      state[v] = 2
    }
    END { for (v in nodes) if (!state[v]) visit(v) }' "$WORK/edges" >>"$WORK/cycles"
done <"$WORK/dirs"
ncyc=$(wc -l <"$WORK/cycles")
cat "$WORK/cycles"
echo "$ncyc include cycle(s) in $ndirs folders"
check "folders found" [ "$ndirs" -gt 0 ]
check "no include cycle within a folder" [ "$ncyc" -eq 0 ]
exit $fail
