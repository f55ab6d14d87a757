#!/usr/bin/env python3
"""Regenerates crates/core/tests/data/pytorch/: checkpoints and arrays the shared starter set
(../shared/fixtures/pytorch) does not cover, with the values each must read back as, and more
hostile files. Same layout and `expected/` format as the shared set (see its README.md).

    python make_fixtures.py [OUTDIR]      (default: the folder of this script)

Needs torch (CPU) and numpy; tests need neither. Written by torch 2.15 / numpy 2.4 under
Python 3.11. Fixed seeds; torch.save writes a random `.data/serialization_id`, so regenerated
.pt files differ in those bytes only.
"""
import collections, io, json, math, os, pickle, struct, subprocess, sys, warnings, zipfile
import numpy as np
import torch

warnings.filterwarnings("ignore")
OUT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
torch.manual_seed(18)
RNG = np.random.default_rng(18)
CANARY_PREFIX = "/tmp/safetensors-node-canary-"

ST = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64", torch.int8: "I8",
      torch.int16: "I16", torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL",
      torch.uint16: "U16", torch.uint32: "U32", torch.uint64: "U64",
      torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2", torch.float8_e4m3fnuz: "F8_E4M3FNUZ",
      torch.float8_e5m2fnuz: "F8_E5M2FNUZ", torch.float8_e8m0fnu: "F8_E8M0", torch.complex64: "C64"}
NPST = {"f4": "F32", "f8": "F64", "f2": "F16", "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64", "u1": "U8",
        "u2": "U16", "u4": "U32", "u8": "U64", "b1": "BOOL", "c8": "C64"}
UPCAST = {"F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0"}
INLINE_MAX = 64


def jnum(x):
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return str(x) if abs(x) > 2**53 else x
    if isinstance(x, complex):
        return [jnum(x.real), jnum(x.imag)]
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def entry(raw, dt, shape, values, base, i, extra):
    e = {"dtype": dt, "shape": shape, **extra}
    if len(raw) <= INLINE_MAX:
        e["hex"] = raw.hex()
        e["values"] = values
    else:
        os.makedirs(os.path.join(OUT, "expected", base), exist_ok=True)
        e["bin"] = "%s/%d.bin" % (base, i)
        open(os.path.join(OUT, "expected", e["bin"]), "wb").write(raw)
    return e


def torch_entry(t, base, i):
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    dt = ST[t.dtype]
    raw = t.numpy().astype(np.uint8).tobytes() if t.dtype == torch.bool else t.reshape(-1).view(torch.uint8).numpy().tobytes()
    if t.dtype in (torch.uint16, torch.uint32, torch.uint64):
        vals = [jnum(int(v)) for v in t.reshape(-1).tolist()]
    else:
        vals = [jnum(v) for v in (t.float() if dt in UPCAST else t).reshape(-1).tolist()]
    return entry(raw, dt, list(t.shape), vals, base, i, {"torch_dtype": str(t.dtype)})


def np_entry(a, base, i):
    le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
    dt = NPST[le.dtype.str[1:]]
    raw = le.astype(np.uint8).tobytes() if dt == "BOOL" else le.tobytes()
    vals = [jnum(v) for v in (le.astype("<f4") if dt in UPCAST else le).reshape(-1).tolist()]
    return entry(raw, dt, list(a.shape), vals, base, i, {"numpy_dtype": a.dtype.str})


def flatten(obj, prefix=""):
    """Dotted names as the reader gives them: dict keys (str, int) and list/tuple indices."""
    if isinstance(obj, torch.Tensor):
        yield (prefix[:-1] or "tensor"), obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                yield from flatten(v, "%s%s." % (prefix, k))
    elif isinstance(obj, (list, tuple)):
        for k, v in enumerate(obj):
            yield from flatten(v, "%s%d." % (prefix, k))


