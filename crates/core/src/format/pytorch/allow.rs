//! The allow-list of pickle globals: the only names a checkpoint may mention.
//!
//! It is torch's own weights-only list (`torch/_weights_only_unpickler.py`,
//! `_get_allowed_globals`, torch 2.15), as data. A global that is not in it is refused at
//! the `GLOBAL`/`STACK_GLOBAL` opcode that names it (ERR_UNSAFE_PICKLE naming it), before
//! anything else happens. Nothing is ever imported or executed: each entry says what the
//! name *means* to the reader ([`Role`]), and the reader only builds plain data from it.
//! Names torch allows but we cannot represent (quantized, sparse, meta tensors, dtypes that
//! SafeTensors lacks) are recognised, and refused as unsupported where they are used.

use crate::dtype::DType;

/// What an allowed global means to the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A tensor rebuild function (called by `REDUCE`).
    Rebuild(RebuildFn),
    /// A rebuild function torch allows for tensors we cannot represent; calling it is
    /// ERR_UNSUPPORTED_DTYPE naming what it builds.
    UnsupportedRebuild(&'static str),
    /// A storage class in a persistent id: its element type, `None` for a quantized or
    /// complex128 storage we cannot read.
    Storage(StorageKind),
    /// A `torch.<dtype>` object: the SafeTensors dtype, `None` for one SafeTensors lacks.
    Dtype(Option<DType>),
    /// `collections.OrderedDict` / `collections.Counter`: a dict.
    Dict,
    /// `builtins.set`.
    Set,
    /// `builtins.bytearray`.
    ByteArray,
    /// `_codecs.encode`: how protocol 2 pickles `bytes` (`encode(text, 'latin1')`).
    CodecsEncode,
    /// `torch.Size`: a tuple of ints.
    Size,
    /// `torch.nn.parameter.Parameter`: a tensor (`NEWOBJ`) or a rebuild's `new_type`.
    Parameter,
    /// `torch.Tensor` and the legacy tensor classes: a rebuild's `new_type`.
    TensorType,
    /// Values a checkpoint may carry that mean nothing for tensor data (`torch.device`,
    /// `torch.serialization._get_layout`, `builtins.complex`, quantization schemes):
    /// calling them gives an opaque value.
    Opaque,
}

/// The tensor rebuild functions we evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildFn {
    /// `_rebuild_tensor(storage, offset, size, stride)`.
    Tensor,
    /// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`.
    TensorV2,
    /// `_rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])`.
    TensorV3,
    /// `_rebuild_parameter(data, requires_grad, hooks)`.
    Parameter,
    /// `_rebuild_parameter_with_state(data, requires_grad, hooks, state)`.
    ParameterWithState,
    /// `torch._tensor._rebuild_from_type_v2(func, new_type, args, state)`.
    FromTypeV2,
    /// `_rebuild_device_tensor_from_cpu_tensor(data, dtype, device, requires_grad)`.
    DeviceFromCpu,
}

/// A storage class's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    /// A typed storage (`torch.FloatStorage`, …) of this dtype; `None` if SafeTensors lacks it.
    Typed(Option<DType>, &'static str),
    /// `torch.storage.UntypedStorage`: bytes (`_rebuild_tensor_v3` gives the dtype).
    Untyped,
    /// `torch.storage.TypedStorage` itself, which names no dtype: unusable in a persistent id.
    Generic,
}

/// One allowed global: `module.name` and its role.
#[derive(Debug, Clone, Copy)]
pub struct Allowed {
    pub module: &'static str,
    pub name: &'static str,
    pub role: Role,
}

const fn g(module: &'static str, name: &'static str, role: Role) -> Allowed {
    Allowed { module, name, role }
}

use Role::*;
const fn typed(d: DType, torch: &'static str) -> Role {
    Storage(StorageKind::Typed(Some(d), torch))
}
const fn untyped_dtype(torch: &'static str) -> Role {
    Storage(StorageKind::Typed(None, torch))
}
const fn dt(d: DType) -> Role {
    Dtype(Some(d))
}
const NO_DT: Role = Dtype(None);

/// Storage classes, allowed as `torch.<X>` and (old checkpoints saved from a GPU; we load
/// everything to the CPU, as `map_location='cpu'` does) as `torch.cuda.<X>`.
static STORAGE_CLASSES: &[(&str, Role)] = &[
    ("FloatStorage", typed(DType::F32, "torch.float32")),
    ("DoubleStorage", typed(DType::F64, "torch.float64")),
    ("HalfStorage", typed(DType::F16, "torch.float16")),
    ("BFloat16Storage", typed(DType::BF16, "torch.bfloat16")),
    ("LongStorage", typed(DType::I64, "torch.int64")),
    ("IntStorage", typed(DType::I32, "torch.int32")),
    ("ShortStorage", typed(DType::I16, "torch.int16")),
    ("CharStorage", typed(DType::I8, "torch.int8")),
    ("ByteStorage", typed(DType::U8, "torch.uint8")),
    ("BoolStorage", typed(DType::BOOL, "torch.bool")),
    ("ComplexFloatStorage", typed(DType::C64, "torch.complex64")),
    ("ComplexDoubleStorage", untyped_dtype("torch.complex128")),
];

