#!/usr/bin/env python3
"""Write weights files with the formats' own Python tools, for `openWeights` to read back.

  weights_peers.py OUT_DIR

Writes, in OUT_DIR:
  - peer.gguf: by gguf-py's GGUFWriter (llama.cpp's writer): F32, F16, BF16-free plain types
    (I8, I16, I32, F64) and Q8_0 / Q4_0 blocks quantized by gguf.quants.quantize;
  - sharded/: two shards written by safetensors.numpy.save_file, an index written here, and
    a config.json: a model directory and a standalone index;
  - single.safetensors: one file written by safetensors.numpy.save_file, with metadata.

Prints JSON {file: {tensor: {dtype, shape, stored_hex, served_hex}}}: `stored_hex` is the
tensor's bytes as stored, `served_hex` the little-endian bytes a reader serves — the stored
bytes, or for block types the F32 values gguf.quants.dequantize gives.
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from safetensors.numpy import save_file


def values(shape, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def main():
    out = sys.argv[1]
    report = {}

    # --- GGUF, by gguf-py.
    path = os.path.join(out, "peer.gguf")
    w = gguf.GGUFWriter(path, "peertest")
    w.add_string("peer.note", "written by gguf-py")
    w.add_uint32("peer.count", 7)
    entries = {}
    plain = {
        "f32": values((2, 32), 1),
        "f16": values((64,), 2).astype(np.float16),
        "i8": np.arange(-5, 5, dtype=np.int8),
        "i16": np.arange(-300, 300, 100, dtype=np.int16),
        "i32": np.array([[-7, 9], [2**31 - 1, -(2**31)]], dtype=np.int32),
        "f64": np.array([1e-300, -2.5, np.pi], dtype=np.float64),
    }
    for name, arr in plain.items():
        w.add_tensor(name, arr)
        entries[name] = (arr, arr)
    for name, qtype, seed in [("q8_0", T.Q8_0, 3), ("q4_0", T.Q4_0, 4)]:
        src = values((4, 64), seed, scale=3.0)
        q = gguf.quants.quantize(src, qtype)
        w.add_tensor(name, q, raw_dtype=qtype)
        entries[name] = (q, gguf.quants.dequantize(q, qtype).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    report["peer.gguf"] = {
        name: {
            "shape": list(served.shape),
            "stored_hex": np.ascontiguousarray(stored).tobytes().hex(),
            "served_hex": np.ascontiguousarray(served).astype(served.dtype.newbyteorder("<")).tobytes().hex(),
        }
        for name, (stored, served) in entries.items()
    }

    # --- SafeTensors, by the reference writer: one file, and a sharded directory.
    single = {"a.weight": values((3, 4), 5), "a.bias": values((4,), 6).astype(np.float16)}
    save_file(single, os.path.join(out, "single.safetensors"), metadata={"format": "np", "who": "peer"})
    report["single.safetensors"] = {
        k: {"shape": list(v.shape), "stored_hex": v.tobytes().hex(), "served_hex": v.tobytes().hex()}
        for k, v in single.items()
    }
    sharded = os.path.join(out, "sharded")
    os.makedirs(sharded, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {"l0.w": values((2, 8), 7), "l0.i": np.arange(6, dtype=np.int64)},
        "model-00002-of-00002.safetensors": {"l1.w": values((8, 2), 8).astype(np.float16)},
    }
    weight_map = {}
    for file, tensors in shards.items():
        save_file(tensors, os.path.join(sharded, file), metadata={"format": "np"})
        for k in tensors:
            weight_map[k] = file
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    with open(os.path.join(sharded, "config.json"), "w") as f:
        json.dump({"model_type": "peer", "__proto__": {"polluted": True}}, f)
    report["sharded"] = {
        k: {"shape": list(v.shape), "stored_hex": v.tobytes().hex(), "served_hex": v.tobytes().hex(), "file": file}
        for file, tensors in shards.items()
        for k, v in tensors.items()
    }
    json.dump(report, sys.stdout)


main()