def same(a, b):
    a, b = a.resolve_conj().resolve_neg(), b.resolve_conj().resolve_neg()
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8) if a.dtype != torch.bool else a,
        b.contiguous().reshape(-1).view(torch.uint8) if b.dtype != torch.bool else b)


INDEX, HOSTILE = [], []


def record(rel, tensors, **info):
    p = os.path.join(OUT, "expected", rel + ".json")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    json.dump({"file": rel, **info, "tensors": tensors}, open(p, "w"), indent=1)
    INDEX.append({"file": rel, "tensors": len(tensors), "what": info.get("what", "")})


def check_and_record(rel, obj, what, container="zip", protocol=2, weights_only=True):
    path = os.path.join(OUT, rel)
    back = torch.load(path, map_location="cpu", weights_only=weights_only)
    got, want = dict(flatten(back)), dict(flatten(obj))
    assert list(got) == list(want) and all(same(got[k], want[k]) for k in want), rel
    record(rel, {k: torch_entry(t, rel, i) for i, (k, t) in enumerate(got.items())}, what=what,
           writer="torch %s" % torch.__version__.split("+")[0], weights_format="pytorch", container=container,
           pickle_protocol=protocol, expected_by="torch.load(weights_only=%s)" % weights_only)


def save_torch(rel, obj, what, weights_only=True, **kw):
    path = os.path.join(OUT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(obj, path, **kw)
    check_and_record(rel, obj, what, "legacy" if kw.get("_use_new_zipfile_serialization") is False else "zip",
                     kw.get("pickle_protocol", 2), weights_only)


def every_byte(dtype):
    return torch.arange(0, 256, dtype=torch.int32).to(torch.uint8).view(dtype).reshape(16, 16)


# ───────────────────────────── valid checkpoints ─────────────────────────────
c = torch.complex(torch.randn(2, 3), torch.randn(2, 3))
save_torch("zip/conj_neg.pt", collections.OrderedDict([
    ("conj", c.conj()), ("conj_t", c.t().conj()), ("neg_f32", torch._neg_view(torch.randn(5))),
    ("neg_bf16", torch._neg_view(torch.randn(4).bfloat16())), ("neg_i64", torch._neg_view(torch.tensor([1, -2, 3]))),
    ("neg_c64", torch._neg_view(torch.complex(torch.randn(2), torch.randn(2))))]),
    "lazy conjugate and negative views (metadata {'conj': True} / {'neg': True} of _rebuild_tensor_v2)")
save_torch("zip/more_dtypes.pt", collections.OrderedDict([
    ("u16", torch.tensor([0, 1, 65535, 40000], dtype=torch.int32).to(torch.uint16)),
    ("u32", torch.tensor([0, 1, 2**32 - 1, 3], dtype=torch.int64).to(torch.uint32)),
    ("u64", torch.tensor([0, 1, 2**63 - 1, 5], dtype=torch.int64).to(torch.uint64)),
    ("f8_e4m3fnuz", every_byte(torch.float8_e4m3fnuz)), ("f8_e5m2fnuz", every_byte(torch.float8_e5m2fnuz)),
    ("f8_e8m0fnu", every_byte(torch.float8_e8m0fnu))]),
    "_rebuild_tensor_v3 over UntypedStorage: uint16/32/64 and the FNUZ / E8M0 float8 types (all 256 bit patterns)")
t1, t2 = torch.randn(2, 2), torch.randn(3)
containers = {
    "model": collections.OrderedDict([("w", t1), ("b", t2)]),
    "optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(2, 2)}},
                  "param_groups": [{"lr": 0.1, "params": [0, 1]}]},
    "list": [torch.arange(3), (torch.ones(2, dtype=torch.float16), torch.zeros(1, dtype=torch.int8))],
    "blob": b"\x00\x01\xff", "ba": bytearray(b"xy"), "s": {1, 2}, "c": complex(1, 2), "dev": torch.device("cpu"),
    "size": torch.Size([2, 3]), "dtype": torch.float16, "none": None, "flag": True, "f": 1.5, "big": 2**70, "neg": -5,
    "tied_again": t1}
