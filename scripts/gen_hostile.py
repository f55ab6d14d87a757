#!/usr/bin/env python3
"""Write a corpus of hostile SafeTensors (and GGUF) files into OUTDIR, with a manifest.

    python scripts/gen_hostile.py OUTDIR

Every validation rule of the SafeTensors format is broken at least once, plus the shapes of
input that hurt parsers: header lengths of 2^64-1 and just over the 100,000,000-byte limit,
offsets past the end of the file, shape products that overflow, 100,000-deep JSON nesting,
NUL/BOM/whitespace around the JSON, duplicate names, a million tiny tensors, negative and
float shapes, non-string metadata, and so on. A few valid-but-odd files ride along, so that
"accept" is tested as much as "reject".

OUTDIR/manifest.json lists, per file: `file`, `format` ("safetensors" or "gguf"), `what`
(the case), `rule` (the rule it breaks, or "valid"), `expected_code` (the error code
safetensors-node must give, or null when the file must be accepted), `reference` (what the
reference implementation did: `safetensors.safe_open(path, "np")` for SafeTensors,
`gguf.GGUFReader(path)` for GGUF, in a child process with 2 GiB of address space — as
`{"accepted": bool, "tensors": n}` or `{"accepted": false, "error": "<exception text>",
"code": "<our code for the rule its message names>"}`), and, where our verdict or code
deliberately differs from the reference's, `divergence` with the reason.

Needs the `safetensors` package (and `gguf` for the GGUF verdicts): run it with the
project's .venv python. Writes about 180 MB; takes 15-30 s (most of it the reference
parsing the million-tensor header).
"""

import json
import os
import struct
import sys

MAX_HEADER = 100_000_000


def u64(n):
    return struct.pack("<Q", n)


