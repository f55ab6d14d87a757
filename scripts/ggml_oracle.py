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
  {"op": "llama_model", "output": "m.gguf", "dtype": "F32" | "F16", "seed": 1, "n_layer": 8,
   "n_embd": 256, "n_ff": 352, "n_head": 8, "n_head_kv": 2, "n_vocab": 300, "tied": false,
   "extra": [[name, rows, cols], ...]}
      A llama-architecture GGUF as llama.cpp's converter lays it out (the hyperparameters
      llama-quantize reads; token_embd, blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,
      ffn_up,ffn_down,attn_norm,ffn_norm}, output_norm, output unless tied, and any extra
      2-D weights), random normal values; 1-D tensors F32, the others in `dtype`.

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


def llama_model(job):
    rng = np.random.default_rng(job.get("seed", 1))
    n_layer, n_embd, n_ff = job["n_layer"], job["n_embd"], job["n_ff"]
    n_head, n_head_kv, n_vocab = job["n_head"], job["n_head_kv"], job["n_vocab"]
    head_dim = n_embd // n_head
    dtype = {"F32": np.float32, "F16": np.float16}[job.get("dtype", "F32")]
    w = gguf.GGUFWriter(job["output"], "llama")
    w.add_name("ggml peer test model")
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(0 if dtype == np.float32 else 1)

    def mat(name, rows, cols):
        # Rows of varying scale, some outliers: a realistic spread for the quantizers.
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        x *= rng.uniform(0.01, 0.2, size=(rows, 1)).astype(np.float32)
        x[rng.random((rows, cols)) < 0.001] *= 20
        w.add_tensor(name, x.astype(dtype))

    def vec(name, n):
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        vec(f"blk.{i}.attn_norm.weight", n_embd)
        mat(f"blk.{i}.attn_q.weight", n_embd, n_embd)
        mat(f"blk.{i}.attn_k.weight", head_dim * n_head_kv, n_embd)
        mat(f"blk.{i}.attn_v.weight", head_dim * n_head_kv, n_embd)
        mat(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        vec(f"blk.{i}.ffn_norm.weight", n_embd)
        mat(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        mat(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        mat(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    vec("output_norm.weight", n_embd)
    if not job.get("tied", False):
        mat("output.weight", n_vocab, n_embd)
    for name, rows, cols in job.get("extra", []):
        mat(name, rows, cols)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


OPS = {"dequantize": dequantize, "quantize": quantize, "write_gguf": write_gguf,
       "read_gguf": read_gguf, "sizes": sizes, "llama_model": llama_model}


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
