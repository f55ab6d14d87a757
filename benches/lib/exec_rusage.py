"""A program run as a benchmark peer, with its own peak RSS (row 7's llama-quantize, row 16's
convert → quantize → split pipeline):

    python benches/lib/exec_rusage.py CASE REPS 'JSON-PARAMS'

PARAMS: {"argv": [program, args...], "out": path removed (and `sync` run) before each run},
or {"steps": [argv, ...], "outs": [path, ...]}: programs run one after the other as one run,
timed together, its peak RSS the largest of theirs; an out ending in "/" is a directory,
emptied. REPS 0: one timed run and no warm-up (for runs that take minutes). The same protocol as benches/peers.py and benches/lib/child.mjs: one untimed warm-up, then
REPS timed runs, one line `RESULT {json}`. Each run is `posix_spawn` + `wait4` of the
program: the time is that of the spawn and the wait (this runner's own start-up is outside
it), and `max_rss_kib` is the largest `ru_maxrss` that `wait4` reports for the program
itself (what `/usr/bin/time` reports), not the peak of the process that started it.

Linux counts in a program's `ru_maxrss` the memory of the process it was exec'd from, here
this runner (no numpy: about 10 MiB, `runner_rss_kib`); the program's own peak is what counts
when it is larger. Standard library only, so it stays small.
"""

import json
import os
import shutil
import sys
import time

from rss import kib, max_rss_kib


def run_once(argv):
    devnull = [
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=devnull)
    _, status, usage = os.wait4(pid, 0)
    ms = (time.perf_counter() - t0) * 1000
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{argv[0]} exited with {code}")
    return ms, kib(usage.ru_maxrss)


def run_steps(steps):
    runs = [run_once(argv) for argv in steps]
    return sum(ms for ms, _ in runs), max(peak for _, peak in runs)


def main():
    case, reps, P = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    steps = P.get("steps") or [P["argv"]]
    outs = P.get("outs") or ([P["out"]] if P.get("out") else [])
    times, peaks, warmup = [], [], None
    for i in range(max(reps, 0) + 1):
        for out in outs:
            if out.endswith("/"):
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                continue
            try:
                os.remove(out)
            except FileNotFoundError:
                pass
        if outs:
            os.sync()
        ms, peak = run_steps(steps)
        peaks.append(peak)
        if i == 0 and reps > 0:
            warmup = ms
        else:
            times.append(ms)
    result = {
        "case": case,
        "times_ms": times,
        "warmup_ms": warmup,
        # The program's peak over every run, the warm-up included (as a Node or Python
        # child's high-water mark covers its warm-up).
        "max_rss_kib": max(peaks),
        "rss_per_run_kib": peaks,
        "runner_rss_kib": max_rss_kib(),
        "check": {},
        "info": {"programs": [argv[0] for argv in steps]},
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
