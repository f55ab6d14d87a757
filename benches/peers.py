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
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from rss import max_rss_kib, ru_maxrss_kib  # noqa: E402

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


class SliceNumpy:
    """Columns [0, cols) of every row of a BF16/F16 matrix, as float32."""

    def setup(self, P):
        ctx = UpcastNumpy().setup(P)
        ctx["cols"] = P["cols"]
        return ctx

    def run(self, c):
        return c["x"][:, : c["cols"]].astype(np.float32)

    def check(self, c, out):
        return {"n": int(out.size), "sum": stride_sum(out)}


def checkpoint_files(d):
    """The weight files of a model directory: the index's shards in order, or the one file."""
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(d, s) for s in shards]
    return [os.path.join(d, "model.safetensors")]


def checkpoint_check(arrays):
    n, s = 0, 0.0
    for a in arrays:
        n += int(a.size)
        s += stride_sum(a)
    return {"n": n, "sum": s}


class CheckpointNumpy:
    """safetensors.numpy.load_file of each file, then astype(float32) of every tensor."""

    def setup(self, P):
        import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy
        from safetensors.numpy import load_file

        return {"files": checkpoint_files(P["dir"]), "load": load_file}

    def run(self, c):
        out = {}
        for f in c["files"]:
            out.update({k: v.astype(np.float32) for k, v in c["load"](f).items()})
        return out

    def check(self, c, out):
        return checkpoint_check(out.values())


class CheckpointMlx:
    """mx.load of each file, astype(mx.float32) of every tensor, mx.eval."""

    def setup(self, P):
        import mlx.core as mx

        return {"files": checkpoint_files(P["dir"]), "mx": mx}

    def run(self, c):
        mx = c["mx"]
        out = {}
        for f in c["files"]:
            out.update({k: v.astype(mx.float32) for k, v in mx.load(f).items()})
            mx.eval(list(out.values()))
        return out

    def check(self, c, out):
        return checkpoint_check(np.array(v) for v in out.values())


class FreshCopy:
    """The physical bound of producing outputs: for each size, fresh anonymous memory (transparent
    huge pages asked for, or refused), then a copy of that many resident bytes into it on two
    threads (ctypes.memmove releases the GIL). Outputs are kept until the repetition ends.
    With `reuse`, the outputs are mapped and written once in setup and every repetition copies
    into that memory again: the bound of an output whose memory was already faulted in.
    With `read` (file paths), each repetition also reads those files from the page cache with
    positioned reads into a reused 1 MiB buffer per thread, two threads (os.preadv releases the
    GIL): the bound of a loader that must read its stored bytes before converting them."""

    def setup(self, P):
        import ctypes
        import mmap

        src = mmap.mmap(-1, max(P["sizes"]), flags=mmap.MAP_PRIVATE)
        src.write(b"\x01" * len(src))  # resident, so only the destination is fresh
        c = {"src": src, "sizes": P["sizes"], "huge": P["huge"], "ctypes": ctypes, "mmap": mmap,
             "src_addr": ctypes.addressof(ctypes.c_char.from_buffer(src)), "kept": None,
             "read": P.get("read", [])}
        if P.get("reuse"):
            c["kept"] = [self.map(c, size) for size in c["sizes"]]
            for m in c["kept"]:
                m.write(b"\x02" * len(m))
        return c

    def map(self, c, size):
        mmap = c["mmap"]
        # Private, like malloc's (a shared anonymous mapping is shmem, with its own THP policy).
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
        m.madvise(mmap.MADV_HUGEPAGE if c["huge"] else mmap.MADV_NOHUGEPAGE)
        return m

    def run(self, c):
        import threading

        ctypes = c["ctypes"]
        outs = []
        for k, size in enumerate(c["sizes"]):
            m = c["kept"][k] if c["kept"] else self.map(c, size)
            dst = ctypes.addressof(ctypes.c_char.from_buffer(m))
            half = size // 2 // 4096 * 4096
            if size >= (1 << 20):
                t = threading.Thread(target=ctypes.memmove, args=(dst + half, c["src_addr"] + half, size - half))
                t.start()
                ctypes.memmove(dst, c["src_addr"], half)
                t.join()
            else:
                ctypes.memmove(dst, c["src_addr"], size)
            outs.append(m)
        for path in c["read"]:
            self.read(path)
        return outs

    @staticmethod
    def read(path):
        import os
        import threading

        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            half = size // 2 // 4096 * 4096

            def part(start, end):
                buf = bytearray(1 << 20)
                at = start
                while at < end:
                    n = os.preadv(fd, [memoryview(buf)[: min(len(buf), end - at)]], at)
                    if n <= 0:
                        raise OSError(f"{path}: short read at {at}")
                    at += n

            t = threading.Thread(target=part, args=(half, size))
            t.start()
            part(0, half)
            t.join()
        finally:
            os.close(fd)

    def check(self, c, out):
        return {"bytes": sum(len(m) for m in out)}


