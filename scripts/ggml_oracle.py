#!/usr/bin/env python3
"""gguf-py (llama.cpp's Python package) as the oracle of safetensors-node's codec tests.

  ggml_oracle.py batch JOBS.json

JOBS.json is a list of jobs, run in order; paths are files the caller made:

  {"op": "dequantize", "type": "Q4_K", "input": "blocks.bin", "output": "values.f32"}
      gguf.quants.dequantize of the raw blocks; little-endian float32 out.
  {"op": "quantize", "type": "Q5_0", "input": "values.f32", "output": "blocks.bin"}
      gguf.quants.quantize of the float32 values (one row).
  {"op": "write_gguf", "output": "x.gguf", "tensors": [
       {"name": "t", "type": "IQ2_S", "shape": [rows, cols], "input": "blocks.bin"}, ...]}
      GGUFWriter writes the raw blocks as tensors of that type and shape (outermost first).
  {"op": "read_gguf", "input": "x.gguf", "output_dir": "dir"}
      GGUFReader reads every tensor and dequantizes it: dir/<index>.f32 per tensor (integer
      and F64 tensors are written as stored, in <index>.raw).
  {"op": "sizes", "output": "sizes.json"}
      {type name: [id, block size, type size]} from gguf.constants.

Prints {"ok": true} when every job ran.
"""

import json
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

PLAIN = {T.I8: np.int8, T.I16: np.int16, T.I32: np.int32, T.I64: np.int64, T.F64: np.float64}


def dequantize(job):
    qtype = T[job["type"]]
    raw = np.fromfile(job["input"], dtype=np.uint8)
    block, size = GGML_QUANT_SIZES[qtype]
    rows = raw.reshape((-1, size))  # one block per row: any count, no alignment
    out = gguf.quants.dequantize(rows, qtype)
    np.ascontiguousarray(out, dtype=np.float32).tofile(job["output"])


def quantize(job):
    qtype = T[job["type"]]
    values = np.fromfile(job["input"], dtype=np.float32)
    out = gguf.quants.quantize(values.reshape((1, -1)), qtype)
    np.ascontiguousarray(out, dtype=np.uint8).tofile(job["output"])


def write_gguf(job):
    w = gguf.GGUFWriter(job["output"], "oracle")
    for t in job["tensors"]:
        qtype = T[t["type"]]
        block, size = GGML_QUANT_SIZES[qtype]
        shape = list(t["shape"])
        raw = np.fromfile(t["input"], dtype=np.uint8)
        byte_shape = shape[:-1] + [shape[-1] // block * size]
        w.add_tensor(t["name"], raw.reshape(byte_shape), raw_shape=byte_shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_gguf(job):
    r = gguf.GGUFReader(job["input"])
    for i, t in enumerate(r.tensors):
        if t.tensor_type in PLAIN:
            np.ascontiguousarray(t.data).tofile(f"{job['output_dir']}/{i}.raw")
            continue
        out = gguf.quants.dequantize(t.data, t.tensor_type)
        np.ascontiguousarray(out, dtype=np.float32).tofile(f"{job['output_dir']}/{i}.f32")


def sizes(job):
    out = {t.name: [int(t.value), *GGML_QUANT_SIZES[t]] for t in T if t in GGML_QUANT_SIZES}
    with open(job["output"], "w") as f:
        json.dump(out, f)


OPS = {"dequantize": dequantize, "quantize": quantize, "write_gguf": write_gguf,
       "read_gguf": read_gguf, "sizes": sizes}


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "batch":
        sys.exit(__doc__)
    with open(sys.argv[2]) as f:
        jobs = json.load(f)
    with np.errstate(all="ignore"):
        for job in jobs:
            OPS[job["op"]](job)
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()
