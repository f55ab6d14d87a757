//! Pure conversions between stored element types and the numbers callers want.
//!
//! Slices in, slices out. Stored bytes are little-endian and may sit at any address (MLX and
//! aprender write unpadded headers), so nothing here reinterprets a byte pointer as a wider
//! type unless its alignment has been checked. Each hot conversion has a plain reference
//! path (`*_ref`) and a fast path, tested against each other.

use crate::dtype::DType;
use crate::error::{CoreError, Result};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use std::sync::OnceLock;

#[cfg(not(target_endian = "little"))]
compile_error!("safetensors-node-core assumes a little-endian host");

/// Element counts from which a conversion is split over threads (one per half of this):
/// below it, spawning costs more than it saves.
const PARALLEL_THRESHOLD: usize = 1 << 20;

/// Plain numeric element types that may be filled from little-endian bytes by `memcpy`.
///
/// # Safety
/// Implementors must be plain-old-data: every bit pattern is a valid value, no padding.
pub unsafe trait Element: Copy + Send + Sync + 'static {}
unsafe impl Element for u8 {}
unsafe impl Element for i8 {}
unsafe impl Element for u16 {}
unsafe impl Element for i16 {}
unsafe impl Element for u32 {}
unsafe impl Element for i32 {}
unsafe impl Element for f32 {}
unsafe impl Element for u64 {}
unsafe impl Element for i64 {}
unsafe impl Element for f64 {}

/// An owned, aligned copy of `bytes` as elements of `T` (the byte length must be a multiple
/// of `size_of::<T>()`; a shorter tail is ignored).
pub fn copy_elements<T: Element>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut out: Vec<T> = Vec::with_capacity(n);
    // SAFETY: `out` has capacity for n elements = n * size_of::<T>() bytes; T is POD so any
    // bytes form valid values; the regions cannot overlap (fresh allocation).
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            out.as_mut_ptr() as *mut u8,
            n * std::mem::size_of::<T>(),
        );
        out.set_len(n);
    }
    out
}

/// View `bytes` as `&[T]` when their address is aligned for `T`, else `None`.
pub fn aligned_elements<T: Element>(bytes: &[u8]) -> Option<&[T]> {
    // SAFETY: T is POD; align_to only yields the middle slice at proper alignment.
    let (head, mid, tail) = unsafe { bytes.align_to::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}

/// `bytes` as elements of `T`: borrowed when aligned ([`aligned_elements`]), else an aligned
/// copy ([`copy_elements`]).
pub fn elements<T: Element>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    match aligned_elements::<T>(bytes) {
        Some(values) => std::borrow::Cow::Borrowed(values),
        None => std::borrow::Cow::Owned(copy_elements(bytes)),
    }
}

/// The bytes of a slice of plain numbers.
pub fn element_bytes<T: Element>(values: &[T]) -> &[u8] {
    // SAFETY: POD values, the byte view covers exactly their memory.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
    }
}

// ---------------------------------------------------------------------------------------
// Minifloat decoding (FP8 variants) via 256-entry tables built once from the format rules.

/// How a minifloat format spends its special encodings.
#[derive(Clone, Copy)]
enum Specials {
    /// IEEE-like: all-ones exponent is Inf (mantissa 0) or NaN.
    Ieee,
    /// "FN": no infinities, only the all-ones pattern (S.1111.111) is NaN.
    FiniteAllOnesNan,
    /// "FNUZ": no infinities, no negative zero; 0x80 is the single NaN.
    Fnuz,
}

/// The f32 NaN torch's `.float()` makes of a minifloat NaN (E4M3FN, E5M2): its sign, its
/// mantissa in the top mantissa bits, the quiet bit set (E5M2 goes through F16 → F32, which
/// quiets). 0x7F E4M3FN → 0x7FF00000, 0xFD E5M2 → 0xFFE00000.
fn minifloat_nan(bits: u8, man: u32, man_bits: u32) -> f32 {
    let sign = u32::from(bits & 0x80) << 24;
    f32::from_bits(sign | 0x7FC0_0000 | (man << (23 - man_bits)))
}

