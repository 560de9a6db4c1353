//! Host element types and their dtypes.

use ferrotile_ir::DType;
pub use half::{bf16, f16};

mod sealed {
    /// Only the element types below: a kernel reads a buffer by the
    /// dtype its element type claims, so that claim must be ours.
    pub trait Sealed {}
}

/// A Rust type that can live in a ferrotile [`crate::Buffer`] or be passed as
/// a scalar kernel argument: `f32`, `f16`, `bf16`, `i32`, `u32`, `i64`,
/// `i8`, `u8`, `bool` (sealed: the runtime trusts `DTYPE` and the byte
/// conversions).
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static + std::fmt::Debug + PartialEq {
    /// The IR dtype of this type (`f32` → `DType::F32`, ...).
    const DTYPE: DType;
    /// The values' bytes, little-endian, as buffers hold them.
    fn to_le_bytes_vec(v: &[Self]) -> Vec<u8>;
    /// Values from little-endian bytes (a whole number of elements).
    fn from_le_bytes_slice(b: &[u8]) -> Vec<Self>;
    /// The value as a scalar argument.
    fn to_scalar(self) -> Scalar;
}

/// The element types a dtype-generic kernel (`<T: Float>`) accepts.
pub trait FloatElement: Element {
    /// The nearest value of this type (round to nearest even).
    fn from_f64(v: f64) -> Self;
    /// The value, exactly (every f32/f16/bf16/fp8 value is an f64).
    fn to_f64(self) -> f64;
}

macro_rules! elem {
    ($t:ty, $d:expr, $n:expr, |$v:ident| $sc:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_le_bytes_vec(v: &[Self]) -> Vec<u8> {
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
            fn from_le_bytes_slice(b: &[u8]) -> Vec<Self> {
                b.chunks_exact($n)
                    .map(|c| {
                        let mut a = [0u8; $n];
                        a.copy_from_slice(c);
                        <$t>::from_le_bytes(a)
                    })
                    .collect()
            }
            fn to_scalar(self) -> Scalar {
                let $v = self;
                $sc
            }
        }
    };
}

elem!(f32, DType::F32, 4, |v| Scalar::F(v as f64, DType::F32));
elem!(f16, DType::F16, 2, |v| Scalar::F(v.to_f64(), DType::F16));
elem!(bf16, DType::BF16, 2, |v| Scalar::F(v.to_f64(), DType::BF16));
elem!(i32, DType::I32, 4, |v| Scalar::I(v as i64, DType::I32));
elem!(u32, DType::U32, 4, |v| Scalar::I(v as i64, DType::U32));
elem!(i64, DType::I64, 8, |v| Scalar::I(v, DType::I64));
elem!(i8, DType::I8, 1, |v| Scalar::I(v as i64, DType::I8));
elem!(u8, DType::U8, 1, |v| Scalar::I(v as i64, DType::U8));

macro_rules! fp8 {
    ($t:ident, $d:expr, $f:expr, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Holds the code; [`FloatElement::from_f64`] rounds to nearest-even
        /// and saturates to the largest finite value (NaN stays NaN), as the
        /// kernels' casts do (`ferrotile_ir::numeric::fp8_encode`).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $t(pub u8);

        impl $t {
            /// The nearest value, ties to even; out of range saturates to
            /// the largest finite value; NaN stays NaN.
            pub fn from_f32(v: f32) -> Self {
                $t(ferrotile_ir::numeric::fp8_encode(v, $f))
            }
            /// The value as f32 (exact).
            pub fn to_f32(self) -> f32 {
                ferrotile_ir::numeric::fp8_decode(self.0, $f)
            }
        }

        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_le_bytes_vec(v: &[Self]) -> Vec<u8> {
                v.iter().map(|x| x.0).collect()
            }
            fn from_le_bytes_slice(b: &[u8]) -> Vec<Self> {
                b.iter().map(|&x| $t(x)).collect()
            }
            fn to_scalar(self) -> Scalar {
                Scalar::F(self.to_f32() as f64, $d)
            }
        }

        impl FloatElement for $t {
            /// Rounded once (an f64 → f32 round to odd, then to the code:
            /// correct to nearest-even, as for f16).
            fn from_f64(v: f64) -> Self {
                $t::from_f32(ferrotile_ir::numeric::f32_round_to_odd(v))
            }
            fn to_f64(self) -> f64 {
                self.to_f32() as f64
            }
        }
    };
}

fp8!(
    f8e4m3,
    DType::F8E4M3,
    ferrotile_ir::numeric::Fp8::E4M3,
    "An 8-bit float, OCP e4m3: 4 exponent bits, 3 mantissa bits, no infinities, ±448 the largest finite value."
);
fp8!(f8e5m2, DType::F8E5M2, ferrotile_ir::numeric::Fp8::E5M2, "An 8-bit float, OCP e5m2: 5 exponent bits, 2 mantissa bits, ±57344 the largest finite value.");

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_le_bytes_vec(v: &[Self]) -> Vec<u8> {
        v.iter().map(|&b| b as u8).collect()
    }
    fn from_le_bytes_slice(b: &[u8]) -> Vec<Self> {
        b.iter().map(|&x| x != 0).collect()
    }
    fn to_scalar(self) -> Scalar {
        Scalar::I(self as i64, DType::Bool)
    }
}

impl FloatElement for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}
impl FloatElement for f16 {
    /// Correctly rounded (nearest-even); `half`'s own `from_f64` rounds twice.
    fn from_f64(v: f64) -> Self {
        ferrotile_ir::numeric::f16_from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
}
impl FloatElement for bf16 {
    /// Correctly rounded (nearest-even); `half`'s own `from_f64` rounds twice.
    fn from_f64(v: f64) -> Self {
        ferrotile_ir::numeric::bf16_from_f64(v)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
}

/// A scalar kernel argument: its value (f64 holds every f32/f16/bf16, i64
/// every integer dtype) and dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A floating-point value and its dtype.
    F(f64, DType),
    /// An integer (or bool) value and its dtype.
    I(i64, DType),
}

impl Scalar {
    /// The scalar's dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Scalar::F(_, d) | Scalar::I(_, d) => *d,
        }
    }
}
