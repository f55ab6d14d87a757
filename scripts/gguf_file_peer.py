#!/usr/bin/env python3
"""gguf-py (llama.cpp's Python package) as the peer of __test__/gguf-file.spec.ts.

  gguf_file_peer.py DIR

Writes DIR/all.gguf with gguf-py's GGUFWriter: metadata of every GGUF value type (scalars
at their extremes, arrays of every element type) and one tensor of every ggml type that
gguf.quants.dequantize decodes plus the plain types, filled with seeded random bytes (block
scales included, so some are subnormal, infinite or NaN), with row counts that are not
multiples of anything convenient. Then reads the file back with GGUFReader and writes what
gguf-py sees:

  DIR/expected.json  {version, alignment, data_offset, metadata: {key: {types, value}},
                      tensors: [{name, type, shape (row-major), n_elements, n_bytes,
                      data_offset, raw, values}], skipped: [types gguf-py cannot dequantize]}
  DIR/<i>.raw        the tensor's stored bytes as GGUFReader gives them
  DIR/<i>.f32        gguf.quants.dequantize of them (little-endian float32), for block types
                     and F32/F16/BF16
  DIR/bighead.gguf   a file whose header (a 40,000-token vocabulary) is ~700 KB, for remote reads

64-bit integers are written as decimal strings (JSON numbers would round them).
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V
from gguf.constants import GGML_QUANT_SIZES

PLAIN_INTS = {T.I8: np.int8, T.I16: np.int16, T.I32: np.int32, T.I64: np.int64}

METADATA = [
    ("test.u8", 255, V.UINT8, None),
    ("test.i8", -128, V.INT8, None),
    ("test.u16", 65535, V.UINT16, None),
    ("test.i16", -32768, V.INT16, None),
    ("test.u32", 4294967295, V.UINT32, None),
    ("test.i32", -2147483648, V.INT32, None),
    ("test.f32", 0.1, V.FLOAT32, None),
    ("test.f64", 1 / 3, V.FLOAT64, None),
    ("test.bool_true", True, V.BOOL, None),
    ("test.bool_false", False, V.BOOL, None),
    ("test.string", "h\u00e9llo \u2713 \U0001F600", V.STRING, None),
    ("test.empty_string", "", V.STRING, None),
    ("test.u64_max", 2**64 - 1, V.UINT64, None),
    ("test.u64_small", 5, V.UINT64, None),
    ("test.i64_min", -(2**63), V.INT64, None),
    ("test.i64_odd", 2**53 + 1, V.INT64, None),
    ("test.arr_u8", [0, 255, 7], V.ARRAY, V.UINT8),
    ("test.arr_i8", [-128, 127, 0], V.ARRAY, V.INT8),
    ("test.arr_u16", [0, 65535], V.ARRAY, V.UINT16),
    ("test.arr_i16", [-32768, 32767, -1], V.ARRAY, V.INT16),
    ("test.arr_u32", [4294967295, 1], V.ARRAY, V.UINT32),
    ("test.arr_i32", [1, -2, 2147483647], V.ARRAY, V.INT32),
    ("test.arr_f32", [0.5, -1e-3, 3.4e38, 1e-45], V.ARRAY, V.FLOAT32),
    ("test.arr_f64", [1 / 3, -2.5e-300], V.ARRAY, V.FLOAT64),
    ("test.arr_u64", [2**64 - 1, 0, 2**53 + 1], V.ARRAY, V.UINT64),
    ("test.arr_i64", [-(2**63), 2**63 - 1, -3], V.ARRAY, V.INT64),
    ("test.arr_bool", [True, False, True], V.ARRAY, V.BOOL),
    ("test.arr_str", ["a", "", "\u00fc\u00df", "__proto__"], V.ARRAY, V.STRING),
]

SIXTY_FOUR = {V.UINT64, V.INT64}


def json_value(types, value):
    """A GGUFReader value for JSON: 64-bit integers as strings, numpy scalars as Python."""
    sub = types[-1]
    if isinstance(value, list):
        return [json_value([sub], v) for v in value]
    if isinstance(value, np.ndarray):
        value = value.tolist()
        return [str(v) if sub in SIXTY_FOUR else v for v in value] if isinstance(value, list) else value
    if isinstance(value, np.generic):
        value = value.item()
    if sub in SIXTY_FOUR and not isinstance(value, str):
        return str(int(value))
    return value


def random_blocks(rng, qtype, rows, cols):
    block, size = GGML_QUANT_SIZES[qtype]
    if qtype in PLAIN_INTS:
        info = np.iinfo(PLAIN_INTS[qtype])
        values = rng.integers(info.min, info.max, size=rows * cols, dtype=PLAIN_INTS[qtype], endpoint=True)
        values[:2] = [info.min, info.max]
        return values.tobytes()
    if qtype == T.F32:
        values = rng.standard_normal(rows * cols).astype(np.float32)
        specials = np.array([np.inf, -0.0, 1e-45, 16777216.0], dtype=np.float32)
        values[:4] = specials[: min(4, values.size)]
        return values.tobytes()
    if qtype == T.F64:
        values = rng.standard_normal(rows * cols)
        values[:3] = [2.0**53 + 2, -np.inf, 5e-324]
        return values.tobytes()
    # F16, BF16 and block types: random bytes (every bit pattern is a valid value or block).
    return rng.integers(0, 256, size=rows * (cols // block) * size, dtype=np.uint8).tobytes()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    rng = np.random.default_rng(20261123)
    path = os.path.join(out, "all.gguf")
    w = gguf.GGUFWriter(path, "peer")
    w.add_custom_alignment(64)
    for key, value, vtype, sub in METADATA:
        w.add_key_value(key, value, vtype, sub_type=sub)

    tensors = []  # (name, qtype, shape)
    skipped = []
    for i, qtype in enumerate(T):
        if qtype not in GGML_QUANT_SIZES:
            continue
        block, size = GGML_QUANT_SIZES[qtype]
        if block > 1:
            try:
                gguf.quants.dequantize(np.zeros((1, size), dtype=np.uint8), qtype)
            except NotImplementedError:
                skipped.append(qtype.name)
                continue
        # Row counts from 3 to 9, rows of 1 to 3 blocks (plain types: 5 to 7 elements).
        rows = 3 + (i * 5) % 7
        cols = block * (1 + i % 3) if block > 1 else 5 + i % 3
        shape = [rows, cols]
        if qtype in (T.Q8_0, T.F16):
            shape = [2, rows, cols]  # three dimensions
        tensors.append((f"t.{qtype.name.lower()}", qtype, shape))
    tensors.append(("t.vector", T.Q4_K, [256]))
    tensors.append(("t.empty", T.F32, [0, 4]))

    for name, qtype, shape in tensors:
        block, size = GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        raw = np.frombuffer(random_blocks(rng, qtype, rows, shape[-1]), dtype=np.uint8)
        byte_shape = shape[:-1] + [shape[-1] // block * size]
        w.add_tensor(name, raw.reshape(byte_shape), raw_shape=byte_shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(path)
    metadata = {}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        types = [t.name for t in field.types]
        metadata[key] = {"types": types, "value": json_value(field.types, field.contents())}
    listed = []
    with np.errstate(all="ignore"):
        for i, t in enumerate(r.tensors):
            raw = np.ascontiguousarray(t.data).tobytes()
            with open(os.path.join(out, f"{i}.raw"), "wb") as f:
                f.write(raw)
            values = None
            if t.tensor_type not in PLAIN_INTS and t.tensor_type != T.F64:
                data = np.frombuffer(raw, dtype=np.uint8)
                if t.tensor_type == T.F32:
                    decoded = data.view(np.float32)
                else:
                    decoded = gguf.quants.dequantize(data.reshape(-1, GGML_QUANT_SIZES[t.tensor_type][1]), t.tensor_type)
                values = f"{i}.f32"
                np.ascontiguousarray(decoded, dtype=np.float32).tofile(os.path.join(out, values))
            listed.append({
                "name": t.name,
                "type": t.tensor_type.name,
                "shape": [int(d) for d in reversed(t.shape.tolist())],
                "n_elements": int(t.n_elements),
                "n_bytes": int(t.n_bytes),
                "data_offset": int(t.data_offset),
                "raw": f"{i}.raw",
                "values": values,
            })
    expected = {
        "version": int(r.fields["GGUF.version"].contents()),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "metadata": metadata,
        "tensors": listed,
        "skipped": skipped,
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)

    # A header far larger than one first request (a vocabulary of 40,000 tokens, ~700 KB)
    # before ~4.4 MB of tensors: what a remote reader must grow its header read for.
    w = gguf.GGUFWriter(os.path.join(out, "bighead.gguf"), "peer")
    w.add_key_value("tokenizer.ggml.tokens", [f"token_{i:05d}" for i in range(40000)], V.ARRAY, sub_type=V.STRING)
    w.add_key_value("tokenizer.ggml.scores", [float(-i) for i in range(40000)], V.ARRAY, sub_type=V.FLOAT32)
    for name, qtype, shape in [("a", T.Q8_0, [4096, 1024]), ("b", T.I32, [7, 3]), ("c", T.Q4_K, [3, 256])]:
        block, size = GGML_QUANT_SIZES[qtype]
        raw = np.frombuffer(random_blocks(rng, qtype, shape[0], shape[1]), dtype=np.uint8)
        byte_shape = [shape[0], shape[1] // block * size]
        w.add_tensor(name, raw.reshape(byte_shape), raw_shape=byte_shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(json.dumps({"ok": True, "tensors": len(listed)}))


if __name__ == "__main__":
    main()
