#!/bin/sh
# envctl report on the run folders of tests/fixtures/runs: the HTML is self-contained and
# escaped, and headless Chromium (Debian's chromium) renders the charts. The screenshot
# check finds each chart by its background colour (report.c RP_BG_*) and counts the run
# colours inside it. Usage: report_render.sh BIN_DIR SOURCE_DIR
set -eu
BIN=$1
SRC=$2
ENVCTL=$BIN/envctl
T=$(mktemp -d "${TMPDIR:-/tmp}/ka-report-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
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

python3 - "$T/r3.png" "$T/r1.png" <<'EOF'
import struct, sys, zlib

def read_png(path):
    """RGB(A) 8-bit non-interlaced PNG -> (width, height, channels, rows of bytes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytearray(w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # PNG filters (PNG spec, section 9)
            a = line[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows

def rgb(s):
    return tuple(int(s[i:i + 2], 16) for i in (1, 3, 5))

RUN = [rgb("#1f77b4"), rgb("#ff7f0e"), rgb("#2ca02c")]
BG = {"hist": rgb("#fbfbf2"), "speedup": rgb("#f2fbfb"), "scatter": rgb("#fbf2fb"),
      "heldout": rgb("#f2f2fb")}

def analyse(path):
    w, h, ch, rows = read_png(path)
    box = {}
    for y, r in enumerate(rows):
        for x in range(0, w):
            px = tuple(r[x * ch:x * ch + 3])
            for k, c in BG.items():
                if px == c:
                    b = box.setdefault(k, [x, y, x, y])
                    b[0], b[1], b[2], b[3] = min(b[0], x), min(b[1], y), max(b[2], x), max(b[3], y)
    count = {}
    for k, (x0, y0, x1, y1) in box.items():
        cnt = [0, 0, 0]
        for y in range(y0, y1 + 1):
            r = rows[y]
            for x in range(x0, x1 + 1):
                px = tuple(r[x * ch:x * ch + 3])
                if px in RUN:
                    cnt[RUN.index(px)] += 1
        count[k] = (cnt, (x1 - x0 + 1) * (y1 - y0 + 1))
    return count

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