def qwen3_names(cfg):
    """The tensors of a Qwen3-shaped model (untied: no lm_head), in file order."""
    V, H, I, L = cfg["vocab"], cfg["hidden"], cfg["inter"], cfg["layers"]
    nh, nkv, hd = cfg["heads"], cfg["kv"], cfg["head_dim"]
    names = [("model.embed_tokens.weight", (V, H))]
    for i in range(L):
        p = f"model.layers.{i}."
        names += [
            (p + "input_layernorm.weight", (H,)),
            (p + "self_attn.q_proj.weight", (nh * hd, H)),
            (p + "self_attn.k_proj.weight", (nkv * hd, H)),
            (p + "self_attn.v_proj.weight", (nkv * hd, H)),
            (p + "self_attn.o_proj.weight", (H, nh * hd)),
            (p + "self_attn.q_norm.weight", (hd,)),
            (p + "self_attn.k_norm.weight", (hd,)),
            (p + "post_attention_layernorm.weight", (H,)),
            (p + "mlp.gate_proj.weight", (I, H)),
            (p + "mlp.up_proj.weight", (I, H)),
            (p + "mlp.down_proj.weight", (H, I)),
        ]
    names.append(("model.norm.weight", (H,)))
    return names


def make_checkpoint(d, shards, cfg):
    """A Qwen3-shaped BF16 model directory written by the reference writer (safetensors.numpy),
    one file or `shards` shards with an index, plus config.json. Deterministic."""
    import ml_dtypes
    from safetensors.numpy import save_file

    V, H, I, L = cfg["vocab"], cfg["hidden"], cfg["inter"], cfg["layers"]
    nh, nkv, hd = cfg["heads"], cfg["kv"], cfg["head_dim"]
    names = qwen3_names(cfg)
    rng = np.random.default_rng(20)

    def make(shape):
        std, mean = (0.05, 1.0) if len(shape) == 1 else (0.02, 0.0)
        x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * std + mean
        return x.astype(ml_dtypes.bfloat16).reshape(shape)

    os.makedirs(d, exist_ok=True)
    total = sum(int(np.prod(s)) for _, s in names)
    if shards == 1:
        save_file({n: make(s) for n, s in names}, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        groups, acc, per = [[]], 0, total / shards
        for n, s in names:
            if acc >= per * len(groups) and len(groups) < shards:
                groups.append([])
            groups[-1].append((n, s))
            acc += int(np.prod(s))
        weight_map = {}
        for k, g in enumerate(groups):
            fn = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
            save_file({n: make(s) for n, s in g}, os.path.join(d, fn), metadata={"format": "pt"})
            weight_map.update({n: fn for n, _ in g})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total * 2}, "weight_map": weight_map}, f, indent=2)
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": I,
        "num_hidden_layers": L, "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": hd,
        "vocab_size": V, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return {"tensors": len(names), "params": total}


