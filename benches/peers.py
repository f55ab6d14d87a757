"""The Python peers of the benchmark, one implementation per process:

    python benches/peers.py CASE REPS 'JSON-PARAMS'

Runs one untimed warm-up, then REPS timed repetitions, and prints one line
`RESULT {json}` with the times (ms), peak RSS (KiB) and a check value of the output —
the same protocol as benches/lib/child.mjs. Started by benches/run.mjs with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from this process's environment.
"""

import gc
import hashlib
import json
import os
import resource
import struct
import sys
import time

import numpy as np


def ru_maxrss_kib():
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r // 1024 if sys.platform == "darwin" else r  # bytes on macOS, KiB on Linux


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


RSS_START = max_rss_kib()


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def tensor_bits(path, name):
    """The stored bytes of one tensor as an owned uint16/uint8 array (read untimed)."""
    h, start = header(path)
    t = h[name]
    b, e = t["data_offsets"]
    raw = np.fromfile(path, dtype=np.uint8, count=e - b, offset=start + b)
    return t["dtype"], t["shape"], raw


def stride_sum(a, stride=4099):
    return float(np.asarray(a).reshape(-1)[::stride].astype(np.float64).sum())


def versions():
    v = {"python": sys.version.split()[0], "numpy": np.__version__}
    for mod in ("safetensors", "ml_dtypes", "gguf", "mlx"):
        try:
            m = __import__(mod)
            v[mod] = getattr(m, "__version__", None)
            if mod == "gguf" and v[mod] is None:
                from importlib.metadata import version

                v[mod] = version("gguf")
            if mod == "mlx":
                import mlx.core as mx

                v[mod] = mx.__version__
        except Exception:  # noqa: BLE001 - report what is importable
            v[mod] = None
    return v