/// Legacy tensor classes, allowed as a rebuild's `new_type` (never called): `torch.<X>` and
/// `torch.cuda.<X>` for all, `torch.sparse.<X>` and `torch.cuda.sparse.<X>` for all but Bool.
static TENSOR_CLASSES: &[&str] = &[
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "ShortTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
];

static OTHERS: &[Allowed] = &[
    // Containers and plain values.
    g("collections", "OrderedDict", Dict),
    g("collections", "Counter", Dict),
    g("builtins", "set", Set),
    g("builtins", "bytearray", ByteArray),
    g("builtins", "complex", Opaque),
    g("_codecs", "encode", CodecsEncode),
    g("torch", "Size", Size),
    g("torch", "device", Opaque),
    g("torch.serialization", "_get_layout", Opaque),
    g("torch.nn.parameter", "Parameter", Parameter),
    g("torch", "Tensor", TensorType),
    // Rebuild functions.
    g(
        "torch._utils",
        "_rebuild_tensor",
        Rebuild(RebuildFn::Tensor),
    ),
    g(
        "torch._utils",
        "_rebuild_tensor_v2",
        Rebuild(RebuildFn::TensorV2),
    ),
    g(
        "torch._utils",
        "_rebuild_tensor_v3",
        Rebuild(RebuildFn::TensorV3),
    ),
    g(
        "torch._utils",
        "_rebuild_parameter",
        Rebuild(RebuildFn::Parameter),
    ),
    g(
        "torch._utils",
        "_rebuild_parameter_with_state",
        Rebuild(RebuildFn::ParameterWithState),
    ),
    g(
        "torch._tensor",
        "_rebuild_from_type_v2",
        Rebuild(RebuildFn::FromTypeV2),
    ),
    g(
        "torch._utils",
        "_rebuild_device_tensor_from_cpu_tensor",
        Rebuild(RebuildFn::DeviceFromCpu),
    ),
    g(
        "torch._utils",
        "_rebuild_qtensor",
        UnsupportedRebuild("a quantized tensor"),
    ),
    g(
        "torch._utils",
        "_rebuild_sparse_tensor",
        UnsupportedRebuild("a sparse tensor"),
    ),
    g(
        "torch._utils",
        "_rebuild_meta_tensor_no_storage",
        UnsupportedRebuild("a meta tensor (no data)"),
    ),
    g(
        "torch._utils",
        "_rebuild_wrapper_subclass",
        UnsupportedRebuild("a tensor subclass without storage"),
    ),
    g(
        "torch._utils",
        "_rebuild_device_tensor_from_numpy",
        UnsupportedRebuild("a tensor made from a NumPy array"),
    ),
    // Untyped, generic and quantized storages.
    g(
        "torch.storage",
        "UntypedStorage",
        Storage(StorageKind::Untyped),
    ),
    g(
        "torch.storage",
        "TypedStorage",
        Storage(StorageKind::Generic),
    ),
    g("torch", "QInt8Storage", untyped_dtype("torch.qint8")),
    g("torch", "QUInt8Storage", untyped_dtype("torch.quint8")),
    g("torch", "QInt32Storage", untyped_dtype("torch.qint32")),
    g("torch", "QUInt4x2Storage", untyped_dtype("torch.quint4x2")),
    g("torch", "QUInt2x4Storage", untyped_dtype("torch.quint2x4")),
    // dtypes SafeTensors has.
    g("torch", "float32", dt(DType::F32)),
    g("torch", "float64", dt(DType::F64)),
    g("torch", "float16", dt(DType::F16)),
    g("torch", "bfloat16", dt(DType::BF16)),
    g("torch", "int8", dt(DType::I8)),
    g("torch", "int16", dt(DType::I16)),
    g("torch", "int32", dt(DType::I32)),
    g("torch", "int64", dt(DType::I64)),
    g("torch", "uint8", dt(DType::U8)),
    g("torch", "uint16", dt(DType::U16)),
    g("torch", "uint32", dt(DType::U32)),
    g("torch", "uint64", dt(DType::U64)),
    g("torch", "bool", dt(DType::BOOL)),
    g("torch", "complex64", dt(DType::C64)),
    g("torch", "float8_e4m3fn", dt(DType::F8_E4M3)),
    g("torch", "float8_e5m2", dt(DType::F8_E5M2)),
    g("torch", "float8_e4m3fnuz", dt(DType::F8_E4M3FNUZ)),
    g("torch", "float8_e5m2fnuz", dt(DType::F8_E5M2FNUZ)),
    g("torch", "float8_e8m0fnu", dt(DType::F8_E8M0)),
    // dtypes it lacks.
    g("torch", "complex128", NO_DT),
    g("torch", "complex32", NO_DT),
    g("torch", "bcomplex32", NO_DT),
    g("torch", "float4_e2m1fn_x2", NO_DT),
    g("torch", "qint8", NO_DT),
    g("torch", "quint8", NO_DT),
    g("torch", "qint32", NO_DT),
    g("torch", "quint4x2", NO_DT),
    g("torch", "quint2x4", NO_DT),
    g("torch", "bits1x8", NO_DT),
    g("torch", "bits2x4", NO_DT),
    g("torch", "bits4x2", NO_DT),
    g("torch", "bits8", NO_DT),
    g("torch", "bits16", NO_DT),
    g("torch", "uint1", NO_DT),
    g("torch", "uint2", NO_DT),
    g("torch", "uint3", NO_DT),
    g("torch", "uint4", NO_DT),
    g("torch", "uint5", NO_DT),
    g("torch", "uint6", NO_DT),
    g("torch", "uint7", NO_DT),
    g("torch", "int1", NO_DT),
    g("torch", "int2", NO_DT),
    g("torch", "int3", NO_DT),
    g("torch", "int4", NO_DT),
    g("torch", "int5", NO_DT),
    g("torch", "int6", NO_DT),
    g("torch", "int7", NO_DT),
    // Quantization schemes.
    g("torch", "per_tensor_affine", Opaque),
    g("torch", "per_tensor_symmetric", Opaque),
    g("torch", "per_channel_affine", Opaque),
    g("torch", "per_channel_symmetric", Opaque),
    g("torch", "per_channel_affine_float_qparams", Opaque),
];