class TorchConvertPy:
    """Hugging Face's convert.py path for one `pytorch_model.bin` (safetensors/convert.py
    `convert_file`): torch.load(weights_only=True), unwrap "state_dict",
    _remove_duplicate_names, {"format": "pt", dropped: kept} metadata, contiguous tensors,
    save_file, check_file_size, load_file and torch.equal of every tensor. Imports untimed.
    Run with a Python that has torch and safetensors (BENCH_TORCH_PYTHON)."""

    def setup(self, P):
        import torch
        from safetensors.torch import _remove_duplicate_names, load_file, save_file

        return {"torch": torch, "remove": _remove_duplicate_names, "load": load_file, "save": save_file, "P": P}

    def before(self, c):
        if os.path.exists(c["P"]["out"]):
            os.remove(c["P"]["out"])
        os.sync()

    def run(self, c):
        torch, P = c["torch"], c["P"]
        loaded = torch.load(P["path"], map_location="cpu", weights_only=True)
        if "state_dict" in loaded:
            loaded = loaded["state_dict"]
        to_removes = c["remove"](loaded, discard_names=[])
        metadata = {"format": "pt"}
        for kept_name, to_remove_group in to_removes.items():
            for to_remove in to_remove_group:
                if to_remove not in metadata:
                    metadata[to_remove] = kept_name
                del loaded[to_remove]
        loaded = {k: v.contiguous() for k, v in loaded.items()}
        c["save"](loaded, P["out"], metadata=metadata)
        sf_size, pt_size = os.stat(P["out"]).st_size, os.stat(P["path"]).st_size
        if (sf_size - pt_size) / pt_size > 0.01:
            raise RuntimeError(f"file size differs: {sf_size} vs {pt_size}")
        reloaded = c["load"](P["out"])
        for k in loaded:
            if not torch.equal(loaded[k], reloaded[k]):
                raise RuntimeError(f"The output tensors do not match for key {k}")
        return len(loaded)

    def check(self, c, n):
        return {"tensors": n}


class NpzNumpy:
    """numpy.load of an .npz (allow_pickle=False, its default) and every array read from it,
    each touched once per 4 KiB (the same work as ours)."""

    def setup(self, P):
        return {"path": P["path"]}

    def run(self, c):
        out, s = [], 0.0
        with np.load(c["path"]) as f:
            for k in f.files:
                a = f[k]
                s += float(a.reshape(-1)[::1024].astype(np.float64).sum())
                out.append(a)
        return out, s

    def check(self, c, r):
        return checkpoint_check(r[0])


def make_pytorch(path, cfg):
    """A Qwen3-0.6B-shaped BF16 `pytorch_model.bin` written by torch.save (the state_dict of a
    tied model: lm_head.weight shares embed_tokens' storage, as transformers saves it)."""
    import torch

    names = qwen3_names(cfg)
    rng = np.random.default_rng(21)
    sd = {}
    for n, shape in names:
        std, mean = (0.05, 1.0) if len(shape) == 1 else (0.02, 0.0)
        x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * std + mean
        sd[n] = torch.from_numpy(x).to(torch.bfloat16).reshape(shape)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(sd, path)
    return {"tensors": len(sd), "params": sum(int(np.prod(s)) for _, s in names)}


def make_npz(path, src, compressed):
    """An .npz of the F32 tensors of a SafeTensors file, written by numpy (np.savez or
    np.savez_compressed)."""
    from safetensors.numpy import load_file

    d = load_file(src)
    (np.savez_compressed if compressed else np.savez)(path, **d)
    return {"tensors": len(d), "params": int(sum(a.size for a in d.values()))}


class DownloadHf:
    """huggingface_hub's snapshot_download of the whole model from the local Hub (row 12)."""

    def setup(self, P):
        os.environ["HF_HUB_DISABLE_XET"] = "1"
        os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        from huggingface_hub import snapshot_download

        return {"download": snapshot_download, "P": P}

    def before(self, c):
        import shutil

        shutil.rmtree(c["P"]["cache"], ignore_errors=True)

    def run(self, c):
        P = c["P"]
        return c["download"](P["id"], cache_dir=P["cache"], endpoint=P["endpoint"])

    def check(self, c, snapshot):
        return snapshot_check(snapshot)


def snapshot_check(snapshot):
    """Files and bytes of a snapshot directory (its links followed)."""
    n, size = 0, 0
    for d, _, names in os.walk(snapshot):
        for name in names:
            n += 1
            size += os.path.getsize(os.path.join(d, name))
    return {"n": n, "bytes": size}


def read_safetensors(path):
    """Each tensor of a file as float32 (F32 and F16), lazily: (name, array) one at a time."""
    h, start = header(path)
    with open(path, "rb") as f:
        for name, t in h.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            f.seek(start + b)
            raw = np.frombuffer(f.read(e - b), {"F32": "<f4", "F16": "<f2"}[t["dtype"]])
            yield name, raw.astype(np.float32, copy=False).reshape(t["shape"])