def blas_info():
    """Which BLAS kernel numpy would run (threadpoolctl), and the OPENBLAS_* it sees."""
    out = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    try:
        from threadpoolctl import threadpool_info

        np.ones((64, 64)) @ np.ones((64, 64))  # make sure the BLAS is loaded
        out["threadpools"] = [
            {k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for i in threadpool_info()
        ]
    except Exception as e:  # noqa: BLE001
        out["threadpools"] = str(e)
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats

        out["numpy_simd"] = [k for k in ("AVX2", "F16C", "FMA3", "AVX512F", "AVX512_SKX") if feats.get(k)]
    except Exception:  # noqa: BLE001
        pass
    return out


# ------------------------------------------------------------------------------------------
# Cases: setup(P) -> ctx (untimed), run(ctx) -> result (timed), check(ctx, result) (untimed),
# before(ctx) (untimed, before each repetition).


class UpcastNumpy:
    def setup(self, P):
        dtype, shape, raw = tensor_bits(P["path"], P["name"])
        if dtype == "BF16":
            import ml_dtypes

            x = raw.view(ml_dtypes.bfloat16)
        else:
            x = raw.view(np.float16)
        return {"x": x.reshape(shape)}

    def run(self, c):
        return c["x"].astype(np.float32)

    def check(self, c, out):
        return {"n": int(out.size), "sum": stride_sum(out)}


class UpcastMlx:
    def setup(self, P):
        import mlx.core as mx

        dtype, shape, raw = tensor_bits(P["path"], P["name"])
        x = mx.array(raw.view(np.uint16)).view(mx.bfloat16 if dtype == "BF16" else mx.float16)
        x = x.reshape(shape)
        mx.eval(x)
        return {"x": x, "mx": mx}

    def run(self, c):
        mx = c["mx"]
        y = c["x"].astype(mx.float32)
        mx.eval(y)
        return y

    def check(self, c, out):
        return {"n": int(out.size), "sum": stride_sum(np.array(out))}


class MemcpyNumpy:
    def setup(self, P):
        return {"src": (np.arange(P["n"], dtype=np.uint32) & 1023).astype(np.float32)}

    def run(self, c):
        return c["src"].copy()

    def check(self, c, out):
        return {"n": int(out.size), "sum": stride_sum(out)}


class LoadSafetensorsNumpy:
    def setup(self, P):
        from safetensors.numpy import load_file

        return {"load": load_file, "path": P["path"], "touch": P.get("touch")}

    def run(self, c):
        d = c["load"](c["path"])
        n = sum(a.size for a in d.values())
        s = sum(float(a.sum()) for a in d.values()) if c["touch"] else None
        return {"n": int(n), "sum": s}

    def check(self, c, r):
        return r


def sync_before(c):
    try:
        os.remove(c["out"])
    except FileNotFoundError:
        pass
    os.sync()


class SaveSafetensorsNumpy:
    def setup(self, P):
        from safetensors.numpy import load_file, save_file

        return {"tensors": load_file(P["src"]), "save": save_file, "out": P["out"]}

    before = staticmethod(sync_before)

    def run(self, c):
        c["save"](c["tensors"], c["out"])

    def check(self, c, _):
        return {"bytes": os.path.getsize(c["out"])}


class QuantGgufPy:
    def setup(self, P):
        import gguf
        from gguf.quants import quantize
        from safetensors.numpy import load_file

        x = load_file(P["path"])[P["name"]]
        return {"x": x, "quantize": quantize, "qtype": gguf.GGMLQuantizationType[P["q"]], "P": P}

    def run(self, c):
        return c["quantize"](c["x"], c["qtype"])

    def check(self, c, out):
        b = np.ascontiguousarray(out).tobytes()
        r = {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
        ours = c["P"].get("ours")
        if ours and os.path.exists(ours):
            from gguf import GGUFReader

            t = [t for t in GGUFReader(ours).tensors if t.name == c["P"]["name"]]
            if t:
                theirs = np.ascontiguousarray(t[0].data).tobytes()
                r["identical_to_ours"] = theirs == b
        return r


class DequantGgufPy:
    def setup(self, P):
        import gguf
        from gguf.quants import dequantize

        t = gguf.GGUFReader(P["path"]).tensors[0]
        # The blocks in memory (read untimed), as for every in-memory peer.
        return {"data": np.array(t.data), "qtype": t.tensor_type, "dequantize": dequantize}

    def run(self, c):
        return c["dequantize"](c["data"], c["qtype"])

    def check(self, c, out):
        return {"n": int(out.size), "sum": stride_sum(out)}


class LlamaConverter:
    """llama.cpp's convert_hf_to_gguf.py on a model directory, in this process (its own
    imports — torch, transformers — happen in setup, untimed). Run with a Python that has
    torch, transformers and sentencepiece."""

    def setup(self, P):
        sys.path.insert(0, P["src"])
        import logging

        import convert_hf_to_gguf

        logging.disable(logging.INFO)  # its per-tensor log lines
        return {"conv": convert_hf_to_gguf, "P": P}

    def before(self, c):
        if os.path.exists(c["P"]["out"]):
            os.remove(c["P"]["out"])
        os.sync()

    def run(self, c):
        P = c["P"]
        sys.argv = ["convert_hf_to_gguf.py", P["dir"], "--outtype", P["outtype"], "--outfile", P["out"]]
        c["conv"].main()

    def check(self, c, _):
        return {"fileBytes": os.path.getsize(c["P"]["out"])}


CASES = {
    "llama-converter": LlamaConverter,
    "upcast-numpy": UpcastNumpy,
    "upcast-mlx": UpcastMlx,
    "memcpy-numpy": MemcpyNumpy,
    "load-st-numpy": LoadSafetensorsNumpy,
    "save-st-numpy": SaveSafetensorsNumpy,
    "quant-ggufpy": QuantGgufPy,
    "dequant-ggufpy": DequantGgufPy,
}


def main():
    if sys.argv[1] == "--info":
        print("RESULT " + json.dumps({"versions": versions(), "blas": blas_info()}))
        return
    case, reps, params = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    spec = CASES[case]()
    ctx = spec.setup(params)
    times, warmup, last = [], None, None
    for i in range(reps + 1):
        if hasattr(spec, "before"):
            spec.before(ctx)
        gc.collect()
        t0 = time.perf_counter()
        r = spec.run(ctx)
        ms = (time.perf_counter() - t0) * 1000
        if i == 0:
            warmup = ms
        else:
            times.append(ms)
        if i == reps:
            last = r
        r = None
    check = spec.check(ctx, last)
    last = None
    gc.collect()
    result = {
        "case": case,
        "times_ms": times,
        "warmup_ms": warmup,
        "max_rss_kib": max_rss_kib(),
        "ru_maxrss_kib": ru_maxrss_kib(),
        "rss_start_kib": RSS_START,
        "check": check,
        "info": versions(),
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
