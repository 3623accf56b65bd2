#!/usr/bin/env python3
"""The shape of one GRPO step against a kernelarena server: N rollouts of one task with
one seed (the same problem for the whole group), all in flight at once from this
process, rewards gathered, group-relative advantages computed.

    python3 examples/grpo_step.py --url ipc:///path/state/env.ipc --task host/gelu -n 8

The "policy" here stands in for a model: rollout i submits, in turn, the task's baseline
unchanged, the baseline with a syntax error, or one of the --candidate files (the group
needs different rewards for non-zero advantages). A trainer would sample N completions
of one prompt instead, and use the advantages in its policy-gradient loss.

Advantages: A_i = (r_i - mean(r)) / (std(r) + 1e-6) over the group (Shao et al. 2024,
DeepSeekMath, sec. 4.1.2), kernelarena.group_advantages.
"""

import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients",
                                "python"))
import kernelarena  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("KERNELARENA_URL"),
                    help="envserver client endpoint (default $KERNELARENA_URL)")
    ap.add_argument("--task", default="host/gelu")
    ap.add_argument("-n", type=int, default=8, help="rollouts in the group")
    ap.add_argument("--seed", type=int, default=1, help="the group's shared seed")
    ap.add_argument("--steps", type=int, default=1, help="steps per rollout")
    ap.add_argument("--candidate", action="append", default=[],
                    help="a source file some rollouts submit (repeatable)")
    ap.add_argument("--run", default="grpo-example", help="trace-store run id")
    ap.add_argument("--timeout", type=float, default=900.0, help="per-request deadline, s")
    args = ap.parse_args()
    if not args.url:
        ap.error("--url (or $KERNELARENA_URL) is required")

    candidates = [open(p).read() for p in args.candidate]

    def policy(ob, i):
        files = {f.path: f.content.decode("utf-8", "replace") for f in ob.files}
        path = sorted(files)[0]
        choice = i % (2 + len(candidates))
        if choice == 0:
            return {path: files[path]}  # the baseline, unchanged
        if choice == 1:
            return {path: files[path] + "\n#error a deliberately broken rollout\n"}
        return {path: candidates[choice - 2]}

    async def group():
        async with kernelarena.AsyncClient(args.url, timeout_s=args.timeout) as ac:
            return await kernelarena.rollouts(ac, args.task, args.seed, args.n, policy,
                                              max_steps=args.steps, options={"run": args.run})

    t0 = time.monotonic()
    ros = asyncio.run(group())
    wall = time.monotonic() - t0
    rewards = [r.total_reward for r in ros]
    adv = kernelarena.group_advantages(rewards)
    print(f"GRPO group: task {args.task}, seed {args.seed}, {args.n} rollouts in flight, "
          f"{wall:.1f} s")
    print(f"{'ROLLOUT':>7} {'EPISODE':<20} {'STATUS':<14} {'REWARD':>9} {'SPEEDUP':>8} "
          f"{'ADVANTAGE':>10}")
    errors = 0
    for i, (r, a) in enumerate(zip(ros, adv)):
        status = r.statuses[-1] if r.statuses else "ERROR"
        sp = r.components[-1].get("speedup_geomean", 0.0) if r.components else 0.0
        print(f"{i:>7} {r.episode_id:<20} {status:<14} {r.total_reward:>9.2f} {sp:>8.3f} "
              f"{a:>+10.3f}" + (f"  {r.error}" if r.error else ""))
        errors += r.error is not None
    mean = sum(rewards) / len(rewards)
    print(f"mean reward {mean:.2f}, max {max(rewards):.2f}, min {min(rewards):.2f}, "
          f"errors {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