save_torch("zip/containers.pt", containers,
           "optimizer-style nesting (int keys, lists, tuples) and every harmless global torch allows beside tensors "
           "(_codecs.encode for bytes, bytearray, set, complex, torch.device, torch.Size, a dtype, a big int)")
save_torch("zip/bare_tensor.pt", torch.randn(3, 2), "torch.save of one tensor: listed as 'tensor'")
p = torch.nn.Parameter(torch.randn(2, 2))
p.note = "kept by _rebuild_parameter_with_state"
save_torch("zip/param_state.pt", {"p": p}, "an nn.Parameter with a Python attribute (_rebuild_parameter_with_state)")
save_torch("zip/protocol1.pt", collections.OrderedDict([("a", torch.randn(2, 3)), ("i", torch.arange(4))]),
           "pickle protocol 1 (no PROTO opcode)", weights_only=False, pickle_protocol=1)

# The same checkpoint in zips torch did not write: deflated members; ZIP64 records everywhere.
src = collections.OrderedDict([("w", torch.randn(4, 3)), ("b", torch.arange(3, dtype=torch.int16)), ("h", torch.randn(5).half())])
buf = io.BytesIO()
torch.save(src, buf)
zin = zipfile.ZipFile(io.BytesIO(buf.getvalue()))


def rewrite(rel, what, **zkw):
    path = os.path.join(OUT, rel)
    with zipfile.ZipFile(path, "w", **zkw) as z:
        for info in zin.infolist():
            z.writestr("renamed_top/" + info.filename.split("/", 1)[1], zin.read(info))
    check_and_record(rel, src, what)


rewrite("zip/deflated.pt", "torch checkpoint rewritten by Python zipfile with every member deflated (top folder 'renamed_top')",
        compression=zipfile.ZIP_DEFLATED)
limits = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 0, 0  # force ZIP64 extra fields and end records
rewrite("zip/zip64.pt", "torch checkpoint rewritten with ZIP64 extra fields in every header and ZIP64 end records")
zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = limits

# NumPy: header versions 2 and 3, more byte orders and orders.
def save_np(rel, a, what, version=None):
    path = os.path.join(OUT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)
    back = np.load(path, allow_pickle=False)
    assert back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a, equal_nan=True) if a.dtype.kind != "b" else True
    record(rel, {"*": np_entry(back, rel, 0)}, what=what, writer="numpy %s write_array(version=%s)" % (np.__version__, version),
           weights_format="numpy", container="npy", expected_by="numpy.load(allow_pickle=False)", single_array=True)


save_np("numpy/v2_header.npy", RNG.standard_normal((2, 3)).astype("<f4"), "format version 2.0 (4-byte header length)", (2, 0))
save_np("numpy/v3_header.npy", RNG.integers(-9, 9, (4,)).astype("<i2"), "format version 3.0 (UTF-8 header)", (3, 0))
save_np("numpy/fortran_big_endian_u8.npy", np.asfortranarray(RNG.integers(0, 2**63, (2, 3, 2), dtype=np.uint64).astype(">u8")),
        "Fortran order and big-endian together, uint64 2x3x2")
save_np("numpy/big_endian_c8.npy", (RNG.standard_normal((3,)) + 1j * RNG.standard_normal((3,))).astype(">c8"),
        "big-endian complex64 (each float32 half swapped)")
save_np("numpy/fortran_bool.npy", np.asfortranarray(RNG.integers(0, 2, (3, 4)).astype(bool)), "Fortran-order bool")

# ───────────────────────────── hostile files ─────────────────────────────
os.makedirs(os.path.join(OUT, "hostile"), exist_ok=True)


def hostile(name, data, code, needle, must, canary=None):
    open(os.path.join(OUT, "hostile", name), "wb").write(data)
    HOSTILE.append({"file": "hostile/" + name, "code": code, "needle": needle, "must": must, "canary": canary})


