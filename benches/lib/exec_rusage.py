"""A program run as a benchmark peer, with its own peak RSS (row 7's llama-quantize):

    python benches/lib/exec_rusage.py CASE REPS 'JSON-PARAMS'

PARAMS: {"argv": [program, args...], "out": path removed (and `sync` run) before each run}.
The same protocol as benches/peers.py and benches/lib/child.mjs: one untimed warm-up, then
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


def main():
    case, reps, P = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    times, peaks, warmup = [], [], None
    for i in range(reps + 1):
        if P.get("out"):
            try:
                os.remove(P["out"])
            except FileNotFoundError:
                pass
            os.sync()
        ms, peak = run_once(P["argv"])
        peaks.append(peak)
        if i == 0:
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
        "info": {"program": P["argv"][0]},
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