fn decode_minifloat(bits: u8, exp_bits: u32, man_bits: u32, bias: i32, specials: Specials) -> f32 {
    let sign = if bits & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((bits as u32) >> man_bits) & ((1 << exp_bits) - 1);
    let man = (bits as u32) & ((1 << man_bits) - 1);
    let exp_max = (1u32 << exp_bits) - 1;
    match specials {
        Specials::Ieee if exp == exp_max => {
            return if man == 0 {
                sign * f32::INFINITY
            } else {
                minifloat_nan(bits, man, man_bits)
            };
        }
        Specials::FiniteAllOnesNan if exp == exp_max && man == (1 << man_bits) - 1 => {
            return minifloat_nan(bits, man, man_bits);
        }
        Specials::Fnuz if bits == 0x80 => return f32::NAN,
        _ => {}
    }
    let scale = |e: i32| 2f32.powi(e);
    if exp == 0 {
        sign * (man as f32) * scale(1 - bias - man_bits as i32)
    } else {
        sign * (1.0 + man as f32 / (1u32 << man_bits) as f32) * scale(exp as i32 - bias)
    }
}

fn table(dtype: DType) -> Option<&'static [f32; 256]> {
    fn build(f: impl Fn(u8) -> f32) -> [f32; 256] {
        std::array::from_fn(|i| f(i as u8))
    }
    static E4M3: OnceLock<[f32; 256]> = OnceLock::new();
    static E5M2: OnceLock<[f32; 256]> = OnceLock::new();
    static E8M0: OnceLock<[f32; 256]> = OnceLock::new();
    static E4M3FNUZ: OnceLock<[f32; 256]> = OnceLock::new();
    static E5M2FNUZ: OnceLock<[f32; 256]> = OnceLock::new();
    Some(match dtype {
        DType::F8_E4M3 => {
            E4M3.get_or_init(|| build(|b| decode_minifloat(b, 4, 3, 7, Specials::FiniteAllOnesNan)))
        }
        DType::F8_E5M2 => {
            E5M2.get_or_init(|| build(|b| decode_minifloat(b, 5, 2, 15, Specials::Ieee)))
        }
        DType::F8_E4M3FNUZ => {
            E4M3FNUZ.get_or_init(|| build(|b| decode_minifloat(b, 4, 3, 8, Specials::Fnuz)))
        }
        DType::F8_E5M2FNUZ => {
            E5M2FNUZ.get_or_init(|| build(|b| decode_minifloat(b, 5, 2, 16, Specials::Fnuz)))
        }
        // E8M0: an unsigned power of two, 2^(e-127); 0xFF is NaN (OCP MX spec).
        DType::F8_E8M0 => E8M0.get_or_init(|| {
            build(|b| {
                if b == 0xFF {
                    f32::NAN
                } else {
                    2f32.powi(b as i32 - 127)
                }
            })
        }),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// Half precision.

/// Reference F16 → F32 from the format's definition (used to test the fast path).
pub fn f16_bits_to_f32_ref(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1F) as i32;
    let man = (bits & 0x3FF) as f32;
    match exp {
        0 => sign * man * 2f32.powi(-24),
        31 if man == 0.0 => sign * f32::INFINITY,
        31 => f32::from_bits(
            0x7FC0_0000 | ((bits as u32 & 0x8000) << 16) | ((bits as u32 & 0x3FF) << 13),
        ),
        _ => sign * (1.0 + man / 1024.0) * 2f32.powi(exp - 15),
    }
}

/// Reference BF16 → F32: the upper half of an f32.
pub fn bf16_bits_to_f32_ref(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// F16 → F32 with the x86 F16C instruction (8 values per instruction), for CPUs that have it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn f16_to_f32_f16c(src: &[u8], dst: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    let n = dst.len().min(src.len() / 2);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements are in bounds of both slices; unaligned load/store.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i * 2) as *const __m128i);
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
        i += 8;
    }
    for j in i..n {
        dst[j] = f16::from_bits(u16::from_le_bytes([src[2 * j], src[2 * j + 1]])).to_f32();
    }
}

fn f16_to_f32_chunk(src: &[u8], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::has_f16c() {
        // SAFETY: the CPU supports the instructions (checked just above).
        unsafe { f16_to_f32_f16c(src, dst) };
        return;
    }
    f16_to_f32_portable(src, dst)
}

fn f16_to_f32_portable(src: &[u8], dst: &mut [f32]) {
    if let Some(halves) = aligned_elements::<u16>(src) {
        // SAFETY: f16 is a transparent u16.
        let halves: &[f16] =
            unsafe { std::slice::from_raw_parts(halves.as_ptr() as *const f16, halves.len()) };
        halves.convert_to_f32_slice(dst);
    } else {
        // Misaligned source: stage through an aligned stack buffer, keeping the SIMD path.
        let mut stage = [f16::ZERO; 1024];
        for (s, d) in src.chunks(2048).zip(dst.chunks_mut(1024)) {
            let n = d.len();
            for (h, b) in stage[..n].iter_mut().zip(s.chunks_exact(2)) {
                *h = f16::from_bits(u16::from_le_bytes([b[0], b[1]]));
            }
            stage[..n].convert_to_f32_slice(d);
        }
    }
}