def torch_zip(pkl, storages=(), extra=(), top="archive", method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression=method) as z:
        z.writestr(top + "/data.pkl", pkl)
        z.writestr(top + "/byteorder", "little")
        z.writestr(top + "/version", "3\n")
        for k, data in storages:
            z.writestr(top + "/data/" + k, data)
        for n, data in extra:
            z.writestr(n, data)
    return b.getvalue()


def g(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


V = np.arange(6, dtype="<f4").tobytes()
TENSOR = (g("torch._utils", "_rebuild_tensor_v2") + b"((" + s("storage") + g("torch", "FloatStorage") + s("0") + s("cpu")
          + b"K\x06tq\x00QK\x00K\x06\x85K\x01\x85\x89" + g("collections", "OrderedDict") + b")Rtq\x01R")
OK = b"\x80\x02}(" + s("w") + TENSOR


def with_(tail):
    """A valid one-tensor state dict pickle, plus `tail` as a further entry."""
    return OK + tail + b"u."


def tz(pkl):
    return torch_zip(pkl, [("0", V)])


assert torch.load(io.BytesIO(torch_zip(OK + b"u.", [("0", V)])), weights_only=True)["w"].tolist() == [0, 1, 2, 3, 4, 5]

c = CANARY_PREFIX + "obj"
hostile("obj_os_system.pt", torch_zip(b"\x80\x02(" + g("os", "system") + s("touch " + c) + b"o."), "ERR_UNSAFE_PICKLE", "os.system",
        "OBJ opcode on os.system: refused at its GLOBAL", c)
c = CANARY_PREFIX + "build"
# BUILD with a state dict whose __setstate__-free path sets attributes: the payload is the
# REDUCE of subprocess.check_call inside the state; refused at its GLOBAL.
hostile("build_payload.pt", tz(with_(s("x") + g("collections", "OrderedDict") + b")R" + b"}" + s("a")
                                            + g("subprocess", "check_call") + b"(" + s("touch") + s(c) + b"l\x85R" + b"sb")),
        "ERR_UNSAFE_PICKLE", "subprocess.check_call", "BUILD whose state calls subprocess.check_call", c)
hostile("reduce_torch_tensor.pt", tz(with_(s("x") + g("torch", "Tensor") + b")R")), "ERR_UNSAFE_PICKLE", "torch.Tensor",
        "REDUCE of an allowed name that is not a function we evaluate (torch.Tensor)")
hostile("reduce_string.pt", tz(with_(s("x") + s("os.system") + b")R")), "ERR_UNSAFE_PICKLE", "calls (REDUCE) a str",
        "REDUCE whose callable is a string")
hostile("build_on_list.pt", tz(with_(s("x") + b"]}b")), "ERR_UNSAFE_PICKLE", "BUILD) on a list",
        "BUILD on a list (torch: only Tensor, Parameter, OrderedDict)")
hostile("newobj_dtype.pt", tz(with_(s("x") + g("torch", "float32") + b")\x81")), "ERR_UNSAFE_PICKLE", "NEWOBJ",
        "NEWOBJ of torch.float32")
hostile("newobj_ex.pt", tz(with_(s("x") + g("collections", "OrderedDict") + b")}\x92")), "ERR_UNSAFE_PICKLE", "NEWOBJ_EX",
        "NEWOBJ_EX of an allowed class")
hostile("ext1.pt", tz(with_(s("x") + b"\x82\x01)R")), "ERR_UNSAFE_PICKLE", "extension registry",
        "EXT1 (a global by extension-registry code)")
hostile("persid_module.pt", tz(with_(s("x") + b"(" + s("module") + s("os") + b"tQ")), "ERR_UNSAFE_PICKLE", "persistent id",
        "a persistent id that is not a storage")
hostile("negative_offset.pt", torch_zip(OK.replace(b"QK\x00K\x06", b"QJ\xff\xff\xff\xffK\x06") + b"u.", [("0", V)]),
        "ERR_INVALID_OFFSETS", "storage offset is negative", "storage offset -1")
hostile("huge_stride.pt", torch_zip(OK.replace(b"K\x06\x85K\x01\x85", b"K\x06\x85\x8a\x08" + struct.pack("<q", 2**62) + b"\x85")
                                    + b"u.", [("0", V)]), "ERR_SIZE_MISMATCH", "overflows", "stride 2^62: the extent overflows")
hostile("binunicode8_huge.pt", torch_zip(b"\x80\x04\x8d" + struct.pack("<Q", 2**63 + 5) + b"abc."), "ERR_INCOMPLETE_FILE",
        "bytes, only", "BINUNICODE8 with a length beyond the file")
hostile("long4_negative.pt", torch_zip(b"\x80\x02\x8b\xff\xff\xff\xff."), "ERR_INVALID_HEADER", "negative length",
        "LONG4 with a negative length")
cyc = b"\x80\x02]q\x00h\x00a."  # a list appended to itself
hostile("cyclic_list.pt", torch_zip(cyc), "ERR_INVALID_HEADER", "a list contains itself", "a list that contains itself")
laugh = b"\x80\x02}(" + s("t") + TENSOR + b"u" + b"".join(b"q\x01}(" + s("a") + b"h\x01" + s("b") + b"h\x01u" for _ in range(64)) + b"."
hostile("shared_dicts.pt", torch_zip(laugh, [("0", V)]), "ERR_INVALID_HEADER", "too many places",
        "64 levels of a dict referenced twice (2^64 paths): refused, never walked")
hostile("two_names_one_path.pt", torch_zip(b"\x80\x02}(" + s("a.b") + TENSOR + b"q\x02" + s("a") + b"}" + s("b") + b"h\x02su.", [("0", V)]),
        "ERR_INVALID_HEADER", "two tensors flatten", "keys 'a.b' and 'a' → 'b' flatten to the same name")
hostile("unknown_opcode.pt", torch_zip(b"\x80\x02\xff."), "ERR_INVALID_HEADER", "unknown opcode", "opcode 0xff")
hostile("truncated_pickle.pt", torch_zip(OK), "ERR_INCOMPLETE_FILE", "", "data.pkl ends before STOP")
hostile("missing_record.pt", torch_zip(OK + b"u."), "ERR_INVALID_HEADER", "no record", "the pickle names storage 0, no data/0")
hostile("tail_after_stop.pt", torch_zip(OK + b"u." + b"\x80\x02N.", [("0", V)]), "ERR_INVALID_HEADER", "after STOP",
        "bytes after the pickle's STOP")
hostile("complex128.pt", torch_zip(OK.replace(b"FloatStorage", b"ComplexDoubleStorage") + b"u.", [("0", V * 4)]),
        "ERR_UNSUPPORTED_DTYPE", "complex128", "a complex128 storage (no SafeTensors dtype)")
hostile("qtensor.pt", tz(with_(s("x") + g("torch._utils", "_rebuild_qtensor") + b")R")), "ERR_UNSUPPORTED_DTYPE", "quantized",
        "a quantized tensor (allowed by torch, not representable)")

# Zip structure.
evil = torch_zip(OK + b"u.", [("0", V)], extra=[("/abs/evil", b"x")])
hostile("zip_absolute.pt", evil, "ERR_UNSAFE_PATH", "/abs/evil", "a member named /abs/evil")
hostile("zip_backslash.pt", torch_zip(OK + b"u.", [("0", V)], extra=[("archive\\..\\evil", b"x")]), "ERR_UNSAFE_PATH", "evil",
        "a member name with backslashes")
hostile("zip_outside_top.pt", torch_zip(OK + b"u.", [("0", V)], extra=[("other/data/0", b"x")]), "ERR_INVALID_HEADER",
        "outside the archive folder", "a member outside the archive's top folder")
good = torch_zip(OK + b"u.", [("0", V)])
# Local header of data/0 claims a different size than the central directory.
i = good.index(b"archive/data/0") - 30
bad = bytearray(good)
bad[i + 22:i + 26] = struct.pack("<I", 23)
hostile("zip_size_disagree.pt", bytes(bad), "ERR_SIZE_MISMATCH", "disagree", "local and central headers disagree on a size")
# Central directory entry for byteorder pointed at data.pkl's local header: two members, one region.
zi = zipfile.ZipFile(io.BytesIO(good))
bad = bytearray(good)
pos = [m for m in range(len(good)) if good[m:m + 4] == b"PK\x01\x02"]
names = [zi.infolist()[k].filename for k in range(len(pos))]
bo = pos[names.index("archive/byteorder")]
bad[bo + 42:bo + 46] = struct.pack("<I", zi.getinfo("archive/data/0").header_offset)
hostile("zip_overlap.pt", bytes(bad), "ERR_INVALID_HEADER", "local header names", "a central entry pointing at another member's local header")
bomb_pkl = OK + b"u." + b"\x00" * (50 << 20)  # 50 MiB of zeros after STOP: deflates to ~50 KiB
b = io.BytesIO()
with zipfile.ZipFile(b, "w", compression=zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", bomb_pkl)
    z.writestr("archive/data/0", V)
bomb = bytearray(b.getvalue())
# Declare data.pkl as 1,000 bytes (local and central): it inflates far beyond.
zi = zipfile.ZipFile(io.BytesIO(bytes(bomb)))
info = zi.getinfo("archive/data.pkl")
bomb[info.header_offset + 22:info.header_offset + 26] = struct.pack("<I", 1000)
cpos = bytes(bomb).index(b"PK\x01\x02")
bomb[cpos + 24:cpos + 28] = struct.pack("<I", 1000)
hostile("zip_bomb.pt", bytes(bomb), "ERR_SIZE_MISMATCH", "inflates to more than", "data.pkl declared 1,000 bytes, inflates to 50 MiB")
bomb2 = bytearray(b.getvalue())
bomb2[info.header_offset + 22:info.header_offset + 26] = struct.pack("<I", 0xFFFFFFF0)
bomb2[cpos + 24:cpos + 28] = struct.pack("<I", 0xFFFFFFF0)
hostile("zip_bomb_declared.pt", bytes(bomb2), "ERR_SIZE_MISMATCH", "more than deflate can produce",
        "data.pkl declares 4 GiB from ~50 KiB of deflate: refused before inflating")
hostile("zip_truncated.pt", good[:len(good) // 2], "ERR_INVALID_HEADER", "end-of-central-directory", "half a zip")

# Legacy format.
buf = io.BytesIO()
torch.save(collections.OrderedDict([("w", torch.randn(2, 2))]), buf, _use_new_zipfile_serialization=False)
leg = buf.getvalue()
hostile("legacy_truncated.pt", leg[:-5], "ERR_INCOMPLETE_FILE", "runs past the end", "legacy checkpoint cut inside its storage")
bad = bytearray(leg)
bad[-16 - 8:-16] = struct.pack("<q", 5)  # the element count before the 16 data bytes
hostile("legacy_count.pt", bytes(bad), "ERR_SIZE_MISMATCH", "should hold 4 elements", "legacy storage count 5 for a 4-element storage")
hostile("legacy_magic.pt", leg.replace(bytes.fromhex("6cfc9c46f9206aa85019"), bytes.fromhex("6cfc9c46f9206aa85018"), 1),
        "ERR_INVALID_HEADER", "neither", "a legacy checkpoint with a wrong magic number")

# NumPy.
def npy(header, data=b"", version=1):
    h = header.encode()
    pad = (-(10 + len(h) + 1)) % 64
    h = h + b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + (struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))) + h + data


hostile("npy_header_huge.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{", "ERR_HEADER_TOO_LARGE", "header of",
        "a 4 GiB header length in a tiny file")
hostile("npy_shape_overflow.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }"),
        "ERR_SIZE_MISMATCH", "overflows", "a shape whose byte size overflows")
hostile("npy_truncated.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (100,), }", b"\x00" * 80),
        "ERR_INCOMPLETE_FILE", "needs 800 data bytes", "800 data bytes declared, 80 present")
