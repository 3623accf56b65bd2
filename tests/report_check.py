"""Checks the HTML of `envctl report` (tests/report_render.sh): the links from each
episode to its files, the comparison section against `envctl compare --json`, and the
error bars of the speedup chart. Only the Python standard library.

    python3 report_check.py links REPORT.html RUNS_DIR      every link relative, resolving,
                                                            each row's to its own episode
    python3 report_check.py compare REPORT.html CMP.json... row r against compare's JSON
    python3 report_check.py nocompare REPORT.html           one run: no comparison at all
    python3 report_check.py errbars REPORT.html RUN_DIR...  one error bar per (task, run)
                                                            with 2+ repeats, min..max right
Prints what it checked; exits non-zero (an AssertionError) on the first fault."""
import html.parser
import json
import os
import re
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    """The episode table's rows (cells' text and links), the comparison table's rows
    (cells by class), the verdict lines, and every href of the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.hrefs, self.rows, self.cmp, self.verdicts = [], [], {}, {}
        self.table = self.row = self.cell = self.verdict = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
            if self.table == "eps" and self.row is not None:
                self.row["links"].append(a["href"])
        if tag == "table":
            self.table = a.get("id")
        elif tag == "tr" and self.table in ("eps", "cmp"):
            self.row = {"id": a.get("id"), "cells": [], "cls": [], "links": []}
        elif tag == "td" and self.row is not None:
            self.cell = []
            self.row["cls"].append(a.get("class"))
        elif tag == "p" and (a.get("id") or "").startswith("verdict-"):
            self.verdict = (a["id"], [])

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)
        if self.verdict is not None:
            self.verdict[1].append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.row["cells"].append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if self.row["cells"]:
                if self.table == "eps":
                    self.rows.append(self.row)
                else:
                    self.cmp[self.row["id"]] = dict(zip(self.row["cls"], self.row["cells"]))
            self.row = None
        elif tag == "table":
            self.table = None
        elif tag == "p" and self.verdict is not None:
            self.verdicts[self.verdict[0]] = "".join(self.verdict[1])
            self.verdict = None


def parse(path):
    p = Page()
    p.feed(open(path, encoding="utf-8").read())
    return p


def target(report, href):
    """The path a relative link points at, from the report's folder."""
    assert not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", href), f"link with a scheme: {href}"
    assert not href.startswith("/"), f"absolute link: {href}"
    assert re.fullmatch(r"[A-Za-z0-9._~/@%-]+", href), f"link not percent-encoded: {href}"
    return os.path.normpath(os.path.join(os.path.dirname(report), urllib.parse.unquote(href)))


def check_links(report, runs_dir):
    p = parse(report)
    assert p.hrefs, "no links"
    for h in p.hrefs:
        t = target(report, h)
        assert os.path.exists(t), f"{h} -> {t} does not exist"
        assert os.path.isdir(t) == h.endswith("/"), f"{h}: a folder link ends in /, no other"
    labels = {}
    for run in os.listdir(runs_dir):
        rj = os.path.join(runs_dir, run, "run.json")
        if os.path.exists(rj):
            labels[json.load(open(rj))["label"]] = os.path.realpath(os.path.join(runs_dir, run))
    nlinks = 0
    for r in p.rows:
        label, task, repeat, status = r["cells"][:4]
        ep_dir = os.path.join(labels[label], "episodes", f"{task.replace('/', '~')}@{repeat}")
        # every link of the row lies in the row's own episode folder
        for h in r["links"]:
            t = os.path.realpath(target(report, h))
            assert t.startswith(os.path.realpath(ep_dir) + os.sep), f"{label} {task}@{repeat}: {h}"
        files = {os.path.relpath(os.path.realpath(target(report, h)), os.path.realpath(ep_dir))
                 for h in r["links"]}
        want = {f for f in ("episode.json", "steps.jsonl", "transcript.txt", "agent.stderr")
                if os.path.isfile(os.path.join(ep_dir, f))}
        for sub in ("steps", "final"):
            d = os.path.join(ep_dir, sub)
            if os.path.isdir(d):
                want |= {f"{sub}/{n}" for n in os.listdir(d)}
        assert files == want, f"{label} {task}@{repeat}: links {sorted(files)}, files {sorted(want)}"
        if "episode.json" in files:
            ep = json.load(open(os.path.join(ep_dir, "episode.json")))
            assert (ep["task"], str(ep["repeat"]), ep["status"]) == (task, repeat, status), ep
        else:
            assert status == "missing", f"{task}@{repeat}: {status} without episode.json link"
        nlinks += len(r["links"])
    print(f"links: {len(p.hrefs)} links of {len(p.rows)} episodes resolve ({nlinks} in rows)")
    return len(p.hrefs)


