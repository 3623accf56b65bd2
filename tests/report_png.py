"""Reads a screenshot of an `envctl report` page and counts, inside each chart, the
pixels of each run's colour. Each chart's SVG has a background colour of its own
(report.c RP_BG_*); the runs' colours are category10's first ones (report.c). Only the
Python standard library (zlib) is used, so that CI needs no imaging package.

    python3 report_png.py SHOT.png   prints {chart: [[pixels of run 1, run 2, run 3], area]}
Used by tests/report_render.sh and tests/agents_experiment.sh."""
import json
import struct
import sys
import zlib


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
    """{chart: ([pixels of each of the first 3 run colours], area of the chart's box)}
    for each chart whose background colour appears in the screenshot."""
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


if __name__ == "__main__":
    print(json.dumps(analyse(sys.argv[1])))
