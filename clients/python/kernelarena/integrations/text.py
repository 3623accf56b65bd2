"""The text layer under every trainer integration: trainers send model text and expect
text back (docs/trainers.md, "The text layer").

- parse_reply(reply, editable): a model reply as files, from fenced code blocks that
  name their file (the reply format below); ParsedReply.feedback says what was wrong
  when the reply has no usable block.
- parse_files(files, editable): the same for files given directly (a tool call).
- render_prompt(prompt, files, editable): the first user message: the task's prompt,
  the editable files now and the reply format.
- render_feedback(step_response): an evaluation as text for the next turn.
- scale_reward(reward): the server's reward (0, 20, 120 + 100 x speedup) / 100.
- TextEpisode / AsyncTextEpisode: one episode driven by replies: reset() gives the
  prompt text, step(reply) parses, evaluates and returns a TextStep (feedback, scaled
  reward, done, status, components).

Reply format: each changed file in a fenced code block (``` or ~~~) whose info string
names the file, e.g.

    ```c gelu.c
    ...the whole new contents of gelu.c...
    ```

The name may also be given as `file=gelu.c` (or path=, filename=, title=, quoted or
not) in the info string, or on the line just before the block (`gelu.c`, `**gelu.c**`,
`### gelu.c`, `File: gelu.c`). When the task has one editable file, a block that names
no file is that file. A file named twice: the last block counts. A block naming a file
that may not change is reported in the feedback and not sent.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

from ..client import AsyncClient, Client, KernelArenaError, components, status_name

__all__ = ["ParsedReply", "parse_reply", "parse_files", "render_prompt", "render_feedback", "scale_reward",
           "TextStep", "TextEpisode", "AsyncTextEpisode", "REPLY_FORMAT", "NO_FILES_REWARD",
           "tls_options"]

# Characters of a log kept in the feedback (the end of the log: compilers put the first
# error first, but a long log's end says how it stopped; both ends are kept).
LOG_CHARS = 4000
# The scaled reward of a reply that names no editable file: nothing is evaluated, and it
# scores as a reply that does not compile.
NO_FILES_REWARD = 0.0

_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")
_KEYED = re.compile(r"""(?:file|path|filename|title|name)\s*=\s*["']?([^"'\s]+)["']?""")


def tls_options(get) -> Dict[str, Optional[str]]:
    """The tls argument of kernelarena.Client from an integration's flat config keys
    tls_ca, tls_cert, tls_key and tls_server_name; get(key) returns a key's value or None
    (an unset key then defaults to its $KA_TLS_* variable in Client)."""
    return {k: (get(f"tls_{k}") or None) for k in ("ca", "cert", "key", "server_name")}


def _fmt_files(editable: Sequence[str]) -> str:
    return ", ".join(f"`{p}`" for p in editable)


def reply_format(editable: Sequence[str]) -> str:
    """The reply format, as told to the model, for these editable files."""
    ex = editable[0] if editable else "file.c"
    return (f"Reply with the complete new contents of each file you change, each in a fenced "
            f"code block whose first line names the file, e.g.\n\n```{_lang(ex)} {ex}\n"
            f"...the whole file...\n```\n\nFiles you may change: {_fmt_files(editable)}.")


REPLY_FORMAT = reply_format


def _lang(path: str) -> str:
    ext = path.rsplit(".", 1)[-1] if "." in path else ""
    return {"c": "c", "h": "c", "cu": "cuda", "cuh": "cuda", "hip": "cpp", "cpp": "cpp",
            "cc": "cpp", "yaml": "yaml", "yml": "yaml", "py": "python"}.get(ext, "")


@dataclass
class ParsedReply:
    """What parse_reply found: files {path: contents} to send; problems (each a sentence:
    a block naming a file that may not change, an unclosed block); feedback: the text to
    send back when files is empty (else ""): why, then how to reply; why: its first part
    alone (for a last turn, when there is no next reply to format)."""
    files: Dict[str, str] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)
    feedback: str = ""
    why: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.files)


def _blocks(reply: str):
    """(info string, the line before the fence, body) of every fenced block; an unclosed
    last block runs to the end (flagged with closed=False)."""
    lines = reply.replace("\r\n", "\n").split("\n")
    i, out = 0, []
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        before = next((ln.strip() for ln in reversed(lines[max(0, i - 2):i]) if ln.strip()), "")
        body, j, closed = [], i + 1, False
        while j < len(lines):
            c = lines[j].strip()
            if c.startswith(fence[0] * len(fence)) and set(c) <= {fence[0]}:
                closed = True
                break
            body.append(lines[j])
            j += 1
        while not closed and body and not body[-1].strip():
            body.pop()  # the reply's trailing newlines are not part of the file
        out.append((info, before, "\n".join(body) + ("\n" if body else ""), closed))
        i = j + 1
    return out


def _named(text: str, candidates: Sequence[str], any_file: bool) -> Optional[str]:
    """The file that a fence's info string (any_file: any file-like name, so that a
    file that may not change is reported) or the line before a fence (an editable file
    only) names, or None."""
    m = _KEYED.search(text)
    if m:
        return m.group(1).strip("`*:")
    toks = [t.strip("`*:#()[]\"'") for t in re.split(r"[\s,]+", text)]
    for t in toks:
        if t in candidates:
            return t
    if any_file:
        for t in toks:
            if re.fullmatch(r"[\w\-/]+\.[A-Za-z]\w*", t):
                return t
    return None


def parse_reply(reply: str, editable: Sequence[str]) -> ParsedReply:
    """A model reply as files (the reply format in the module's docstring). Never
    raises; a reply with no usable block gets files = {} and a feedback that says why and
    restates the format."""
    pr = ParsedReply()
    if not isinstance(reply, str):
        reply = "" if reply is None else str(reply)
    blocks = _blocks(reply)
    unnamed = []
    for info, before, body, closed in blocks:
        name = _named(info, editable, True) if info else None
        if name is None and before and not _FENCE.match(before) and len(before) < 200:
            name = _named(before, editable, False)
        if not closed:
            pr.problems.append("a code block is not closed (it was read to the end of the reply)")
        if name is None:
            unnamed.append(body)
        elif name in editable:
            pr.files[name] = body
        else:
            pr.problems.append(f"`{name}` may not change (not sent); files you may change: "
                               f"{_fmt_files(editable)}")
    if not pr.files and len(editable) == 1 and unnamed:
        pr.files[editable[0]] = unnamed[-1]
    elif unnamed and len(editable) > 1:
        pr.problems.append(f"{len(unnamed)} code block(s) name no file (not sent)")
    if not pr.files:
        why = ("your reply has no fenced code block" if not blocks else
               "no code block of your reply names a file you may change")
        pr.why = f"Nothing was evaluated: {why}." + "".join(f"\n- {p}" for p in pr.problems)
        pr.feedback = f"{pr.why}\n\n{reply_format(editable)}"
    return pr


def parse_files(files: Mapping[str, str], editable: Sequence[str]) -> ParsedReply:
    """Files given directly (a tool call's arguments, not a reply): the editable ones are
    kept; a file that may not change is a problem; none left gets a feedback that says
    so and names the files that may change. Never raises."""
    pr = ParsedReply()
    for path, body in dict(files or {}).items():
        if path in editable:
            pr.files[path] = body if isinstance(body, str) else str(body)
        else:
            pr.problems.append(f"`{path}` may not change (not sent); files you may change: "
                               f"{_fmt_files(editable)}")
    if not pr.files:
        pr.why = ("Nothing was evaluated: no file you may change was given." +
                  "".join(f"\n- {p}" for p in pr.problems))
        pr.feedback = f"{pr.why}\nFiles you may change: {_fmt_files(editable)}."
    return pr


def render_prompt(prompt: str, files: Mapping[str, str], editable: Sequence[str]) -> str:
    """The first user message of an episode: the task's prompt (it names the device and
    the rules), the current contents of every editable file and the reply format."""
    parts = [prompt.rstrip(), "", "## Current files", ""]
    for p in editable:
        body = files.get(p, "")
        parts += [f"```{_lang(p)} {p}", body.rstrip("\n"), "```", ""]
    parts += ["## How to reply", "", reply_format(editable)]
    return "\n".join(parts) + "\n"


def _clip(log: str, n: int = LOG_CHARS) -> str:
    log = log.strip()
    if len(log) <= n:
        return log
    h = n // 2
    return f"{log[:h]}\n[... {len(log) - 2 * h} characters cut ...]\n{log[-h:]}"


def _text(b) -> str:
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")


# The executor's own timing lines in a runtime log ("[kernelarena] runner: ...", "case X
# phases ...", "case X setup: ...", "case X device lock: ...", "executor: ..."): about 2 KB
# a step of how the evaluation spent its time, nothing the model can act on, so they are
# left out of its feedback (new user 2026-12-01: tokens in every RL turn).
_TIMING_LINE = re.compile(r"^\[kernelarena\] (runner: |executor: |case \S+ (phases|setup:|device lock:))")


def _drop_timing(log: str) -> str:
    return "\n".join(ln for ln in log.splitlines() if not _TIMING_LINE.match(ln))


def render_feedback(resp, scaled: Optional[float] = None) -> str:
    """A StepResponse or EvaluateResponse as text for the model: the status, the reward
    (and its scaled value), every shown case (correct, time, speedup, error), the
    message and the compile and runtime logs (each at most LOG_CHARS characters, both
    ends kept; the runtime log without the executor's timing lines, _TIMING_LINE), and
    how many steps are left."""
    ob = resp.observation
    st = status_name(ob.status) or "NO_RESULT"
    lines = [f"Evaluation: {st}. Reward {resp.reward:.2f}" +
             (f" (scaled {scaled:.3f})." if scaled is not None else ".")]
    if ob.message:
        lines.append(f"Message: {_text(ob.message).strip()}")
    if ob.cases:
        lines.append("Cases:")
        for c in ob.cases:
            if c.correct:
                lines.append(f"- {c.name}: correct, baseline {c.baseline_ms:.4g} ms, yours "
                             f"{c.candidate_ms:.4g} ms, speedup {c.speedup:.3f}x")
            else:
                lines.append(f"- {c.name}: WRONG (max abs error {c.max_abs_err:.4g})" +
                             (f": {c.message}" if c.message else ""))
    if ob.compile_log.strip() if isinstance(ob.compile_log, str) else ob.compile_log:
        lines += ["Compiler output:", "```", _clip(_text(ob.compile_log)), "```"]
    runtime = _drop_timing(_text(ob.runtime_log))
    if runtime.strip():
        lines += ["Runtime output:", "```", _clip(runtime), "```"]
    return "\n".join(lines) + "\n"


def scale_reward(reward: float, cap: Optional[float] = None) -> float:
    """The server's reward / 100: 0 (does not compile, or flagged), 0.2 (compiles but is
    wrong, crashes, times out or runs out of memory), 1.2 + speedup (correct; speedup the
    geometric mean of baseline time / yours over the shown cases, so 2.2 matches the
    baseline). cap, when given, bounds it (e.g. 3.2: no credit past a 2x speedup)."""
    r = float(reward) / 100.0
    return min(r, cap) if cap is not None else r


@dataclass
class TextStep:
    """One step of a TextEpisode: feedback (text for the model), reward (scaled),
    raw_reward (the server's), done (the episode is over: terminated, truncated, or the
    step limit), status (label; "NO_FILES" when the reply named no editable file and
    nothing was evaluated), components (kernelarena.components), evaluated."""
    feedback: str
    reward: float
    raw_reward: float
    done: bool
    status: str
    components: Dict[str, float]
    evaluated: bool


class _EpisodeBase:
    def __init__(self, task_id: str, max_steps: int = 1, reward_cap: Optional[float] = None,
                 options: Optional[Mapping[str, str]] = None):
        self.task_id = task_id
        self.max_steps = int(max_steps)
        self.reward_cap = reward_cap
        self.options = {"max_steps": str(self.max_steps), **dict(options or {})}
        self.episode_id: Optional[str] = None
        self.editable: List[str] = []
        self.case_names: List[str] = []
        self.steps = 0  # evaluated steps (the server's count: the next expected_step)
        self.turns = 0  # replies, evaluated or not: max_steps bounds them
        self.done = False
        self.prompt = ""

    def _on_reset(self, r, task) -> str:
        self.episode_id, self.steps, self.turns, self.done = r.episode_id, 0, 0, False
        self.seed = r.seed
        self.editable = list(task.editable_files)
        self.case_names = list(task.case_names)
        files = {f.path: _text(f.content) for f in r.observation.files}
        self.prompt = render_prompt(r.observation.prompt, files, self.editable)
        return self.prompt

    def _no_files(self, pr: ParsedReply) -> TextStep:
        """The TextStep of a reply with nothing to evaluate: the feedback says why, then
        how to reply and the steps left, or, on the last turn, that the episode is over."""
        self.turns += 1
        self.done = self.turns >= self.max_steps
        comps = {k: 0.0 for k in ("compiled", "correct", "speedup_geomean", "flagged")}
        comps.update({f"speedup/{c}": 0.0 for c in self.case_names})
        if self.done:
            fb = (f"{pr.why}\nThat was your last step: the episode is over (reward "
                  f"{NO_FILES_REWARD:g}).\n")
        else:
            fb = f"{pr.feedback}\nYou have {self.max_steps - self.turns} step(s) left.\n"
        return TextStep(fb, NO_FILES_REWARD, 0.0, self.done, "NO_FILES", comps, False)

    def _on_step(self, s, pr: ParsedReply) -> TextStep:
        self.steps = int(s.observation.step)
        self.turns += 1
        self.done = bool(s.terminated or s.truncated) or self.turns >= self.max_steps
        scaled = scale_reward(s.reward, self.reward_cap)
        fb = render_feedback(s, scaled)
        if pr.problems:
            fb += "Notes on your reply:\n" + "".join(f"- {p}\n" for p in pr.problems)
        if not self.done:
            fb += f"You have {self.max_steps - self.turns} step(s) left.\n"
        return TextStep(fb, scaled, float(s.reward), self.done, status_name(s.observation.status),
                        components(s, self.case_names), True)


class _Lost(Exception):
    """The episode is gone (a restarted server, a lease that expired) or its last step's
    fate is unknown: replay it."""


def _backoff(attempt: int) -> float:
    return min(8.0, 0.5 * 2**attempt) * (0.5 + random.random())


class TextEpisode(_EpisodeBase):
    """One episode of task_id driven by model replies, over a blocking Client (shared
    when given, else opened on url and closed by close()). Not thread-safe (one episode).

        ep = TextEpisode("host/gelu", url=url, max_steps=2)
        prompt = ep.reset(seed=7)
        r = ep.step(model(prompt))      # r.feedback, r.reward, r.done
        ep.close()

    A step survives server faults as kernelarena.rollouts does: a retryable error is
    retried (up to `retries` times, exponential backoff, the same expected_step, so
    nothing is counted twice); an episode lost (the server restarted, its lease expired,
    or a lost reply's retry is refused) is replayed: a new episode with the same seed,
    the earlier submissions sent again, then this one (`replays` counts them). Other
    server errors raise KernelArenaError (see .retryable); a reply that names no file is
    not evaluated (TextStep.status "NO_FILES", reward NO_FILES_REWARD). tls: a tls+tcp://
    URL's TLS files and server name (kernelarena.Client's tls)."""

    def __init__(self, task_id: str, url: Optional[str] = None, max_steps: int = 1,
                 client: Optional[Client] = None, timeout_s: float = 900.0,
                 reward_cap: Optional[float] = None, options: Optional[Mapping[str, str]] = None,
                 retries: int = 5, tls: Optional[Mapping[str, Optional[str]]] = None):
        super().__init__(task_id, max_steps, reward_cap, options)
        self._own = client is None
        self.client = client or Client(url, timeout_s=timeout_s, tls=tls)
        self._task = None
        self.retries = int(retries)
        self.replays = 0
        self._sent: List[Dict[str, str]] = []  # this episode's evaluated submissions

    def _retry(self, what):
        for attempt in range(self.retries + 1):
            try:
                return what()
            except KernelArenaError as e:
                if not e.retryable or attempt == self.retries:
                    raise
                time.sleep(_backoff(attempt))

    def _gone(self, e: KernelArenaError, uncertain: bool) -> bool:
        """Whether a refused step means the episode is lost (replay it)."""
        if e.code == "NOT_FOUND" or (uncertain and e.code == "FAILED_PRECONDITION"):
            return True
        if e.code != "FAILED_PRECONDITION":
            return False
        try:  # closed under us (a restart, an expired lease): lost
            return bool(self.client.state(self.episode_id).closed)
        except KernelArenaError as se:
            return se.code == "NOT_FOUND"

    def _step_once(self, files: Mapping[str, str]):
        uncertain = False
        for attempt in range(self.retries + 1):
            try:
                return self.client.step(self.episode_id, self.steps, dict(files))
            except KernelArenaError as e:
                if not e.retryable:
                    if self._gone(e, uncertain):
                        raise _Lost(str(e)) from None
                    raise
                if attempt == self.retries:
                    raise _Lost(str(e)) from None
                uncertain = uncertain or e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
                time.sleep(_backoff(attempt))

    def _replay(self):
        """A new episode of the same task and seed, the earlier submissions sent again."""
        old, self.episode_id = self.episode_id, None
        try:
            self.client.close(old)
        except Exception:  # noqa: BLE001 - gone already
            pass
        r = self._retry(lambda: self.client.reset(self.task_id, seed=self.seed,
                                                  options=self.options))
        self.episode_id, self.steps = r.episode_id, 0
        self.replays += 1
        for files in self._sent:
            self.steps = int(self._step_once(files).observation.step)

    def _evaluate(self, files: Mapping[str, str]):
        last: Exception = KernelArenaError("UNAVAILABLE", "not evaluated", True)
        for replay in range(self.retries + 1):
            try:
                if replay:
                    self._replay()
                s = self._step_once(files)
                self._sent.append(dict(files))
                return s
            except _Lost as e:
                last = e
                time.sleep(_backoff(replay))
        raise KernelArenaError("UNAVAILABLE", f"episode lost {self.retries + 1} times: {last}", True)

    def reset(self, seed: Optional[int] = None) -> str:
        """Closes the previous episode, starts one; returns the prompt text."""
        self.close_episode()
        if self._task is None:
            self._task = next((t for t in self._retry(self.client.list_tasks)
                               if t.id == self.task_id), None)
            if self._task is None:
                raise KernelArenaError("NOT_FOUND", f"unknown task '{self.task_id}'", False)
        r = self._retry(lambda: self.client.reset(self.task_id, seed=seed, options=self.options))
        self._sent = []
        return self._on_reset(r, self._task)

    def step(self, reply: str) -> TextStep:
        """Parses reply, evaluates its files (one Step) and returns the TextStep."""
        if self.episode_id is None or self.done:
            raise KernelArenaError("FAILED_PRECONDITION", "reset() first: no open episode", False)
        pr = parse_reply(reply, self.editable)
        if not pr.ok:
            return self._no_files(pr)
        return self._on_step(self._evaluate(pr.files), pr)

    def step_files(self, files: Mapping[str, str]) -> TextStep:
        """step() for files given directly ({path: contents}, e.g. a tool call's
        arguments): the same checks (parse_files), evaluation and TextStep."""
        if self.episode_id is None or self.done:
            raise KernelArenaError("FAILED_PRECONDITION", "reset() first: no open episode", False)
        pr = parse_files(files, self.editable)
        if not pr.ok:
            return self._no_files(pr)
        return self._on_step(self._evaluate(pr.files), pr)

    def close_episode(self):
        """Closes the episode (never raises)."""
        if self.episode_id is not None:
            ep, self.episode_id = self.episode_id, None
            try:
                self.client.close(ep)
            except Exception:  # noqa: BLE001 - gone already, or the server is down
                pass

    def close(self):
        """Closes the episode and, if this object opened it, the client (never raises)."""
        self.close_episode()
        if self._own:
            self.client.close()


class AsyncTextEpisode(_EpisodeBase):
    """TextEpisode over an AsyncClient (shared when given, else opened on url): the same
    methods as coroutines. Many may share one AsyncClient (one nng context per call)."""

    def __init__(self, task_id: str, url: Optional[str] = None, max_steps: int = 1,
                 client: Optional[AsyncClient] = None, timeout_s: float = 900.0,
                 reward_cap: Optional[float] = None, options: Optional[Mapping[str, str]] = None,
                 tls: Optional[Mapping[str, Optional[str]]] = None):
        super().__init__(task_id, max_steps, reward_cap, options)
        self._own = client is None
        self.client = client or AsyncClient(url, timeout_s=timeout_s, tls=tls)
        self._task = None

    async def reset(self, seed: Optional[int] = None) -> str:
        await self.close_episode()
        if self._task is None:
            tasks = await self.client.list_tasks()
            self._task = next((t for t in tasks if t.id == self.task_id), None)
            if self._task is None:
                raise KernelArenaError("NOT_FOUND", f"unknown task '{self.task_id}'", False)
        r = await self.client.reset(self.task_id, seed=seed, options=self.options)
        return self._on_reset(r, self._task)

    async def step(self, reply: str) -> TextStep:
        if self.episode_id is None or self.done:
            raise KernelArenaError("FAILED_PRECONDITION", "reset() first: no open episode", False)
        pr = parse_reply(reply, self.editable)
        if not pr.ok:
            return self._no_files(pr)
        return self._on_step(await self.client.step(self.episode_id, self.steps, pr.files), pr)

    async def close_episode(self):
        if self.episode_id is not None:
            ep, self.episode_id = self.episode_id, None
            try:
                await self.client.close(ep)
            except Exception:  # noqa: BLE001
                pass

    async def close(self):
        await self.close_episode()
        if self._own:
            self.client.aclose()
