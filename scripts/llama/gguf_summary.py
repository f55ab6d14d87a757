#!/usr/bin/env python3
"""Summarise a GGUF file as JSON for comparisons: every key/value (arrays as their element
type, length and the SHA-256 of their canonical JSON, so token lists stay small), and every
tensor's ggml type, shape (row-major, outermost first) and the SHA-256 of its bytes.

Read with gguf-py (llama.cpp's own reader), independent of the writer under test.

usage: gguf_summary.py FILE.gguf [--values]   (--values: arrays in full, for debugging)
"""
import hashlib
import json
import sys

from gguf import GGUFReader, GGUFValueType


def value_of(field, full):
    types = field.types
    if not types:
        return None
    if types[0] == GGUFValueType.ARRAY:
        item = types[-1]
        if item == GGUFValueType.STRING:
            items = [bytes(field.parts[i]).decode('utf-8', 'surrogateescape') for i in field.data]
        else:
            items = [field.parts[i].tolist()[0] for i in field.data]
        if full:
            return {'array': item.name, 'values': items}
        canon = json.dumps(items, ensure_ascii=False, separators=(',', ':'))
        return {'array': item.name, 'len': len(items),
                'sha256': hashlib.sha256(canon.encode('utf-8', 'surrogateescape')).hexdigest()}
    if types[0] == GGUFValueType.STRING:
        return {'type': 'STRING', 'value': bytes(field.parts[-1]).decode('utf-8', 'surrogateescape')}
    return {'type': types[0].name, 'value': field.parts[-1].tolist()[0]}


def summarise(path, full=False):
    reader = GGUFReader(path)
    kv = {}
    for name, field in reader.fields.items():
        if name.startswith('GGUF.'):
            continue
        kv[name] = value_of(field, full)
    tensors = {}
    for t in reader.tensors:
        tensors[t.name] = {
            'type': t.tensor_type.name,
            'shape': [int(d) for d in reversed(t.shape.tolist())],
            'sha256': hashlib.sha256(t.data.tobytes()).hexdigest(),
        }
    return {'kv': kv, 'tensors': tensors}


if __name__ == '__main__':
    print(json.dumps(summarise(sys.argv[1], '--values' in sys.argv[2:]), indent=1, ensure_ascii=False))