fn bf16_to_f32_chunk(src: &[u8], dst: &mut [f32]) {
    if let Some(halves) = aligned_elements::<u16>(src) {
        for (d, &h) in dst.iter_mut().zip(halves) {
            *d = f32::from_bits((h as u32) << 16);
        }
    } else {
        for (d, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
            *d = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
        }
    }
}

/// Run `convert(src_chunk, dst_chunk)` over matching chunks, on several threads when large.
fn par_convert<T: Send>(
    src: &[u8],
    src_elem: usize,
    dst: &mut [T],
    convert: impl Fn(&[u8], &mut [T]) + Sync,
) -> Result<()> {
    // Chunks stay multiples of 4096 elements so every chunk keeps the source alignment.
    let split = crate::parallel::Split::new(src_elem, 1)
        .min_units_per_thread(PARALLEL_THRESHOLD / 2)
        .align_units(4096);
    crate::parallel::for_chunks(split, src, dst, |_, s, d| {
        convert(s, d);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// Public conversions.

/// Convert the byte ranges `runs` of `src` (`(start, len)`, all of one length) into
/// consecutive equal parts of `dst`, each by `convert`, on several threads when large: a
/// strided selection (a slice of a tensor) converted where it lies, without gathering its
/// bytes into a buffer first.
pub fn convert_runs<T: Send>(
    src: &[u8],
    runs: &[(usize, usize)],
    dst: &mut [T],
    convert: impl Fn(&[u8], &mut [T]) -> Result<()> + Sync,
) -> Result<()> {
    if dst.is_empty() && runs.iter().all(|&(_, l)| l == 0) {
        return Ok(());
    }
    let run_len = runs.first().map_or(0, |r| r.1);
    if runs.iter().any(|&(_, l)| l != run_len) || !dst.len().is_multiple_of(runs.len().max(1)) {
        return Err(CoreError::invalid_argument(
            "runs of different lengths, or not one per part of the output",
        ));
    }
    let per_run = dst.len() / runs.len();
    if per_run == 0 {
        return Err(CoreError::invalid_argument("runs with an empty output"));
    }
    let split = crate::parallel::Split::new(1, per_run)
        .min_units_per_thread((PARALLEL_THRESHOLD / 2 / per_run).max(1));
    crate::parallel::for_chunks(split, runs, dst, |_, runs, dst| {
        for (&(start, len), part) in runs.iter().zip(dst.chunks_exact_mut(per_run)) {
            let bytes = start
                .checked_add(len)
                .and_then(|end| src.get(start..end))
                .ok_or_else(|| CoreError::invalid_argument("a run outside the bytes"))?;
            convert(bytes, part)?;
        }
        Ok(())
    })
}

fn check_len(dtype: DType, bytes: &[u8], n: usize) -> Result<()> {
    if dtype.byte_len(n) != Some(bytes.len()) {
        return Err(CoreError::invalid_argument(format!(
            "{} bytes do not hold {n} elements of {dtype}",
            bytes.len()
        )));
    }
    Ok(())
}

/// Decode `dst.len()` elements of `dtype` from `src` into f32 (exact for every type narrower
/// than f32; rounding for I32/U32/I64/U64/F64). Sub-byte and complex types are
/// ERR_UNSUPPORTED_DTYPE.
pub fn to_f32(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_len(dtype, src, dst.len())?;
    macro_rules! each {
        ($t:ty, $n:expr) => {
            par_convert(src, $n, dst, |s, d| {
                for (o, b) in d.iter_mut().zip(s.chunks_exact($n)) {
                    *o = <$t>::from_le_bytes(b.try_into().unwrap_or([0; $n])) as f32;
                }
            })?
        };
    }
    match dtype {
        DType::F16 => par_convert(src, 2, dst, f16_to_f32_chunk)?,
        DType::BF16 => par_convert(src, 2, dst, bf16_to_f32_chunk)?,
        DType::F32 => dst.copy_from_slice(&elements::<f32>(src)),
        DType::BOOL | DType::U8 => {
            for (o, &b) in dst.iter_mut().zip(src) {
                *o = b as f32;
            }
        }
        DType::I8 => {
            for (o, &b) in dst.iter_mut().zip(src) {
                *o = b as i8 as f32;
            }
        }
        DType::I16 => each!(i16, 2),
        DType::U16 => each!(u16, 2),
        DType::I32 => each!(i32, 4),
        DType::U32 => each!(u32, 4),
        DType::I64 => each!(i64, 8),
        DType::U64 => each!(u64, 8),
        DType::F64 => each!(f64, 8),
        d if d.upcasts_to_f32() => {
            let t = table(d)
                .ok_or_else(|| CoreError::unsupported_dtype(format!("no table for {d}")))?;
            for (o, &b) in dst.iter_mut().zip(src) {
                *o = t[b as usize];
            }
        }
        d => {
            return Err(CoreError::unsupported_dtype(format!(
                "{d} cannot be converted to F32 (read it with as: 'raw')"
            )))
        }
    }
    Ok(())
}

/// Like [`to_f32`], allocating the output.
pub fn to_f32_vec(dtype: DType, src: &[u8]) -> Result<Vec<f32>> {
    let n = element_count(dtype, src)?;
    let mut out = vec![0f32; n];
    to_f32(dtype, src, &mut out)?;
    Ok(out)
}

/// Decode to f64 (exact for every real type except I64/U64 beyond 2^53).
pub fn to_f64_vec(dtype: DType, src: &[u8]) -> Result<Vec<f64>> {
    let mut out = vec![0f64; element_count(dtype, src)?];
    to_f64(dtype, src, &mut out)?;
    Ok(out)
}

/// Decode `dst.len()` elements of `dtype` from `src` into f64 (see [`to_f64_vec`]).
pub fn to_f64(dtype: DType, src: &[u8], dst: &mut [f64]) -> Result<()> {
    if element_count(dtype, src)? != dst.len() {
        return Err(CoreError::invalid_argument(format!(
            "{} bytes do not hold {} elements of {dtype}",
            src.len(),
            dst.len()
        )));
    }
    macro_rules! each {
        ($t:ty, $n:expr) => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact($n)) {
                *o = <$t>::from_le_bytes(b.try_into().unwrap_or([0; $n])) as f64;
            }
        };
    }
    match dtype {
        DType::F64 => dst.copy_from_slice(&elements::<f64>(src)),
        DType::I32 => each!(i32, 4),
        DType::U32 => each!(u32, 4),
        DType::I64 => each!(i64, 8),
        DType::U64 => each!(u64, 8),
        _ => {
            // Through f32 (exact for every other type), a stack-sized piece at a time.
            const PIECE: usize = 4096;
            let size = dtype.size().unwrap_or(1);
            let mut stage = [0f32; PIECE];
            for (s, d) in src.chunks(PIECE * size).zip(dst.chunks_mut(PIECE)) {
                let stage = &mut stage[..d.len()];
                to_f32(dtype, s, stage)?;
                for (o, &v) in d.iter_mut().zip(stage.iter()) {
                    *o = f64::from(v);
                }
            }
            // An unsupported type with no elements still answers as `to_f32` does.
            if dst.is_empty() {
                to_f32(dtype, src, &mut [])?;
            }
        }
    }
    Ok(())
}

/// Number of whole elements of `dtype` in `src`.
pub fn element_count(dtype: DType, src: &[u8]) -> Result<usize> {
    let size = dtype
        .size()
        .ok_or_else(|| CoreError::unsupported_dtype(format!("{dtype} packs below a byte")))?;
    if !src.len().is_multiple_of(size) {
        return Err(CoreError::invalid_argument(format!(
            "{} bytes are not a whole number of {dtype} elements",
            src.len()
        )));
    }
    Ok(src.len() / size)
}

/// Encode f32 values as `dtype`, rounding to nearest even for F16/BF16 (NaN stays NaN).
pub fn encode_f32(values: &[f32], dtype: DType) -> Result<Vec<u8>> {
    Ok(match dtype {
        DType::F32 => element_bytes(values).to_vec(),
        DType::F64 => values
            .iter()
            .flat_map(|&v| (v as f64).to_le_bytes())
            .collect(),
        DType::F16 => {
            let mut out = Vec::with_capacity(values.len() * 2);
            encode_f16_into(values, &mut out);
            out
        }
        DType::BF16 => {
            let mut v = vec![bf16::ZERO; values.len()];
            v.convert_from_f32_slice(values);
            element_bytes(v.reinterpret_cast()).to_vec()
        }
        other => return encode_f64(&values.iter().map(|&v| v as f64).collect::<Vec<_>>(), other),
    })
}

/// f32 → F16 little-endian bytes, replacing `out`'s contents and reusing its allocation
/// (a caller converting piece by piece allocates once). Converts through a stack buffer,
/// so the SIMD slice conversion runs without an aligned `&mut [f16]` over `out`.
pub fn encode_f16_into(values: &[f32], out: &mut Vec<u8>) {
    const CHUNK: usize = 4096;
    out.clear();
    out.reserve(values.len() * 2);
    let mut buf = [f16::ZERO; CHUNK];
    for chunk in values.chunks(CHUNK) {
        let halves = &mut buf[..chunk.len()];
        halves.convert_from_f32_slice(chunk);
        out.extend_from_slice(element_bytes(halves.reinterpret_cast()));
    }
}

/// f64 → f32 rounding to odd: truncate, then set the last bit if anything was lost. A second
/// round-to-nearest-even to a format at least two bits narrower (F16, BF16) then gives the
/// correctly rounded result, avoiding the double-rounding error of going through RNE f32.
fn f64_to_f32_round_to_odd(v: f64) -> f32 {
    if v.is_nan() || v.is_infinite() {
        return v as f32;
    }
    let mut f = v as f32;
    if (f as f64).abs() > v.abs() {
        // Step one ulp toward zero (f is finite or ±inf from overflow: both step to a finite).
        f = f32::from_bits(f.to_bits() - 1);
    }
    if f as f64 != v {
        f = f32::from_bits(f.to_bits() | 1);
    }
    f
}

/// Encode f64 values (JS numbers) as `dtype`. Floats round to nearest even (F16/BF16 directly
/// from f64, no double rounding); integer types require exact integers in range.
pub fn encode_f64(values: &[f64], dtype: DType) -> Result<Vec<u8>> {
    fn int<const N: usize>(
        values: &[f64],
        min: f64,
        max: f64,
        dtype: DType,
        enc: impl Fn(f64) -> [u8; N],
    ) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(values.len() * N);
        for (i, &v) in values.iter().enumerate() {
            if v.fract() != 0.0 || !(min..=max).contains(&v) {
                return Err(CoreError::invalid_argument(format!(
                    "element {i} ({v}) is not a {dtype} integer"
                )));
            }
            out.extend_from_slice(&enc(v));
        }
        Ok(out)
    }
    Ok(match dtype {
        DType::F64 => element_bytes(values).to_vec(),
        DType::F32 => values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect(),
        DType::F16 => values
            .iter()
            .flat_map(|&v| {
                f16::from_f32(f64_to_f32_round_to_odd(v))
                    .to_bits()
                    .to_le_bytes()
            })
            .collect(),
        DType::BF16 => values
            .iter()
            .flat_map(|&v| {
                bf16::from_f32(f64_to_f32_round_to_odd(v))
                    .to_bits()
                    .to_le_bytes()
            })
            .collect(),
        DType::BOOL => int(values, 0.0, 1.0, dtype, |v| [v as u8])?,
        DType::U8 => int(values, 0.0, 255.0, dtype, |v| [v as u8])?,
        DType::I8 => int(values, -128.0, 127.0, dtype, |v| (v as i8).to_le_bytes())?,
        DType::U16 => int(values, 0.0, 65535.0, dtype, |v| (v as u16).to_le_bytes())?,
        DType::I16 => int(values, -32768.0, 32767.0, dtype, |v| {
            (v as i16).to_le_bytes()
        })?,
        DType::U32 => int(values, 0.0, u32::MAX as f64, dtype, |v| {
            (v as u32).to_le_bytes()
        })?,
        DType::I32 => int(values, i32::MIN as f64, i32::MAX as f64, dtype, |v| {
            (v as i32).to_le_bytes()
        })?,
        // JS numbers are exact up to 2^53; larger 64-bit integers come as BigInt arrays.
        DType::U64 => int(values, 0.0, 9007199254740992.0, dtype, |v| {
            (v as u64).to_le_bytes()
        })?,
        DType::I64 => int(
            values,
            -9007199254740992.0,
            9007199254740992.0,
            dtype,
            |v| (v as i64).to_le_bytes(),
        )?,
        other => {
            return Err(CoreError::unsupported_dtype(format!(
                "numbers cannot be encoded as {other}; pass its raw bytes in a Uint8Array"
            )))
        }
    })
}