def st_file(header, data=b""):
    """A SafeTensors file: 8-byte length, the header exactly as given, then the data."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return u64(len(header)) + header + data


def entry(name, dtype, shape, start, end):
    return f'"{name}":{{"dtype":"{dtype}","shape":{json.dumps(shape)},"data_offsets":[{start},{end}]}}'


OK_ENTRY = entry("a", "F32", [2], 0, 8)
OK = "{" + OK_ENTRY + "}"
OK_DATA = struct.pack("<2f", 1.5, -2.0)

CODES = {
    "too_small": "ERR_HEADER_TOO_SMALL",
    "too_large": "ERR_HEADER_TOO_LARGE",
    "header": "ERR_INVALID_HEADER",
    "offsets": "ERR_INVALID_OFFSETS",
    "size": "ERR_SIZE_MISMATCH",
    "incomplete": "ERR_INCOMPLETE_FILE",
    "gguf": "ERR_INVALID_GGUF",
    "valid": None,
}


def safetensors_cases():
    """(file name, what, rule, bytes or a writer function, divergence or None)."""
    c = []

    def add(name, what, rule, content, divergence=None):
        c.append((name + ".safetensors", what, rule, content, divergence))

    # --- the length prefix ---
    add("empty", "empty file", "too_small", b"")
    add("seven_bytes", "7 bytes, shorter than the length prefix", "too_small", b"\x02\x00\x00\x00\x00\x00\x00")
    add("len_u64_max", "header length 2^64-1", "too_large", u64(2**64 - 1) + b"{}")
    add("len_2_63", "header length 2^63", "too_large", u64(2**63) + b"{}")
    add("len_limit_plus_1", "header length 100,000,001 (one over the limit)", "too_large", u64(MAX_HEADER + 1) + b"{}" + b" " * 64)
    add("len_limit_short_file", "header length exactly 100,000,000 in a 74-byte file", "header", u64(MAX_HEADER) + b"{}" + b" " * 64)
    add("len_one_past_eof", "header length one byte past the end of the file", "header", u64(len(OK) + 9) + OK.encode() + OK_DATA)
    add("len_zero", "header length 0 (empty JSON text)", "header", u64(0))

    def limit_header(f):
        # A header of exactly the limit: '{}' and 99,999,998 spaces. Valid.
        f.write(u64(MAX_HEADER) + b"{}")
        chunk = b" " * (1 << 20)
        left = MAX_HEADER - 2
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n

    add("header_at_limit", "header exactly 100,000,000 bytes ('{}' padded with spaces)", "valid", limit_header)

    # --- encoding and JSON syntax ---
    add("not_utf8", "0xFF byte inside a key", "header", st_file(b'{"\xff":1}'))
    add("overlong_utf8", "overlong UTF-8 encoding of '/' (C0 AF) in a name", "header", st_file(b'{"a\xc0\xaf":' + OK_ENTRY.split(":", 1)[1].encode() + b"}", OK_DATA))
    add("utf8_surrogate", "UTF-8-encoded surrogate (ED A0 80) in a name", "header", st_file(b'{"\xed\xa0\x80":' + OK_ENTRY.split(":", 1)[1].encode() + b"}", OK_DATA))
    add("escaped_lone_surrogate", "JSON escape of a lone surrogate (\\ud800) as a name", "header", st_file('{"\\ud800":' + OK_ENTRY.split(":", 1)[1] + "}", OK_DATA))
    add("not_json", "header is plain text", "header", st_file("hello world"))
    add("json_array", "header is a JSON array", "header", st_file("[]"))
    add("json_string", "header is a JSON string", "header", st_file('"{}"'))
    add("json_null", "header is JSON null", "header", st_file("null"))
    add("trailing_garbage", "JSON followed by another token", "header", st_file(OK + "x", OK_DATA))
    add("trailing_nul", "NUL after the JSON", "header", st_file(OK + "\0", OK_DATA))
    add("leading_nul", "NUL before the JSON", "header", st_file("\0" + OK, OK_DATA))
    add("bom", "UTF-8 byte-order mark before the JSON", "header", st_file(b"\xef\xbb\xbf" + OK.encode(), OK_DATA))
    add("whitespace_around", "spaces, tabs, CR and LF before and after the JSON", "valid", st_file(" \t\r\n" + OK + "\n\t  \r", OK_DATA))
    add("form_feed", "form feed (not JSON whitespace) before the JSON", "header", st_file("\f" + OK, OK_DATA))
    add("nbsp_after", "no-break space (U+00A0) after the JSON", "header", st_file(OK + "\u00a0", OK_DATA))
    add("leading_zero_number", "number with a leading zero in a shape", "header", st_file('{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}', OK_DATA))

    # --- deep nesting ---
    deep = 100_000
    add("deep_top_open", "100,000 '[' and nothing else", "header", st_file("[" * deep))
    add("deep_top_balanced", "100,000 nested arrays, balanced", "header", st_file("[" * deep + "]" * deep))
    add("deep_in_shape", "a shape nested 100,000 deep", "header", st_file('{"a":{"dtype":"F32","shape":' + "[" * deep + "]" * deep + ',"data_offsets":[0,0]}}'))
    add("deep_in_metadata", "a metadata value nested 100,000 deep", "header", st_file('{"__metadata__":{"k":' + "[" * deep + "]" * deep + "}}"))
    add("deep_unknown_field", "an unknown entry field nested 100,000 deep (objects)", "header", st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":' + '{"y":' * deep + "1" + "}" * deep + "}}", OK_DATA))
    add("nested_unknown_field_30", "an unknown entry field nested 30 deep (ignored)", "valid", st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":' + "[" * 30 + "]" * 30 + "}}", OK_DATA))

    # --- __metadata__ ---
    add("metadata_number", "__metadata__ value is a number", "header", st_file('{"__metadata__":{"a":1}}'))
    add("metadata_null_value", "__metadata__ value is null", "header", st_file('{"__metadata__":{"a":null}}'))
    add("metadata_nested", "__metadata__ value is an object", "header", st_file('{"__metadata__":{"a":{"b":"c"}}}'))
    add("metadata_string", "__metadata__ is a string, not a map", "header", st_file('{"__metadata__":"format=pt"}'))
    add("metadata_array", "__metadata__ is an array", "header", st_file('{"__metadata__":["a","b"]}'))
    add("metadata_null", "__metadata__ is null (no metadata)", "valid", st_file('{"__metadata__":null,' + OK_ENTRY + "}", OK_DATA))
    add("metadata_tensor_shaped", "__metadata__ holds a tensor entry", "header", st_file('{"__metadata__":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'))
    add("metadata_twice", "__metadata__ given twice", "header", st_file('{"__metadata__":{"a":"1"},"__metadata__":{"a":"2"}}'))

    # --- tensor entries ---
    add("duplicate_names", "the same tensor name twice", "header",
        st_file("{" + entry("a", "U8", [1], 0, 1) + "," + entry("a", "U8", [1], 1, 2) + "}", b"\x01\x02"),
        divergence="duplicate names are ambiguous (which one is meant?): we refuse the file as ERR_INVALID_HEADER; the reference keeps the last entry silently, and here then fails on the offsets it left uncovered")
    add("duplicate_names_same_info", "the same entry written twice", "header",
        st_file("{" + OK_ENTRY + "," + OK_ENTRY + "}", OK_DATA),
        divergence="duplicate names are refused even when both entries agree; the reference keeps the last and accepts")
    add("entry_not_object", "a tensor entry that is a number", "header", st_file('{"a":5}'))
    add("unknown_dtype", "dtype F128", "header", st_file(entry("a", "F128", [1], 0, 16).join("{}"), b"\0" * 16))
    add("lowercase_dtype", "dtype 'f32' (names are case-sensitive)", "header", st_file(entry("a", "f32", [2], 0, 8).join("{}"), OK_DATA))
    add("dtype_number", "dtype given as a number", "header", st_file('{"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}}', OK_DATA))
    add("missing_dtype", "entry without dtype", "header", st_file('{"a":{"shape":[2],"data_offsets":[0,8]}}', OK_DATA))
    add("missing_shape", "entry without shape", "header", st_file('{"a":{"dtype":"F32","data_offsets":[0,8]}}', OK_DATA))
    add("missing_offsets", "entry without data_offsets", "header", st_file('{"a":{"dtype":"F32","shape":[2]}}', OK_DATA))
    add("negative_shape", "shape [-1]", "header", st_file('{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}}', OK_DATA))
    add("float_shape", "shape [2.0]", "header", st_file('{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', OK_DATA))
    add("exponent_shape", "shape [2e0]", "header", st_file('{"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}', OK_DATA))
    add("string_shape", "shape ['2']", "header", st_file('{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}', OK_DATA))
    add("shape_2_64", "a dimension of 2^64 (does not fit in u64)", "header", st_file('{"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}}'))
    add("offsets_three", "data_offsets with three numbers", "header", st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}', OK_DATA))
    add("offsets_negative", "data_offsets [-8, 0]", "header", st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}', OK_DATA))
    add("offsets_float", "data_offsets [0, 8.0]", "header", st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}}', OK_DATA))

    # --- offsets ---
    add("offsets_not_from_zero", "the first tensor starts at 4", "offsets", st_file(entry("a", "F32", [1], 4, 8).join("{}"), OK_DATA))
    add("offsets_gap", "a gap between two tensors", "offsets", st_file("{" + entry("a", "U8", [1], 0, 1) + "," + entry("b", "U8", [1], 2, 3) + "}", b"\0" * 3))
    add("offsets_overlap", "two tensors overlapping", "offsets", st_file("{" + entry("a", "U8", [2], 0, 2) + "," + entry("b", "U8", [2], 1, 3) + "}", b"\0" * 3))
    add("offsets_end_before_start", "end before start", "offsets", st_file("{" + entry("a", "U8", [0], 0, 0) + "," + entry("b", "U8", [0], 2, 0) + "}", b"\0" * 2))
    add("offsets_past_eof", "a tensor ending past the end of the file", "incomplete", st_file(entry("a", "F32", [4], 0, 16).join("{}"), OK_DATA))
    add("offsets_far_past_eof", "a 2^60-byte tensor in a tiny file", "incomplete", st_file(entry("a", "U8", [2**60], 0, 2**60).join("{}"), b"\0" * 8))
    sixteen = ",".join(entry(f"t{i:02}", "U8", [(2**64 - 1 if i == 15 else (i + 1) * 2**60) - i * 2**60], i * 2**60, 2**64 - 1 if i == 15 else (i + 1) * 2**60) for i in range(16))
    add("offsets_sum_u64_max", "sixteen tensors whose data ends at 2^64-1", "incomplete", st_file("{" + sixteen + "}", b"\0" * 16))

    # --- sizes ---
    add("shape_product_overflow", "shape [2^32, 2^32, 16]: element count overflows u64", "size", st_file(entry("a", "F32", [2**32, 2**32, 16], 0, 8).join("{}"), OK_DATA))
    add("shape_bits_overflow", "shape [2^61] F32: bit count overflows u64", "size", st_file(entry("a", "F32", [2**61], 0, 8).join("{}"), OK_DATA))
    add("shape_mismatch", "shape [3] F32 in 8 bytes", "size", st_file(entry("a", "F32", [3], 0, 8).join("{}"), OK_DATA))
    add("f4_half_byte", "3 elements of F4 (a byte and a half)", "size", st_file(entry("a", "F4", [3], 0, 2).join("{}"), b"\0\0"))
    add("f6_one_element", "1 element of F6_E2M3 (six bits)", "size", st_file(entry("a", "F6_E2M3", [1], 0, 1).join("{}"), b"\0"))
    add("truncated_data", "data one byte short", "incomplete", st_file(OK, OK_DATA[:-1]))
    add("trailing_data", "one byte after the data", "incomplete", st_file(OK, OK_DATA + b"\0"))
    add("empty_header_with_data", "'{}' followed by data", "incomplete", st_file("{}", b"\0" * 4))

    # --- valid but odd ---
    add("empty_header", "'{}' and nothing else", "valid", st_file("{}"))
    add("metadata_only", "__metadata__ and no tensors", "valid", st_file('{"__metadata__":{"format":"pt"}}'))
    add("empty_name", "a tensor named ''", "valid", st_file(entry("", "F32", [2], 0, 8).join("{}"), OK_DATA))
    add("nul_in_name", "a tensor named '\\u0000' (escaped NUL)", "valid", st_file('{"\\u0000":' + OK_ENTRY.split(":", 1)[1] + "}", OK_DATA))
    add("proto_names", "tensors named '__proto__' and 'constructor'", "valid", st_file("{" + entry("__proto__", "F32", [1], 0, 4) + "," + entry("constructor", "F32", [1], 4, 8) + "}", OK_DATA))
    add("long_name", "a 1 MiB tensor name", "valid", st_file(entry("n" * (1 << 20), "F32", [2], 0, 8).join("{}"), OK_DATA))
    add("zero_size_huge_dims", "shape [0, 2^40, 2^40] (zero elements)", "valid", st_file(entry("z", "F32", [0, 2**40, 2**40], 0, 0).join("{}")))
    add("zero_size_u64_max_dim", "shape [0, 2^64-1] (zero elements)", "valid", st_file(entry("z", "U8", [0, 2**64 - 1], 0, 0).join("{}")))
    add("unsorted_offsets", "entries listed out of data order", "valid", st_file("{" + entry("b", "U8", [1], 1, 2) + "," + entry("a", "U8", [1], 0, 1) + "}", b"\x07\x09"))

    def million(broken):
        def write(f):
            n = 250_000 if broken else 1_000_000
            parts = [entry(f"t{i:07}", "U8", [1], i, i + 1) for i in range(n - 1)]
            last = n - 1
            start = last + 1 if broken else last
            parts.append(entry(f"t{last:07}", "U8", [1], start, start + 1))
            header = ("{" + ",".join(parts) + "}").encode()
            f.write(u64(len(header)) + header + bytes(i & 0xFF for i in range(n + (1 if broken else 0))))
        return write

    add("million_tensors", "1,000,000 one-byte tensors", "valid", million(False))
    add("many_tensors_last_gap", "250,000 one-byte tensors, a gap before the last", "offsets", million(True))
    return c


# --- GGUF ---


def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def gguf(version=3, n_tensors=None, n_kv=None, kv=b"", infos=b"", data=b"", tensors=0, kvs=0):
    head = b"GGUF" + struct.pack("<I", version)
    head += u64(tensors if n_tensors is None else n_tensors) + u64(kvs if n_kv is None else n_kv) + kv + infos
    if data:
        head += b"\0" * ((-len(head)) % 32)
    return head + data


def kv_string(key, value):
    return gguf_str(key) + struct.pack("<I", 8) + gguf_str(value)


def tensor_info(name, ne, ggml_type, offset):
    return gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(u64(d) for d in ne) + struct.pack("<I", ggml_type) + u64(offset)


LENIENT_GGUF_PY = (
    "gguf-py's reader slices its memory map without bounds checks, so it 'reads' a string or "
    "tensor list cut off by the end of the file as whatever bytes remain; ggml's own reader "
    "(gguf.cpp), whose rules ours follows, refuses the file"
)


def gguf_cases():
    arch = kv_string("general.architecture", "llama")
    good_info = tensor_info("w", [4], 0, 0)
    good_data = struct.pack("<4f", 1, 2, 3, 4)
    c = []

    def add(name, what, content, divergence=None):
        c.append((name + ".gguf", what, "gguf", content, divergence))

    add("truncated_after_version", "magic and version only", b"GGUF" + struct.pack("<I", 3))
    add("tensor_count_u64_max", "tensor count 2^64-1 in a small file", gguf(n_tensors=2**64 - 1, kv=arch, kvs=1))
    add("kv_count_2_63", "metadata count 2^63 in a small file", gguf(n_kv=2**63, kv=arch))
    add("key_length_u64_max", "a key whose length is 2^64-1", gguf(kv=u64(2**64 - 1) + b"general.architecture", kvs=1))
    add("string_value_2_40", "a string value of length 2^40", gguf(kv=gguf_str("general.architecture") + struct.pack("<I", 8) + u64(2**40) + b"llama", kvs=1), divergence=LENIENT_GGUF_PY)
    add("array_count_2_62", "a UINT32 array claiming 2^62 elements", gguf(kv=arch + gguf_str("a") + struct.pack("<II", 9, 4) + u64(2**62) + b"\0" * 16, kvs=2))
    add("unknown_value_type", "metadata value type 99", gguf(kv=gguf_str("k") + struct.pack("<I", 99) + b"\0" * 8, kvs=1))
    add("version_1", "version 1", gguf(version=1, kv=arch, kvs=1))
    add("dims_overflow", "a tensor of 2^32 x 2^32 x 2^32 elements", gguf(kv=arch, kvs=1, infos=tensor_info("w", [2**32, 2**32, 2**32], 0, 0), tensors=1, data=good_data))
    add("offset_past_eof", "tensor data offset far past the end", gguf(kv=arch, kvs=1, infos=tensor_info("w", [4], 0, 2**40), tensors=1, data=good_data))
    add("data_truncated", "tensor data cut short", gguf(kv=arch, kvs=1, infos=good_info, tensors=1, data=good_data)[:-3])
    add("tensor_count_lies_small", "two tensors claimed, one present", gguf(n_tensors=2, kv=arch, kvs=1, infos=good_info, data=good_data), divergence=LENIENT_GGUF_PY)
    return c


# --- reference verdicts ---


REFERENCE_MESSAGES = [
    ("header too small", "ERR_HEADER_TOO_SMALL"),
    ("header too large", "ERR_HEADER_TOO_LARGE"),
    ("invalid header length", "ERR_INVALID_HEADER"),
    ("invalid UTF-8", "ERR_INVALID_HEADER"),
    ("invalid JSON", "ERR_INVALID_HEADER"),
    ("invalid offset", "ERR_INVALID_OFFSETS"),
    ("overflow computing buffer size", "ERR_SIZE_MISMATCH"),
    ("invalid shape, data type, or offset", "ERR_SIZE_MISMATCH"),
    ("slicing for subbytes", "ERR_SIZE_MISMATCH"),
    ("incomplete metadata", "ERR_INCOMPLETE_FILE"),
]


def reference_code(message):
    """Our code for the rule the reference's error message names."""
    for text, code in REFERENCE_MESSAGES:
        if text in message:
            return code
    return None