/// Every allowed global, in one list (a test checks it equals torch's list exactly).
pub fn allowed() -> impl Iterator<Item = Allowed> {
    let storages = ["torch", "torch.cuda"]
        .into_iter()
        .flat_map(|m| STORAGE_CLASSES.iter().map(move |&(n, role)| g(m, n, role)));
    let classes = ["torch", "torch.cuda", "torch.sparse", "torch.cuda.sparse"]
        .into_iter()
        .flat_map(|m| {
            TENSOR_CLASSES
                .iter()
                .filter(move |&&n| !(m.ends_with("sparse") && n == "BoolTensor"))
                .map(move |&n| g(m, n, TensorType))
        });
    OTHERS.iter().copied().chain(storages).chain(classes)
}

/// Python 2 module names that Python 3's pickler writes at protocol ≤ 2 (`fix_imports`), as
/// torch maps them back (`torch._utils.IMPORT_MAPPING`; only those that can reach an entry).
pub fn python3_module(module: &str) -> &str {
    match module {
        "__builtin__" => "builtins",
        "copy_reg" => "copyreg",
        m => m,
    }
}

/// The role of `module.name`, or `None` when the pickle may not mention it.
pub fn lookup(module: &str, name: &str) -> Option<Role> {
    let module = python3_module(module);
    static INDEX: std::sync::OnceLock<
        std::collections::HashMap<(&'static str, &'static str), Role>,
    > = std::sync::OnceLock::new();
    INDEX
        .get_or_init(|| allowed().map(|a| ((a.module, a.name), a.role)).collect())
        .get(&(module, name))
        .copied()
}

/// `torch.<dtype>` name of a SafeTensors dtype (the `stored` label of a PyTorch tensor).
pub fn torch_dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "torch.float32",
        DType::F64 => "torch.float64",
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
        DType::I8 => "torch.int8",
        DType::I16 => "torch.int16",
        DType::I32 => "torch.int32",
        DType::I64 => "torch.int64",
        DType::U8 => "torch.uint8",
        DType::U16 => "torch.uint16",
        DType::U32 => "torch.uint32",
        DType::U64 => "torch.uint64",
        DType::BOOL => "torch.bool",
        DType::C64 => "torch.complex64",
        DType::F8_E4M3 => "torch.float8_e4m3fn",
        DType::F8_E5M2 => "torch.float8_e5m2",
        DType::F8_E4M3FNUZ => "torch.float8_e4m3fnuz",
        DType::F8_E5M2FNUZ => "torch.float8_e5m2fnuz",
        DType::F8_E8M0 => "torch.float8_e8m0fnu",
        DType::F4 => "torch.float4_e2m1fn_x2",
        DType::F6_E2M3 => "float6_e2m3",
        DType::F6_E3M2 => "float6_e3m2",
    }
}