def check_compare(report, cmp_files):
    p = parse(report)
    assert len(p.cmp) == len(cmp_files), f"{len(p.cmp)} comparison rows, wanted {len(cmp_files)}"
    for r, path in enumerate(cmp_files, 1):
        j = json.load(open(path))
        row = p.cmp[f"cmp-{r}"]
        want = {"v": j["verdict"], "ratio": "x%.3f" % j["speedup_ratio"],
                "ci": "x%.3f..x%.3f" % tuple(j["ratio_ci"]), "p": "%.3g" % j["p"],
                "pw": "%.3g" % j["p_wilcoxon"],
                "wtl": "%d / %d / %d" % (j["wins"], j["ties"], j["losses"]),
                "np": str(j["paired_tasks"])}
        for k, v in want.items():
            assert row[k] == v, f"run {r} {k}: report {row[k]!r}, compare {v!r}"
        assert p.verdicts[f"verdict-{r}"] == j["verdict_line"], (p.verdicts, j["verdict_line"])
        print(f"compare: run {r} agrees with {os.path.basename(path)}: {j['verdict_line']}")


def check_nocompare(report):
    text = open(report, encoding="utf-8").read()
    p = parse(report)
    assert not p.cmp and not p.verdicts, "a comparison in a one-run report"
    for s in ("verdict:", "class=verdict", "p = ", "id=cmp", "Wilcoxon"):
        assert s not in text, f"one run: {s!r} in the report"
    assert "id=no-compare" in text, "one run: no note instead of the comparison"
    print("nocompare: no comparison, a note")


def check_errbars(report, run_dirs):
    """The speedup chart draws, task by task and run by run, one error bar for each
    (task, run) with 2+ repeats, titled with the min..max speedup over the repeats
    (a failure at x0.5, the default failure speedup)."""
    text = open(report, encoding="utf-8").read()
    chart = text[text.index("<svg id=chart-speedup"):]
    chart = chart[:chart.index("</svg>")]
    got = re.findall(r"<g class=err><title>(x[^<]*) over (\d+) repeats</title>"
                     r"(?:<line [^>]*/>){3}</g>", chart)
    assert len(got) == chart.count("<g class=err>"), "an error bar without its three lines"
    tasks, per = [], []
    for d in run_dirs:
        sp = {}
        for e in json.load(open(os.path.join(d, "run.json")))["plan"]:
            f = os.path.join(d, "episodes", f"{e['task'].replace('/', '~')}@{e['repeat']}",
                             "episode.json")
            ep = json.load(open(f)) if os.path.exists(f) else {}
            ok = ep.get("status") == "completed" and ep.get("correct") and ep.get("speedup")
            sp.setdefault(e["task"], []).append(max(ep["speedup"], 0.5) if ok else 0.5)
            if e["task"] not in tasks:
                tasks.append(e["task"])
        per.append(sp)
    want = [("x%.3g..x%.3g" % (min(per[r][t]), max(per[r][t])), str(len(per[r][t])))
            for t in tasks for r in range(len(per)) if len(per[r].get(t, [])) >= 2]
    assert got == want, f"error bars {got}, wanted {want}"
    print(f"errbars: {len(got)} error bars, min..max as the episodes say")
    return len(got)


if __name__ == "__main__":
    what, report, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    {"links": lambda: check_links(report, rest[0]),
     "compare": lambda: check_compare(report, rest),
     "nocompare": lambda: check_nocompare(report),
     "errbars": lambda: check_errbars(report, rest)}[what]()