def reference_safetensors(path, small):
    from safetensors import safe_open

    try:
        with safe_open(path, "np") as f:
            names = list(f.keys())
            unreadable = []
            if small:
                for name in names:
                    try:
                        f.get_tensor(name)
                    except Exception as e:  # numpy has no BF16/FP8: noted, not a verdict
                        unreadable.append(f"{name}: {type(e).__name__}: {e}"[:200])
        out = {"accepted": True, "tensors": len(names)}
        if unreadable:
            out["unreadable_in_numpy"] = unreadable
        return out
    except Exception as e:
        message = f"{type(e).__name__}: {e}"
        return {"accepted": False, "error": message[:500], "code": reference_code(message)}


GGUF_REFERENCE_CHILD = """
import json, resource, sys
# The reference reader believes the counts it reads: cap its address space so a lying count
# ends in MemoryError instead of the machine's OOM killer.
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from gguf import GGUFReader
for path in sys.argv[1:]:
    try:
        reader = GGUFReader(path)
        out = {"accepted": True, "tensors": len(reader.tensors)}
    except BaseException as e:
        out = {"accepted": False, "error": (type(e).__name__ + ": " + str(e))[:500], "code": "ERR_INVALID_GGUF"}
    print(json.dumps([path, out]), flush=True)
"""


