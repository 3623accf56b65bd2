#!/usr/bin/env python3
"""The text layer (kernelarena.integrations.text) without a server: replies parsed into
files by the documented format, the feedback of replies with no usable block, the
prompt and feedback rendering, and the reward scaling.

    python_text_test.py SOURCE_DIR

Prints "ok - ..." per check and exits 1 at the first failure.
"""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "clients", "python"))
from kernelarena import pb  # noqa: E402
from kernelarena.integrations.text import (parse_files, parse_reply, render_feedback,  # noqa: E402
                                           render_prompt, scale_reward)

N = [0]


def check(cond, what):
    if not cond:
        print("FAIL -", what)
        sys.exit(1)
    N[0] += 1
    print("ok   -", what)


ONE = ["gelu.c"]
TWO = ["gelu.cu", "launch.yaml"]
SRC = "void f(void) {}\n"

# the info string names the file
r = parse_reply(f"Here it is:\n```c gelu.c\n{SRC}```\nDone.", ONE)
check(r.files == {"gelu.c": SRC} and not r.problems and not r.feedback, "```c gelu.c")
for info in ("gelu.c", "c file=gelu.c", "c title=\"gelu.c\"", "cpp path='gelu.c'"):
    r = parse_reply(f"```{info}\n{SRC}```", ONE)
    check(r.files == {"gelu.c": SRC}, f"info string {info!r}")
# tildes, longer fences, a fence inside the body
r = parse_reply(f"~~~c gelu.c\n{SRC}~~~\n", ONE)
check(r.files == {"gelu.c": SRC}, "~~~ fences")
body = "/* ``` not a fence end */\n" + SRC
r = parse_reply(f"````c gelu.c\n{body}````", ONE)
check(r.files == {"gelu.c": body}, "a four-backtick fence holds a ``` line")
# the name on the line before
for head in ("gelu.c", "**gelu.c**", "### `gelu.c`", "File: gelu.c"):
    r = parse_reply(f"{head}\n```c\n{SRC}```", ONE)
    check(r.files == {"gelu.c": SRC}, f"named by the line before: {head!r}")
# one editable file: an unnamed block is it (the last one)
r = parse_reply(f"```c\nold\n```\nbetter:\n```c\n{SRC}```", ONE)
check(r.files == {"gelu.c": SRC}, "one editable file: the last unnamed block")
# two files, each named; a second block of one file wins
ly = "kernels: []\n"
r = parse_reply(f"```cuda gelu.cu\nv1\n```\n```yaml launch.yaml\n{ly}```\n```cuda gelu.cu\n{SRC}```",
                TWO)
check(r.files == {"gelu.cu": SRC, "launch.yaml": ly}, "two files; the last block of a file wins")
# two files and an unnamed block: not guessed
r = parse_reply(f"```cuda gelu.cu\n{SRC}```\n```\nmystery\n```", TWO)
check(r.files == {"gelu.cu": SRC} and any("name no file" in p for p in r.problems),
      "an unnamed block with two editable files is reported, not sent")
# a file that may not change
r = parse_reply(f"```c reference.c\nint x;\n```\n```c gelu.c\n{SRC}```", ONE)
check(r.files == {"gelu.c": SRC} and any("reference.c" in p and "may not change" in p
                                         for p in r.problems), "a non-editable file is reported")
# no usable block: no files, a feedback that says why and gives the format
r = parse_reply("I think the kernel is already optimal.", ONE)
check(not r.ok and "no fenced code block" in r.feedback and "```c gelu.c" in r.feedback and
      "`gelu.c`" in r.feedback, "no block: the feedback explains the format")
r = parse_reply("```c other.c\nint x;\n```", ONE)
check(not r.ok and "names a file you may change" in r.feedback and "other.c" in r.feedback,
      "only a non-editable file: the feedback names it")
r = parse_reply(f"```c gelu.c\n{SRC}", ONE)
check(r.files == {"gelu.c": SRC} and any("not closed" in p for p in r.problems),
      "an unclosed block is read to the end and reported")
check(not parse_reply(None, ONE).ok and not parse_reply("", ONE).ok, "None and '' parse to nothing")
r = parse_reply(f"```c gelu.c\r\n{SRC.strip()}\r\n```\r\n", ONE)
check(r.files == {"gelu.c": SRC}, "CRLF replies")

# rendering
p = render_prompt("# Task: GELU\nrules", {"gelu.c": SRC}, ONE)
check(p.startswith("# Task: GELU") and f"```c gelu.c\n{SRC}```" in p and "## How to reply" in p,
      "the prompt: task, current files in the reply format, how to reply")
check(parse_reply(p.split("## How to reply")[0], ONE).files == {"gelu.c": SRC},
      "the prompt's file blocks are in the reply format")
s = pb.StepResponse(reward=20.0)
s.observation.status = pb.INCORRECT
s.observation.compile_log = "w" * 10000
s.observation.cases.add(name="n1M", correct=False, max_abs_err=0.5, message="bad")
s.observation.cases.add(name="n2M", correct=True, baseline_ms=2.0, candidate_ms=1.0, speedup=2.0)
fb = render_feedback(s, scale_reward(s.reward))
check("INCORRECT" in fb and "scaled 0.200" in fb and "n1M: WRONG" in fb and
      "speedup 2.000x" in fb and "characters cut" in fb and len(fb) < 5000,
      "the feedback: status, scaled reward, cases, a clipped log")
s.observation.compile_log = ""
s.observation.runtime_log = ("[kernelarena] runner: device opened ahead (warm), job's part 11.2 ms\n"
                             "[kernelarena] case n1M phases (device staging, 606 calls): setup 1 ms\n"
                             "[kernelarena] case n1M setup: maps 2.8 ms\n"
                             "[kernelarena] case n1M device lock: 3 exclusive holds\n"
                             "[kernelarena] executor: inputs 0.3 ms\n"
                             "kernel printf: hello\n"
                             "[kernelarena] verdict: output differs\n")
fb = render_feedback(s)
check("kernel printf: hello" in fb and "verdict: output differs" in fb and "phases" not in fb and
      "runner:" not in fb and "executor:" not in fb and "maps 2.8" not in fb and
      "exclusive holds" not in fb, "the feedback leaves the executor's timing lines out, keeps the rest")
s.observation.runtime_log = "[kernelarena] case n1M phases (device staging): setup 1 ms\n"
check("Runtime output" not in render_feedback(s), "a runtime log of timing lines only: no section")

# reward scaling
check(scale_reward(0) == 0 and scale_reward(20) == 0.2 and abs(scale_reward(220) - 2.2) < 1e-12,
      "scale_reward: reward / 100")
check(scale_reward(520, cap=3.2) == 3.2, "scale_reward's cap")
# files given directly (a tool call: kernelarena.integrations.trl)
pf = parse_files({"gelu.cu": "k", "task.yaml": "x"}, TWO)
check(pf.files == {"gelu.cu": "k"} and len(pf.problems) == 1 and "`task.yaml` may not change"
      in pf.problems[0] and pf.feedback == "", "parse_files: the editable file kept, the other named")
pf = parse_files({"task.yaml": "x"}, TWO)
check(not pf.ok and "Nothing was evaluated" in pf.feedback and "`launch.yaml`" in pf.feedback
      and "`task.yaml` may not change" in pf.feedback, "parse_files: none editable: told why")
check(not parse_files({}, ONE).ok, "parse_files: no files")
print(f"{N[0]} passed, 0 failed")
