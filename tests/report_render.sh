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
# self-contained: no external references of any kind; the only links are the relative
# ones to the episodes' files (report_check.py links checks each)
if grep -Eqi 'https?:|//[a-z0-9.-]+\.[a-z]|src=|@import|url\(' "$T/r3.html"; then
  grep -Eoi '.{20}(https?:|src=|@import|url\().{20}' "$T/r3.html" >&2 || true
  fail "the report has an external reference"
fi
if grep -Eo 'href=[^>]*' "$T/r3.html" | grep -Ev '^href="[A-Za-z0-9._~/@%-]+"$'; then
  fail "a link that is not a quoted, percent-encoded relative path"
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

CHECK="python3 $SRC/tests/report_check.py"
# comparison of each later run against the first: the numbers of envctl compare --json
"$ENVCTL" compare base better --runs-dir "$T/runs" --json >"$T/cmp1.json"
"$ENVCTL" compare base better-failed --runs-dir "$T/runs" --json >"$T/cmp2.json"
$CHECK compare "$T/r3.html" "$T/cmp1.json" "$T/cmp2.json" || fail "comparison section"
grep -q '<p class=verdict id=verdict-1>verdict: B (better agent) is better than A (baseline agent): speedup ratio x1.498, 95% CI x1.439..x1.560, p = 6.81e-05' \
  "$T/r3.html" || fail "no verdict line for run 2"
# error bars: every (task, run) of the fixtures has 2 repeats
$CHECK errbars "$T/r3.html" "$T/runs/base" "$T/runs/better" "$T/runs/better-failed" ||
  fail "error bars"
[ "$(grep -c '<g class=err>' "$T/r3.html")" -eq 15 ] || fail "15 error bars wanted"
# links: all 30 episodes, relative to the report's folder, to files that exist: 6 per
# finished episode (episode.json, steps.jsonl, steps/1/, final/kernel.c, transcript.txt,
# agent.stderr), 2 for the error (episode.json, agent.stderr), 2 for the unfinished one
# (steps.jsonl, steps/1/: no episode.json)
n=$($CHECK links "$T/r3.html" "$T/runs" | tee "$T/links.txt" | sed -n 's/^links: \([0-9]*\) .*/\1/p')
[ "$n" = 172 ] || fail "links: $(cat "$T/links.txt"), wanted 172"
grep -q '<a href="runs/better-failed/episodes/host~row_sum@1/steps/1/">step 1</a>' "$T/r3.html" ||
  fail "the unfinished episode's step is not linked"
# a file name that must be percent-encoded; the report written one folder down
printf 'x' >"$T/runs/base/episodes/host~gelu@0/final/odd name#1&'.c"
mkdir -p "$T/sub"
"$ENVCTL" report base better --runs-dir "$T/runs" -o "$T/sub/r2.html" 2>/dev/null
grep -q "<a href=\"../runs/base/episodes/host~gelu@0/final/odd%20name%231%26%27.c\">final/odd name#1&amp;&#39;.c</a>" \
  "$T/sub/r2.html" || fail "odd file name: $(grep -o 'href="[^"]*odd[^>]*>[^<]*' "$T/sub/r2.html")"
$CHECK links "$T/sub/r2.html" "$T/runs" || fail "links from a sub-folder"
# moved together, the report and the runs keep their links
mkdir "$T/moved"
mv "$T/sub" "$T/runs" "$T/moved/"
$CHECK links "$T/moved/sub/r2.html" "$T/moved/runs" || fail "links after a move"
mv "$T/moved/runs" "$T/runs"
rm "$T/runs/base/episodes/host~gelu@0/final/odd name#1&'.c"
# a task with one repeat has no error bar: base without host/gelu@1
cp -r "$T/runs/base" "$T/base-one"
python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
j["plan"] = [e for e in j["plan"] if (e["task"], e["repeat"]) != ("host/gelu", 1)]
json.dump(j, open(sys.argv[1], "w"))
' "$T/base-one/run.json"
"$ENVCTL" report "$T/base-one" -o "$T/one.html" 2>/dev/null
$CHECK errbars "$T/one.html" "$T/base-one" || fail "error bars with one repeat"
[ "$(grep -c '<g class=err>' "$T/one.html")" -eq 4 ] || fail "4 error bars wanted (gelu has 1 repeat)"

shot "$T/r3.html" "$T/r3.png"
# ---- one run (no held-out results): histogram and speedups only, notes for the rest
"$ENVCTL" report "$T/runs/base" -o "$T/r1.html" --title 'one <run>' 2>/dev/null
grep -q 'id=no-scatter' "$T/r1.html" || fail "one run: no note instead of the scatter"
grep -q 'id=no-heldout' "$T/r1.html" || fail "no held-out results: no note"
grep -q '<title>one &lt;run&gt;</title>' "$T/r1.html" || fail "title not escaped"
$CHECK nocompare "$T/r1.html" || fail "one run: a comparison"
$CHECK links "$T/r1.html" "$T/runs" >/dev/null || fail "one run: links"
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