hostile("npy_structured.npy", npy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }", b"\x00" * 8),
        "ERR_UNSUPPORTED_DTYPE", "structured", "a structured dtype")
hostile("npy_datetime.npy", npy("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,), }", b"\x00" * 8),
        "ERR_UNSUPPORTED_DTYPE", "M8", "datetime64")
hostile("npy_bad_literal.npy", npy("{'descr': '<f4', 'fortran_order': __import__('os'), 'shape': (1,), }", b"\x00" * 4),
        "ERR_INVALID_HEADER", "unexpected character", "a header that is code, not a literal")
c = CANARY_PREFIX + "npz_object"


class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + c,))


a = np.empty(2, dtype=object)
a[0], a[1] = Evil(), 2
b = io.BytesIO()
np.savez(b, ok=np.arange(3), evil=a)
hostile("npz_object.npz", b.getvalue(), "ERR_UNSAFE_PICKLE", "object array", "an .npz whose 'evil' member is an object array (pickle payload)", c)
b = io.BytesIO()
with zipfile.ZipFile(b, "w", compression=zipfile.ZIP_DEFLATED) as z:
    z.writestr("big.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (268435456,), }", b"\x00" * (1 << 20)))
npzb = bytearray(b.getvalue())
zi = zipfile.ZipFile(io.BytesIO(bytes(npzb)))
info = zi.getinfo("big.npy")
declared = 128 + (1 << 30)  # the header says 1 GiB of float32; the member holds 1 MiB
npzb[info.header_offset + 22:info.header_offset + 26] = struct.pack("<I", declared)
cpos = bytes(npzb).index(b"PK\x01\x02")
npzb[cpos + 24:cpos + 28] = struct.pack("<I", declared)
hostile("npz_bomb.npz", bytes(npzb), "ERR_SIZE_MISMATCH", "more than deflate can produce", "a deflated member declaring 1 GiB from 1 KiB of deflate")