def reference_gguf(paths):
    """`gguf.GGUFReader(path)` for each path, in a child process with 2 GiB of address space
    and 60 s; a file that kills the child is retried alone."""
    import subprocess

    try:
        import gguf  # noqa: F401
    except ImportError:
        return {p: {"accepted": None, "error": "gguf package not installed"} for p in paths}
    verdicts = {}
    todo = list(paths)
    while todo:
        try:
            r = subprocess.run([sys.executable, "-c", GGUF_REFERENCE_CHILD, *todo], capture_output=True, text=True, timeout=60)
            stdout, died = r.stdout, f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
        except subprocess.TimeoutExpired as e:
            stdout, died = (e.stdout or b"").decode(), "did not finish in 60 s"
        for line in stdout.splitlines():
            path, verdict = json.loads(line)
            verdicts[path] = verdict
        todo = [p for p in todo if p not in verdicts]
        if todo:
            verdicts[todo[0]] = {"accepted": False, "error": f"reference reader died ({died})", "code": "ERR_INVALID_GGUF"}
            todo = todo[1:]
    return verdicts


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = []
    gguf_paths = []
    for (name, what, rule, content, divergence), fmt in [(c, "safetensors") for c in safetensors_cases()] + [
        (c, "gguf") for c in gguf_cases()
    ]:
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
        size = os.path.getsize(path)
        item = {
            "file": name,
            "format": fmt,
            "what": what,
            "rule": rule,
            "expected_code": CODES[rule],
            "bytes": size,
        }
        if fmt == "safetensors":
            item["reference"] = reference_safetensors(path, small=size < (1 << 20))
        else:
            gguf_paths.append(path)
        if divergence:
            item["divergence"] = divergence
        manifest.append(item)
    verdicts = reference_gguf(gguf_paths)
    for item in manifest:
        if item["format"] == "gguf":
            item["reference"] = verdicts[os.path.join(out, item["file"])]
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    disagree = [
        m["file"]
        for m in manifest
        if m["reference"]["accepted"] is not None
        and (m["reference"]["accepted"] != (m["expected_code"] is None) or m["reference"].get("code") != m["expected_code"])
        and "divergence" not in m
    ]
    print(f"{len(manifest)} files in {out}; reference verdict differs from the expected one (undocumented): {disagree or 'none'}")


if __name__ == "__main__":
    main()