/// Re-encode elements of `src_dtype` as `dst_dtype` (the writer's input rule).
///
/// Same dtype: the bytes as they are. `U8` source: raw bytes for any target (how sub-byte
/// and FP8 data, or any pre-encoded bytes, are written). `U16` source with an F16/BF16
/// target: raw half-precision bits. Anything else converts by value (floats round to
/// nearest even; integers must be exact and in range).
pub fn convert_bytes<'a>(
    src_dtype: DType,
    src: &'a [u8],
    dst_dtype: DType,
) -> Result<std::borrow::Cow<'a, [u8]>> {
    use std::borrow::Cow;
    if src_dtype == dst_dtype
        || src_dtype == DType::U8
        || (src_dtype == DType::U16 && matches!(dst_dtype, DType::F16 | DType::BF16))
    {
        return Ok(Cow::Borrowed(src));
    }
    if matches!(src_dtype, DType::I64 | DType::U64) {
        return Err(CoreError::invalid_argument(format!(
            "64-bit integer data can only be written as {src_dtype}, not {dst_dtype}"
        )));
    }
    if src_dtype == DType::F32 {
        return encode_f32(&elements::<f32>(src), dst_dtype).map(Cow::Owned);
    }
    encode_f64(&to_f64_vec(src_dtype, src)?, dst_dtype).map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_convert_where_they_lie_as_a_gather_then_a_conversion_would() {
        // Columns 3..3+w of a [rows, 40] BF16 matrix, enough rows for several threads.
        let (rows, cols, w) = (70_000, 40, 17);
        let values: Vec<f32> = (0..rows * cols).map(|i| (i % 977) as f32 - 300.5).collect();
        let src = encode_f32(&values, DType::BF16).unwrap();
        let runs: Vec<(usize, usize)> = (0..rows).map(|r| ((r * cols + 3) * 2, w * 2)).collect();
        let mut gathered = Vec::new();
        for &(s, l) in &runs {
            gathered.extend_from_slice(&src[s..s + l]);
        }
        let want = to_f32_vec(DType::BF16, &gathered).unwrap();
        let mut got = vec![0f32; rows * w];
        convert_runs(&src, &runs, &mut got, |s, d| to_f32(DType::BF16, s, d)).unwrap();
        assert_eq!(got, want);
        // Bad runs are errors, never a panic.
        let mut out = vec![0f32; 2];
        let e = |runs: &[(usize, usize)], out: &mut [f32]| {
            convert_runs(&src, runs, out, |s, d| to_f32(DType::BF16, s, d)).unwrap_err()
        };
        assert_eq!(
            e(&[(0, 2), (4, 4)], &mut out).code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            e(&[(src.len(), 2), (0, 2)], &mut out).code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            e(&[(0, 2), (2, 2), (4, 2)], &mut out).code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            e(&[(usize::MAX, 2), (0, 2)], &mut out).code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert!(convert_runs(&src, &[], &mut [], |s, d| to_f32(DType::BF16, s, d)).is_ok());
    }

    fn same(a: f32, b: f32) -> bool {
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
    }

    #[test]
    fn encode_f16_into_matches_elementwise_rounding_across_chunks_and_reuses_the_buffer() {
        // Every f16 value, the halfway points between neighbours (round to even), and values
        // past the largest f16 (to infinity), over more than two 4096-element chunks.
        let values: Vec<f32> = (0..=u16::MAX)
            .map(|b| f16::from_bits(b).to_f32())
            .chain((0..20_000u32).map(|i| f32::from_bits(0x3800_1000 + i * 0x2000)))
            .chain([65520.0, 1e9, -1e9, f32::MIN_POSITIVE, -0.0])
            .collect();
        let mut out = Vec::new();
        for round in 0..2 {
            encode_f16_into(&values, &mut out);
            assert_eq!(out.len(), values.len() * 2);
            for (i, &v) in values.iter().enumerate() {
                let got = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
                let want = f16::from_f32(v).to_bits();
                // NaN payloads may differ between SIMD and scalar conversion; NaN must stay NaN.
                assert!(
                    got == want || (f16::from_bits(got).is_nan() && v.is_nan()),
                    "round {round}, value {i} ({v:e}): {got:#06x} vs {want:#06x}"
                );
            }
            assert_eq!(encode_f32(&values, DType::F16).unwrap(), out);
        }
        let capacity = out.capacity();
        encode_f16_into(&values[..10], &mut out);
        assert_eq!((out.len(), out.capacity()), (20, capacity));
    }

    #[test]
    fn all_f16_patterns_match_reference_aligned_and_not() {
        let bytes: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        for src in [&bytes[..], &shifted[1..]] {
            let out = to_f32_vec(DType::F16, src).unwrap();
            for (bits, v) in (0..=u16::MAX).zip(out) {
                assert!(
                    same(v, f16_bits_to_f32_ref(bits)),
                    "{bits:#06x}: {v} vs {}",
                    f16_bits_to_f32_ref(bits)
                );
            }
        }
    }

    #[test]
    fn all_bf16_patterns_match_reference_aligned_and_not() {
        let bytes: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        for src in [&bytes[..], &shifted[1..]] {
            let out = to_f32_vec(DType::BF16, src).unwrap();
            for (bits, v) in (0..=u16::MAX).zip(out) {
                assert!(same(v, bf16_bits_to_f32_ref(bits)), "{bits:#06x}");
            }
        }
    }

    #[test]
    fn simd_and_portable_f16_paths_agree() {
        let bytes: Vec<u8> = (0..=u16::MAX)
            .chain([1, 2, 3])
            .flat_map(u16::to_le_bytes)
            .collect();
        let n = bytes.len() / 2;
        let mut fast = vec![0f32; n];
        let mut portable = vec![0f32; n];
        f16_to_f32_chunk(&bytes, &mut fast);
        f16_to_f32_portable(&bytes, &mut portable);
        for (a, b) in fast.iter().zip(&portable) {
            assert!(same(*a, *b));
        }
    }

    #[test]
    fn f16_special_values() {
        assert_eq!(f16_bits_to_f32_ref(0x0001), 2f32.powi(-24));
        assert_eq!(f16_bits_to_f32_ref(0x7BFF), 65504.0);
        assert_eq!(f16_bits_to_f32_ref(0xFC00), f32::NEG_INFINITY);
        assert!(f16_bits_to_f32_ref(0x7E00).is_nan());
        assert_eq!(f16_bits_to_f32_ref(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(f16_bits_to_f32_ref(0x3555), 0.33325195);
    }

    #[test]
    fn large_conversion_uses_threads_and_stays_exact() {
        let n = PARALLEL_THRESHOLD * 2 + 77;
        let bytes: Vec<u8> = (0..n)
            .flat_map(|i| ((i * 7919) as u16).to_le_bytes())
            .collect();
        let out = to_f32_vec(DType::F16, &bytes).unwrap();
        let outb = to_f32_vec(DType::BF16, &bytes).unwrap();
        for i in (0..n).step_by(997).chain([n - 1]) {
            let bits = (i * 7919) as u16;
            assert!(same(out[i], f16_bits_to_f32_ref(bits)));
            assert!(same(outb[i], bf16_bits_to_f32_ref(bits)));
        }
    }

    #[test]
    fn fp8_known_values() {
        let dec = |d: DType, b: u8| to_f32_vec(d, &[b]).unwrap()[0];
        // E4M3FN: max 448, 0x7F NaN, smallest subnormal 2^-9.
        assert_eq!(dec(DType::F8_E4M3, 0x7E), 448.0);
        assert!(dec(DType::F8_E4M3, 0x7F).is_nan());
        assert!(dec(DType::F8_E4M3, 0xFF).is_nan());
        assert_eq!(dec(DType::F8_E4M3, 0x01), 2f32.powi(-9));
        assert_eq!(dec(DType::F8_E4M3, 0x38), 1.0);
        assert_eq!(dec(DType::F8_E4M3, 0x80).to_bits(), (-0.0f32).to_bits());
        // E5M2: IEEE-like, max 57344, 0x7C = inf.
        assert_eq!(dec(DType::F8_E5M2, 0x7B), 57344.0);
        assert_eq!(dec(DType::F8_E5M2, 0x7C), f32::INFINITY);
        assert_eq!(dec(DType::F8_E5M2, 0xFC), f32::NEG_INFINITY);
        assert!(dec(DType::F8_E5M2, 0x7D).is_nan());
        assert_eq!(dec(DType::F8_E5M2, 0x01), 2f32.powi(-16));
        // FNUZ: 0x80 NaN, bias one larger.
        assert!(dec(DType::F8_E4M3FNUZ, 0x80).is_nan());
        assert_eq!(dec(DType::F8_E4M3FNUZ, 0x7F), 240.0);
        assert_eq!(dec(DType::F8_E4M3FNUZ, 0x40), 1.0);
        assert!(dec(DType::F8_E5M2FNUZ, 0x80).is_nan());
        assert_eq!(dec(DType::F8_E5M2FNUZ, 0x7F), 57344.0);
        assert_eq!(dec(DType::F8_E5M2FNUZ, 0x40), 1.0);
        // NaNs keep sign and payload as torch's `.float()` does (quiet bit set): the bits of
        // ../shared/fixtures/pytorch/expected/zip/all_dtypes.pt/1{0,1}.f32.bin, written by torch.
        for (d, b, want) in [
            (DType::F8_E4M3, 0x7F, 0x7FF0_0000u32),
            (DType::F8_E4M3, 0xFF, 0xFFF0_0000),
            (DType::F8_E5M2, 0x7D, 0x7FE0_0000),
            (DType::F8_E5M2, 0x7E, 0x7FC0_0000),
            (DType::F8_E5M2, 0x7F, 0x7FE0_0000),
            (DType::F8_E5M2, 0xFD, 0xFFE0_0000),
            (DType::F8_E5M2, 0xFE, 0xFFC0_0000),
            (DType::F8_E5M2, 0xFF, 0xFFE0_0000),
        ] {
            assert_eq!(dec(d, b).to_bits(), want, "{d:?} {b:#04x}");
        }
        // E8M0: powers of two.
        assert_eq!(dec(DType::F8_E8M0, 127), 1.0);
        assert_eq!(dec(DType::F8_E8M0, 0), 2f32.powi(-127));
        assert!(dec(DType::F8_E8M0, 0xFF).is_nan());
    }

    #[test]
    fn encode_rounds_to_nearest_even() {
        // 1 + 2^-11 lies exactly between two f16 values: ties to even (1.0).
        let b = encode_f32(
            &[1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), f32::NAN],
            DType::F16,
        )
        .unwrap();
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3C00);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 0x3C02);
        assert!(f16_bits_to_f32_ref(u16::from_le_bytes([b[4], b[5]])).is_nan());
        let b = encode_f32(&[1.0 + 2f32.powi(-8)], DType::BF16).unwrap();
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3F80);
        let b = encode_f64(&[1.0 + 2f64.powi(-8) + 2f64.powi(-40)], DType::BF16).unwrap();
        assert_eq!(
            u16::from_le_bytes([b[0], b[1]]),
            0x3F81,
            "no double rounding from f64"
        );
    }

    #[test]
    fn encode_integers_checks_range() {
        assert_eq!(
            encode_f64(&[-1.0, 2.0], DType::I16).unwrap(),
            vec![0xFF, 0xFF, 2, 0]
        );
        assert_eq!(
            encode_f64(&[1.5], DType::I32).unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            encode_f64(&[256.0], DType::U8).unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            encode_f64(&[2.0], DType::BOOL).unwrap_err().code(),
            "ERR_INVALID_ARGUMENT"
        );
        assert_eq!(
            encode_f64(&[1.0], DType::F4).unwrap_err().code(),
            "ERR_UNSUPPORTED_DTYPE"
        );
    }

    #[test]
    fn unsupported_targets() {
        assert_eq!(
            to_f32_vec(DType::C64, &[0; 8]).unwrap_err().code(),
            "ERR_UNSUPPORTED_DTYPE"
        );
        assert_eq!(
            to_f32_vec(DType::F4, &[0; 1]).unwrap_err().code(),
            "ERR_UNSUPPORTED_DTYPE"
        );
    }

    #[test]
    fn integer_and_double_conversions() {
        let b: Vec<u8> = [-5i64, i64::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            to_f64_vec(DType::I64, &b).unwrap(),
            vec![-5.0, i64::MAX as f64]
        );
        let b: Vec<u8> = [0.1f64].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(to_f32_vec(DType::F64, &b).unwrap(), vec![0.1f32]);
        assert_eq!(to_f64_vec(DType::F64, &b).unwrap(), vec![0.1f64]);
    }

    #[test]
    fn to_f64_through_f32_matches_elementwise_over_pieces_and_misaligned_sources() {
        // Every BF16 and F16 bit pattern (more than 4096 pieces' worth), from an odd address.
        for dtype in [DType::BF16, DType::F16] {
            let mut raw = vec![0u8; 1];
            raw.extend((0..=u16::MAX).flat_map(|b| b.to_le_bytes()));
            let src = &raw[1..];
            let got = to_f64_vec(dtype, src).unwrap();
            let want = to_f32_vec(dtype, src).unwrap();
            assert_eq!(got.len(), 65536);
            for (g, w) in got.iter().zip(&want) {
                assert!(same(*g as f32, *w) && (g.is_nan() || *g == f64::from(*w)));
            }
        }
        let fp8: Vec<u8> = (0..=255).collect();
        let got = to_f64_vec(DType::F8_E4M3, &fp8).unwrap();
        let want = to_f32_vec(DType::F8_E4M3, &fp8).unwrap();
        assert!(got.iter().zip(&want).all(|(g, w)| same(*g as f32, *w)));
        // Wrong output lengths and types without an f64 form are errors, empty or not.
        assert!(to_f64(DType::BF16, &[0, 0], &mut [0.0; 2]).is_err());
        assert_eq!(
            to_f64(DType::C64, &[], &mut []).unwrap_err().code(),
            "ERR_UNSUPPORTED_DTYPE"
        );
        assert_eq!(
            to_f64_vec(DType::C64, &[0; 8]).unwrap_err().code(),
            "ERR_UNSUPPORTED_DTYPE"
        );
        assert_eq!(
            to_f64_vec(DType::F4, &[0]).unwrap_err().code(),
            "ERR_UNSUPPORTED_DTYPE"
        );
    }
}
