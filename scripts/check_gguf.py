#!/usr/bin/env python3
"""Read a GGUF file with llama.cpp's own Python reader (the `gguf` package) and print JSON.

Used as an independent peer of safetensors-node's GGUF reader and writer.

  check_gguf.py FILE.gguf [--max-values N]
      {"version", "alignment", "metadata": {key: value}, "metadata_types": {key: type},
       "tensors": [{"name", "type", "shape" (outermost first), "n_bytes",
                    "values" (flat: dequantized with gguf.quants.dequantize; integer and
                    F64 tensors as stored; null for types gguf-py cannot dequantize)}]}

  check_gguf.py --compare-quant FILE.gguf --source SOURCE.safetensors [--map GGUF=SOURCE ...]
      For every Q8_0/Q4_0 tensor of FILE.gguf, quantize the same-named tensor of SOURCE (or
      the one given by --map) with gguf.quants.quantize and compare the bytes.
      {"all_equal", "tensors": [{"name", "source", "type", "n_blocks", "equal",
                                 "mismatched_blocks", "first_mismatch"}]}
      Exit status 0 when every compared tensor is identical (and at least one was compared).
      One known gguf-py deviation from ggml's C reference is tolerated and counted apart
      ("zero_scale_sign_blocks"): the sign of the zero scale of an all-zero Q4_0 block.

Non-finite floats are written as the strings "NaN", "Infinity" and "-Infinity".
"""

import argparse
import json
import math
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType

QUANTIZED = (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0)
# Stored as plain numbers: printed as they are (integers stay exact).
PLAIN_NUMBERS = (GGMLQuantizationType.I8, GGMLQuantizationType.I16, GGMLQuantizationType.I32,
                 GGMLQuantizationType.I64, GGMLQuantizationType.F64)


def json_float(v):
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def plain(v):
    """A JSON-ready copy of a metadata value as gguf-py returns it."""
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return json_float(v)
    return v


def field_value(field):
    try:
        return plain(field.contents())
    except UnicodeDecodeError:
        # Strings that are not UTF-8: decode leniently, part by part.
        if field.types and field.types[0] == GGUFValueType.ARRAY:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")


def field_type(field):
    names = [t.name for t in field.types]
    if not names:
        return None
    return names[0] if len(names) == 1 else names[0] + "[" + ",".join(names[1:]) + "]"


def summary(path, max_values):
    reader = GGUFReader(path)
    metadata, types = {}, {}
    version = None
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            if key == "GGUF.version":
                version = int(field.parts[field.data[0]][0])
            continue
        metadata[key] = field_value(field)
        types[key] = field_type(field)
    tensors = []
    for t in reader.tensors:
        qtype = GGMLQuantizationType(t.tensor_type)
        entry = {
            "name": t.name,
            "type": qtype.name,
            "shape": [int(d) for d in reversed(list(t.shape))],
            "n_bytes": int(t.n_bytes),
        }
        if qtype in PLAIN_NUMBERS:
            values = np.asarray(t.data).reshape(-1)[:max_values]
            entry["values"] = [plain(v) for v in values]
        else:
            try:
                values = gguf.quants.dequantize(t.data, qtype).reshape(-1)[:max_values]
                entry["values"] = [json_float(v) for v in values.astype(np.float64)]
            except NotImplementedError:
                entry["values"] = None
        tensors.append(entry)
    return {
        "version": version,
        "alignment": int(reader.alignment),
        "metadata": metadata,
        "metadata_types": types,
        "tensors": tensors,
    }


def compare_quant(path, source_path, mapping):
    from safetensors.numpy import load_file

    reader = GGUFReader(path)
    source = load_file(source_path)
    results = []
    for t in reader.tensors:
        qtype = GGMLQuantizationType(t.tensor_type)
        if qtype not in QUANTIZED:
            continue
        name = mapping.get(t.name, t.name)
        if name not in source:
            results.append({"name": t.name, "source": name, "type": qtype.name, "equal": None,
                            "skipped": "not in source"})
            continue
        data = np.ascontiguousarray(source[name]).astype(np.float32)
        expected = gguf.quants.quantize(data, qtype)
        ours = np.asarray(t.data).reshape(expected.shape)
        block_bytes = gguf.GGML_QUANT_SIZES[qtype][1]
        a = expected.reshape(-1, block_bytes)
        b = ours.reshape(-1, block_bytes)
        differs = (a != b).any(axis=1)
        # Known gguf-py deviation: for an all-zero Q4_0 block whose first value is -0.0, numpy
        # takes that -0.0 as the maximum and stores d = +0.0, where ggml's C reference keeps
        # its initial +0.0 maximum and stores d = -0.0 (f16 0x8000). Both decode to zeros.
        zero_sign = (
            differs
            & (a[:, 2:] == b[:, 2:]).all(axis=1)
            & ((a[:, :2].view(np.uint16) & 0x7FFF) == 0).reshape(-1)
            & ((b[:, :2].view(np.uint16) & 0x7FFF) == 0).reshape(-1)
            & (data.reshape(-1, 32) == 0).all(axis=1)
        )
        bad = np.nonzero(differs & ~zero_sign)[0]
        results.append({
            "name": t.name,
            "source": name,
            "type": qtype.name,
            "n_blocks": int(a.shape[0]),
            "equal": bool(bad.size == 0),
            "mismatched_blocks": int(bad.size),
            "first_mismatch": int(bad[0]) if bad.size else None,
            "zero_scale_sign_blocks": int(zero_sign.sum()),
        })
    compared = [r for r in results if r["equal"] is not None]
    return {"all_equal": bool(compared) and all(r["equal"] for r in compared), "tensors": results}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="GGUF file")
    p.add_argument("--max-values", type=int, default=None, help="values printed per tensor")
    p.add_argument("--compare-quant", action="store_true",
                   help="compare Q8_0/Q4_0 bytes with gguf-py's quantization of --source")
    p.add_argument("--source", help="safetensors file holding the unquantized tensors")
    p.add_argument("--map", action="append", default=[], metavar="GGUF=SOURCE",
                   help="source tensor name for a GGUF tensor name")
    args = p.parse_args()
    if args.compare_quant:
        if not args.source:
            p.error("--compare-quant needs --source")
        mapping = dict(m.split("=", 1) for m in args.map)
        out = compare_quant(args.path, args.source, mapping)
        json.dump(out, sys.stdout)
        print()
        return 0 if out["all_equal"] else 1
    json.dump(summary(args.path, args.max_values), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
