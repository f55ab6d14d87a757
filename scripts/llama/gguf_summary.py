#!/usr/bin/env python3
"""Summarise a GGUF file as JSON for comparisons: every key/value (arrays as their element
type, length and the SHA-256 of their canonical JSON, so token lists stay small), and every
tensor's ggml type, shape (row-major, outermost first) and the SHA-256 of its bytes.

The file is read straight from the GGUF layout (gguf-py supplies the type names and block
sizes): gguf-py's GGUFReader builds a numpy view per array element, which takes half a
minute for a 150k-token vocabulary. Independent of the writer under test.

usage: gguf_summary.py FILE.gguf [--values]   (--values: arrays in full, for debugging)
"""
import hashlib
import json
import mmap
import struct
import sys

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

SCALARS = {
    GGUFValueType.UINT8: '<B', GGUFValueType.INT8: '<b', GGUFValueType.UINT16: '<H',
    GGUFValueType.INT16: '<h', GGUFValueType.UINT32: '<I', GGUFValueType.INT32: '<i',
    GGUFValueType.FLOAT32: '<f', GGUFValueType.BOOL: '<?', GGUFValueType.UINT64: '<Q',
    GGUFValueType.INT64: '<q', GGUFValueType.FLOAT64: '<d',
}


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take('<Q')
        s = bytes(self.data[self.pos:self.pos + n]).decode('utf-8', 'surrogateescape')
        self.pos += n
        return s

    def value(self, t):
        t = GGUFValueType(t)
        if t == GGUFValueType.STRING:
            return t, self.string()
        if t == GGUFValueType.ARRAY:
            item, n = GGUFValueType(self.take('<I')), self.take('<Q')
            if item in SCALARS:
                fmt = SCALARS[item]
                size = struct.calcsize(fmt)
                values = list(struct.unpack_from('<' + fmt[1] * n, self.data, self.pos))
                self.pos += size * n
                return (t, item), values
            return (t, item), [self.value(item)[1] for _ in range(n)]
        return t, self.take(SCALARS[t])


def summarise(path, full=False):
    with open(path, 'rb') as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    r = Reader(data)
    assert r.take('<4s') == b'GGUF', 'not a GGUF file'
    assert r.take('<I') == 3, 'not GGUF version 3'
    n_tensors, n_kv = r.take('<Q'), r.take('<Q')
    kv = {}
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        t, v = r.value(r.take('<I'))
        if key == 'general.alignment':
            alignment = v
        if isinstance(t, tuple):
            if full:
                kv[key] = {'array': t[1].name, 'values': v}
            else:
                canon = json.dumps(v, ensure_ascii=False, separators=(',', ':'))
                kv[key] = {'array': t[1].name, 'len': len(v),
                           'sha256': hashlib.sha256(canon.encode('utf-8', 'surrogateescape')).hexdigest()}
        else:
            kv[key] = {'type': t.name, 'value': v}
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.take('<Q') for _ in range(r.take('<I'))]
        ggml_type = GGMLQuantizationType(r.take('<I'))
        offset = r.take('<Q')
        infos.append((name, ne, ggml_type, offset))
    start = (r.pos + alignment - 1) // alignment * alignment
    tensors = {}
    for name, ne, ggml_type, offset in infos:
        block, size = GGML_QUANT_SIZES[ggml_type]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // block * size
        body = data[start + offset:start + offset + nbytes]
        assert len(body) == nbytes, f'{name}: data past the end of the file'
        tensors[name] = {
            'type': ggml_type.name,
            'shape': list(reversed(ne)),
            'sha256': hashlib.sha256(body).hexdigest(),
        }
    return {'kv': kv, 'tensors': tensors}


if __name__ == '__main__':
    print(json.dumps(summarise(sys.argv[1], '--values' in sys.argv[2:]), indent=1, ensure_ascii=False))