# Prove the canary payloads are live (an unrestricted load in a throwaway process creates them),
# and that torch's own safe loader refuses every torch hostile file (where it reads them at all).
proof = r"""
import os, sys, json, warnings, numpy as np, torch
warnings.filterwarnings("ignore")
res = {}
for f, c in json.loads(sys.argv[1]):
    if os.path.exists(c): os.remove(c)
    try:
        if f.endswith(".npz"):
            z = np.load(f, allow_pickle=True); [z[k] for k in z.files]
        else:
            torch.load(f, weights_only=False)
    except Exception: pass
    res[f] = os.path.exists(c)
    if res[f]: os.remove(c)
print(json.dumps(res))
"""
pairs = [(os.path.join(OUT, h["file"]), h["canary"]) for h in HOSTILE if h["canary"]]
r = subprocess.run([sys.executable, "-c", proof, json.dumps(pairs)], capture_output=True, text=True, timeout=300)
live = json.loads(r.stdout.strip().splitlines()[-1])
assert all(live.values()), live

json.dump({"torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0], "files": INDEX,
           "hostile": HOSTILE}, open(os.path.join(OUT, "expected", "index.json"), "w"), indent=1)

# torch's allow-list, for the test that our table is exactly it.
from torch._weights_only_unpickler import _get_allowed_globals
open(os.path.join(OUT, "torch_allowed_globals.txt"), "w").write("\n".join(sorted(_get_allowed_globals())) + "\n")
print("wrote %d fixtures + %d hostile files under %s" % (len(INDEX), len(HOSTILE), OUT))
