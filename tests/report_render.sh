#!/bin/sh
# envctl report on the run folders of tests/fixtures/runs: the HTML is self-contained and
# escaped, and headless Chromium (Debian's chromium) renders the charts. The screenshot
# check finds each chart by its background colour (report.c RP_BG_*) and counts the run
# colours inside it. Usage: report_render.sh BIN_DIR SOURCE_DIR
set -eu
BIN=$1
SRC=$2
ENVCTL=$BIN/envctl
. "$SRC/tests/lib.sh" # cleanup on EXIT/INT/TERM
ka_init report
T=$WORK
cp -r "$SRC/tests/fixtures/runs" "$T/runs"
fail() {
  echo "report_render: FAIL: $*" >&2
  exit 1
}
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || fail "chromium not found (scripts/install-deps.sh installs it)"

shot() { # HTML PNG
  HOME=$T/home timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --disable-dev-shm-usage \
    --force-color-profile=srgb --user-data-dir="$T/profile" --window-size=1000,2600 \
    --screenshot="$2" "file://$1" >"$T/chromium.log" 2>&1 || {
    cat "$T/chromium.log" >&2
    fail "chromium could not render $1"
  }
  [ -s "$2" ] || fail "no screenshot $2"
}

# ---- three runs: every chart
"$ENVCTL" report base better better-failed --runs-dir "$T/runs" -o "$T/r3.html" 2>"$T/err"
grep -q "wrote $T/r3.html (3 runs, 5 tasks)" "$T/err" || fail "report message: $(cat "$T/err")"
[ ! -e "$T/r3.html.tmp" ] || fail "temporary file left behind"
# self-contained: no external references of any kind
if grep -Eqi 'https?:|//[a-z0-9.-]+\.[a-z]|src=|href=|@import|url\(' "$T/r3.html"; then
  grep -Eoi '.{20}(https?:|src=|href=|@import|url\().{20}' "$T/r3.html" >&2 || true
  fail "the report has an external reference"
fi
# escaped: the fixture's error message holds <script>alert('x')</script> & "quotes"
grep -q "<script>alert" "$T/r3.html" && fail "an unescaped message from the run folder"
grep -q "reset refused: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;" \
  "$T/r3.html" || fail "the error message is not in the table, escaped"
[ "$(grep -c '<script>' "$T/r3.html")" -eq 1 ] || fail "more than the one search script"
for id in chart-hist chart-speedup chart-scatter chart-heldout eps q; do
  grep -q "id=$id" "$T/r3.html" || fail "no element $id"
done
rows=$(sed -n '/<table id=eps>/,/<\/table>/p' "$T/r3.html" | grep -c '^<tr class=')
[ "$rows" -eq 30 ] || fail "episode table has $rows rows, wanted 30 (failures included)"
grep -c '<tr class=fail>' "$T/r3.html" | grep -qx 2 || fail "2 failed rows wanted"

shot "$T/r3.html" "$T/r3.png"
# ---- one run (no held-out results): histogram and speedups only, notes for the rest
"$ENVCTL" report "$T/runs/base" -o "$T/r1.html" --title 'one <run>' 2>/dev/null
grep -q 'id=no-scatter' "$T/r1.html" || fail "one run: no note instead of the scatter"
grep -q 'id=no-heldout' "$T/r1.html" || fail "no held-out results: no note"
grep -q '<title>one &lt;run&gt;</title>' "$T/r1.html" || fail "title not escaped"
shot "$T/r1.html" "$T/r1.png"

PYTHONPATH="$SRC/tests" python3 - "$T/r3.png" "$T/r1.png" <<'EOF'
import sys
from report_png import BG, analyse  # tests/report_png.py

three = analyse(sys.argv[1])
print("three runs:", three)
for k in BG:
    assert k in three, f"chart {k} not rendered"
    assert three[k][1] > 50000, f"chart {k} is too small: {three[k][1]} pixels"
hist, sp, sc, ho = (three[k][0] for k in ("hist", "speedup", "scatter", "heldout"))
assert min(hist) > 500, f"histogram bars missing: {hist}"
assert min(sp) > 300, f"speedup bars missing: {sp}"
# scatter: the first run is the x axis; the later runs are the points
assert sc[0] == 0 and sc[1] > 100 and sc[2] > 100, f"scatter points: {sc}"
# held-out: only the 'better' run has held-out results
assert ho[1] > 1000 and ho[0] == 0 and ho[2] == 0, f"held-out bars: {ho}"

one = analyse(sys.argv[2])
print("one run:", one)
assert set(one) == {"hist", "speedup"}, f"one run without held-out: charts {set(one)}"
assert one["hist"][0][0] > 500 and one["hist"][0][1] == 0, one["hist"]
assert one["speedup"][0][0] > 100, one["speedup"]
EOF

# ---- bad input: clear error, exit code, no file written
set +e
"$ENVCTL" report base nosuch --runs-dir "$T/runs" -o "$T/bad.html" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "missing run: exit $rc"
grep -q "no run 'nosuch'" "$T/err" || fail "missing run: $(cat "$T/err")"
[ ! -e "$T/bad.html" ] && [ ! -e "$T/bad.html.tmp" ] || fail "a report was written for a missing run"
set +e
"$ENVCTL" report noplan --runs-dir "$T/runs" -o "$T/bad.html" 2>"$T/err"
rc=$?
"$ENVCTL" report base --runs-dir "$T/runs" 2>"$T/err2"
rc2=$?
set -e
[ "$rc" -eq 1 ] && grep -q "has no plan" "$T/err" || fail "no plan: exit $rc, $(cat "$T/err")"
[ "$rc2" -eq 2 ] && grep -q "needs 1 to 8 runs and -o FILE" "$T/err2" || fail "no -o: exit $rc2"
[ ! -e "$T/bad.html" ] || fail "a report was written for a run without a plan"
echo "report_render: ok"
