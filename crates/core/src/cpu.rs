//! The one probe of the CPU's optional instructions, asked once per process. Every kernel
//! with a compiled fast copy (casts, block codecs, model row loops) chooses it from here, so
//! one machine always takes the same paths.

/// The optional x86-64 instructions our fast kernels use (all false elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Features {
    avx: bool,
    avx2: bool,
    f16c: bool,
}

fn features() -> Features {
    static FEATURES: std::sync::OnceLock<Features> = std::sync::OnceLock::new();
    *FEATURES.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Features {
                avx: std::arch::is_x86_feature_detected!("avx"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                f16c: std::arch::is_x86_feature_detected!("f16c"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Features {
                avx: false,
                avx2: false,
                f16c: false,
            }
        }
    })
}

/// AVX2: the model row loops' fast copy.
pub fn has_avx2() -> bool {
    features().avx2
}

/// AVX and F16C: the 8-wide half-to-single conversion of casts.
pub fn has_f16c() -> bool {
    let f = features();
    f.avx && f.f16c
}

/// AVX2 and F16C: the block codecs' fast copy.
pub fn has_avx2_f16c() -> bool {
    let f = features();
    f.avx2 && f.f16c
}
