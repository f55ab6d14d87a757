"""Peak RSS in KiB for the Python sides of the benchmark (benches/peers.py,
benches/lib/exec_rusage.py). Standard library only."""

import resource
import sys


def kib(ru_maxrss):
    """A `ru_maxrss` value in KiB (it is bytes on macOS, KiB on Linux)."""
    return ru_maxrss // 1024 if sys.platform == "darwin" else ru_maxrss


def ru_maxrss_kib():
    """This process's `ru_maxrss`, in KiB."""
    return kib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def max_rss_kib():
    """This process's own peak RSS: VmHWM on Linux (ru_maxrss there includes the parent's
    RSS carried over fork + exec), ru_maxrss elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return ru_maxrss_kib()