class DiffNumpy:
    """What `diff` computes, in numpy: per tensor max |d|, mean |d|, |d|/|a|, cosine (row 14)."""

    def setup(self, P):
        return P

    def run(self, P):
        # Tensor by tensor, as ours (both files list the same tensors in the same order).
        out, n, total = {}, 0, 0.0
        for (name, x), (_, y) in zip(read_safetensors(P["a"]), read_safetensors(P["b"])):
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            d = x64 - y64
            ad = np.abs(d)
            na, nb = np.linalg.norm(x64), np.linalg.norm(y64)
            out[name] = (ad.max(), ad.mean(), np.linalg.norm(d) / na, np.dot(x64.ravel(), y64.ravel()) / (na * nb), np.array_equal(x, y))
            n += d.size
            total += float(ad.sum())
        return {"n": n, "sum": total}

    def check(self, c, r):
        return r


def make_diff(d, n, rows, cols):
    """Row 14's inputs: `n` F32 tensors of [rows, cols] ~N(0, 0.02) in a.safetensors, and the
    same plus noise of 1e-3 in b.safetensors, written one tensor at a time."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(14)
    names = [f"model.layers.{i}.mlp.weight" for i in range(n)]
    size = rows * cols * 4
    h = {name: {"dtype": "F32", "shape": [rows, cols], "data_offsets": [i * size, (i + 1) * size]} for i, name in enumerate(names)}
    head = json.dumps(h).encode()
    head += b" " * (-len(head) % 8)
    with open(os.path.join(d, "a.safetensors"), "wb") as fa, open(os.path.join(d, "b.safetensors"), "wb") as fb:
        for f in (fa, fb):
            f.write(struct.pack("<Q", len(head)) + head)
        for _ in names:
            x = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
            fa.write(x.tobytes())
            x += rng.standard_normal((rows, cols), dtype=np.float32) * 1e-3
            fb.write(x.tobytes())
    return {"tensors": n, "bytes": n * size}


CASES = {
    "llama-converter": LlamaConverter,
    "upcast-numpy": UpcastNumpy,
    "upcast-mlx": UpcastMlx,
    "memcpy-numpy": MemcpyNumpy,
    "load-st-numpy": LoadSafetensorsNumpy,
    "save-st-numpy": SaveSafetensorsNumpy,
    "quant-ggufpy": QuantGgufPy,
    "dequant-ggufpy": DequantGgufPy,
    "slice-numpy": SliceNumpy,
    "ckpt-numpy": CheckpointNumpy,
    "ckpt-mlx": CheckpointMlx,
    "fresh-copy": FreshCopy,
    "torch-convert-py": TorchConvertPy,
    "npz-numpy": NpzNumpy,
    "download-hf": DownloadHf,
    "diff-numpy": DiffNumpy,
}


def main():
    if sys.argv[1] == "--info":
        print("RESULT " + json.dumps({"versions": versions(), "blas": blas_info()}))
        return
    if sys.argv[1] == "--make-pytorch":
        print("RESULT " + json.dumps(make_pytorch(sys.argv[2], json.loads(sys.argv[3]))))
        return
    if sys.argv[1] == "--make-npz":
        print("RESULT " + json.dumps(make_npz(sys.argv[2], sys.argv[3], sys.argv[4] == "compressed")))
        return
    if sys.argv[1] == "--make-diff":
        print("RESULT " + json.dumps(make_diff(sys.argv[2], *map(int, sys.argv[3:6]))))
        return
    if sys.argv[1] == "--make-checkpoint":
        made = make_checkpoint(sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))
        print("RESULT " + json.dumps(made))
        return
    case, reps, params = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    spec = CASES[case]()
    ctx = spec.setup(params)
    times, warmup, last = [], None, None
    # reps 0: this process is fresh for its one timed run (no warm-up, nothing before it).
    fresh = reps == 0
    for i in range(reps + 1):
        if hasattr(spec, "before") and not fresh:
            spec.before(ctx)
        if not fresh:
            gc.collect()
        t0 = time.perf_counter()
        r = spec.run(ctx)
        ms = (time.perf_counter() - t0) * 1000
        if i == 0 and not fresh:
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
