#!/usr/bin/env python3
"""Every key/value and tensor of GGUF files as gguf-py's GGUFReader reads them, as JSON (one
object per file given): `kv` maps each key, in file order, to its types and value (as Python
prints it, so float bits and 64-bit integers compare exactly), `tensors` each tensor's ggml
type, shape and the SHA-256 of its stored bytes.

usage: gguf_dump_peer.py FILE.gguf...
"""
import hashlib
import json
import sys

from gguf import GGUFReader


def dump(path):
    reader = GGUFReader(path)
    kv = {}
    for field in reader.fields.values():
        if field.name.startswith('GGUF.'):
            continue
        kv[field.name] = {'types': [t.name for t in field.types], 'value': repr(field.contents())}
    tensors = {}
    for t in reader.tensors:
        tensors[t.name] = {
            'type': t.tensor_type.name,
            'shape': [int(d) for d in t.shape],
            'sha256': hashlib.sha256(t.data.tobytes()).hexdigest(),
        }
    return {'keys': list(kv), 'kv': kv, 'tensors': tensors}


if __name__ == '__main__':
    print(json.dumps([dump(p) for p in sys.argv[1:]]))
