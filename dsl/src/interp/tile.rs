//! Tile values of the interpreter and the elementwise arithmetic on them.
//!
//! The semantics here are the reference every backend must match:
//! - f16/bf16 arithmetic is done in f32 and rounded to nearest-even after
//!   every op (for +, -, *, /, sqrt this equals correctly rounded f16/bf16);
//! - integer arithmetic wraps; `/` and `%` truncate toward zero (C/Rust);
//!   `x / 0 = x`, `x % 0 = 0`, `MIN / -1 = MIN` (docs/semantics.md); shifts
//!   by ≥ the bit width give 0 (or the sign for arithmetic right shifts of
//!   signed types);
//! - float → int casts truncate and saturate, NaN → 0; int → float and
//!   f32 → f16/bf16 round to nearest-even;
//! - `maximum`/`minimum` return the non-NaN operand when one is NaN.

use ferrotile_ir::{BinOp, CmpOp, DType, UnOp};
use half::{bf16, f16};
use std::borrow::Cow;

/// A block view's value: a window of a pointer parameter's buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewVal {
    /// The kernel parameter whose buffer it views.
    pub param: u32,
    /// Element offset of the view's origin.
    pub base: i64,
    /// Extent along each axis (elements outside read as the fill value).
    pub shape: Vec<i64>,
    /// Element stride along each axis.
    pub strides: Vec<i64>,
}

/// The elements of a tile, one vector per dtype (row-major).
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// `bool`.
    B(Vec<bool>),
    /// `i8`.
    I8(Vec<i8>),
    /// `u8`.
    U8(Vec<u8>),
    /// `i32`.
    I32(Vec<i32>),
    /// `u32`.
    U32(Vec<u32>),
    /// `i64`.
    I64(Vec<i64>),
    /// `f16`.
    F16(Vec<f16>),
    /// `bf16`.
    BF16(Vec<bf16>),
    /// `f32`.
    F32(Vec<f32>),
    /// fp8 codes (`ferrotile_ir::numeric::fp8_decode` gives the values).
    F8E4M3(Vec<u8>),
    /// fp8 e5m2 codes.
    F8E5M2(Vec<u8>),
    /// (parameter index, element offset) per element.
    Ptr(Vec<(u32, i64)>),
    /// A block view (a scalar value).
    View(Box<ViewVal>),
}

/// A value of the interpreter: a shape (empty for scalars) and its elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Tile {
    /// Extent along each axis.
    pub shape: Vec<usize>,
    /// The elements, row-major.
    pub data: Data,
}

macro_rules! each_vec {
    ($d:expr, $v:ident => $e:expr) => {
        match $d {
            Data::B($v) => $e,
            Data::I8($v) => $e,
            Data::U8($v) => $e,
            Data::I32($v) => $e,
            Data::U32($v) => $e,
            Data::I64($v) => $e,
            Data::F16($v) => $e,
            Data::BF16($v) => $e,
            Data::F32($v) => $e,
            Data::F8E4M3($v) => $e,
            Data::F8E5M2($v) => $e,
            Data::Ptr($v) => $e,
            Data::View(_) => panic!("view has no elements"),
        }
    };
}

macro_rules! map_vec {
    ($d:expr, $v:ident => $e:expr) => {
        match $d {
            Data::B($v) => Data::B($e),
            Data::I8($v) => Data::I8($e),
            Data::U8($v) => Data::U8($e),
            Data::I32($v) => Data::I32($e),
            Data::U32($v) => Data::U32($e),
            Data::I64($v) => Data::I64($e),
            Data::F16($v) => Data::F16($e),
            Data::BF16($v) => Data::BF16($e),
            Data::F32($v) => Data::F32($e),
            Data::F8E4M3($v) => Data::F8E4M3($e),
            Data::F8E5M2($v) => Data::F8E5M2($e),
            Data::Ptr($v) => Data::Ptr($e),
            Data::View(v) => Data::View(v.clone()),
        }
    };
}

impl Data {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::View(_) => 1,
            d => each_vec!(d, v => v.len()),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements' dtype (`Ptr` and `View` report I64: addresses).
    pub fn dtype(&self) -> DType {
        match self {
            Data::B(_) => DType::Bool,
            Data::I8(_) => DType::I8,
            Data::U8(_) => DType::U8,
            Data::I32(_) => DType::I32,
            Data::U32(_) => DType::U32,
            Data::I64(_) => DType::I64,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::F32(_) => DType::F32,
            Data::F8E4M3(_) => DType::F8E4M3,
            Data::F8E5M2(_) => DType::F8E5M2,
            Data::Ptr(_) | Data::View(_) => DType::I64,
        }
    }

    /// Gather elements by index (used by every shape op).
    pub fn gather(&self, idx: &[usize]) -> Data {
        map_vec!(self, v => idx.iter().map(|&i| v[i]).collect())
    }

    /// Elementwise choice: `cond ? self : other`.
    pub fn select(cond: &[bool], a: &Data, b: &Data) -> Data {
        match (a, b) {
            (Data::B(x), Data::B(y)) => Data::B(sel(cond, x, y)),
            (Data::I8(x), Data::I8(y)) => Data::I8(sel(cond, x, y)),
            (Data::U8(x), Data::U8(y)) => Data::U8(sel(cond, x, y)),
            (Data::I32(x), Data::I32(y)) => Data::I32(sel(cond, x, y)),
            (Data::U32(x), Data::U32(y)) => Data::U32(sel(cond, x, y)),
            (Data::I64(x), Data::I64(y)) => Data::I64(sel(cond, x, y)),
            (Data::F16(x), Data::F16(y)) => Data::F16(sel(cond, x, y)),
            (Data::BF16(x), Data::BF16(y)) => Data::BF16(sel(cond, x, y)),
            (Data::F32(x), Data::F32(y)) => Data::F32(sel(cond, x, y)),
            (Data::F8E4M3(x), Data::F8E4M3(y)) => Data::F8E4M3(sel(cond, x, y)),
            (Data::F8E5M2(x), Data::F8E5M2(y)) => Data::F8E5M2(sel(cond, x, y)),
            (Data::Ptr(x), Data::Ptr(y)) => Data::Ptr(sel(cond, x, y)),
            _ => panic!("select of mismatched data"),
        }
    }

    /// `n` copies of the first element.
    pub fn splat(&self, n: usize) -> Data {
        map_vec!(self, v => vec![v[0]; n])
    }

    /// All values as f32 (floats exactly; ints rounded).
    pub fn as_f32(&self) -> Cow<'_, [f32]> {
        match self {
            Data::F32(v) => Cow::Borrowed(v),
            Data::F16(v) => Cow::Owned(v.iter().map(|x| x.to_f32()).collect()),
            Data::BF16(v) => Cow::Owned(v.iter().map(|x| x.to_f32()).collect()),
            Data::F8E4M3(v) => Cow::Owned(v.iter().map(|&x| fp8_decode(x, Fp8::E4M3)).collect()),
            Data::F8E5M2(v) => Cow::Owned(v.iter().map(|&x| fp8_decode(x, Fp8::E5M2)).collect()),
            d => Cow::Owned(d.as_i64().iter().map(|&x| x as f32).collect()),
        }
    }

    /// All values as i64 (bools 0/1; floats truncated and saturated, NaN → 0).
    pub fn as_i64(&self) -> Cow<'_, [i64]> {
        match self {
            Data::I64(v) => Cow::Borrowed(v),
            Data::B(v) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
            Data::I8(v) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
            Data::U8(v) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
            Data::I32(v) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
            Data::U32(v) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
            Data::F16(_) | Data::BF16(_) | Data::F32(_) | Data::F8E4M3(_) | Data::F8E5M2(_) => Cow::Owned(self.as_f32().iter().map(|&x| x as i64).collect()),
            Data::Ptr(_) | Data::View(_) => panic!("pointer as integer"),
        }
    }

    /// The elements of a `bool` tile (a mask).
    pub fn as_bool(&self) -> &[bool] {
        match self {
            Data::B(v) => v,
            _ => panic!("expected a bool tile"),
        }
    }

    /// Build from f32 values, rounding to `d` (a float dtype).
    pub fn from_f32(v: Vec<f32>, d: DType) -> Data {
        match d {
            DType::F32 => Data::F32(v),
            DType::F16 => Data::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
            DType::F8E4M3 => Data::F8E4M3(v.iter().map(|&x| fp8_encode(x, Fp8::E4M3)).collect()),
            DType::F8E5M2 => Data::F8E5M2(v.iter().map(|&x| fp8_encode(x, Fp8::E5M2)).collect()),
            _ => Data::from_i64(v.iter().map(|&x| x as i64).collect(), d),
        }
    }

    /// Build from f64 values, each rounded once to the float dtype `d`.
    pub fn from_f64(v: Vec<f64>, d: DType) -> Data {
        match d {
            DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F16 => Data::F16(v.iter().map(|&x| f16_from_f64(x)).collect()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| bf16_from_f64(x)).collect()),
            // (through a round-to-odd f32: one rounding)
            DType::F8E4M3 | DType::F8E5M2 => Data::from_f32(v.iter().map(|&x| ferrotile_ir::numeric::f32_round_to_odd(x)).collect(), d),
            _ => Data::from_i64(v.iter().map(|&x| x as i64).collect(), d),
        }
    }

    /// Build from i64 values, wrapping to `d` (an integer or bool dtype).
    pub fn from_i64(v: Vec<i64>, d: DType) -> Data {
        match d {
            DType::Bool => Data::B(v.iter().map(|&x| x != 0).collect()),
            DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
            DType::U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
            DType::I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
            DType::U32 => Data::U32(v.iter().map(|&x| x as u32).collect()),
            DType::I64 => Data::I64(v),
            DType::F32 | DType::F16 | DType::BF16 => Data::from_f32(v.iter().map(|&x| x as f32).collect(), d),
            DType::F8E4M3 | DType::F8E5M2 => Data::from_f32(v.iter().map(|&x| i64_to_f32_odd(x)).collect(), d),
            DType::Generic(_) => panic!("generic dtype in the interpreter"),
        }
    }

    /// The same bits as `to` (32-bit dtypes: the builder checked).
    pub fn bitcast(&self, to: DType) -> Data {
        let bits: Vec<u32> = match self {
            Data::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::I32(v) => v.iter().map(|&x| x as u32).collect(),
            Data::U32(v) => v.clone(),
            _ => unreachable!("bitcast of a non-32-bit tile"),
        };
        match to {
            DType::F32 => Data::F32(bits.into_iter().map(f32::from_bits).collect()),
            DType::I32 => Data::I32(bits.into_iter().map(|b| b as i32).collect()),
            DType::U32 => Data::U32(bits),
            _ => unreachable!("bitcast to a non-32-bit dtype"),
        }
    }

    /// Every element converted to `to`, by the casting rules in the
    /// module doc.
    pub fn cast(&self, to: DType) -> Data {
        if self.dtype() == to {
            return self.clone();
        }
        match (self, to) {
            (Data::F32(v), DType::F16) => Data::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            (Data::F32(v), DType::BF16) => Data::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
            (Data::F16(_) | Data::BF16(_) | Data::F32(_) | Data::F8E4M3(_) | Data::F8E5M2(_), DType::Bool) => {
                Data::B(self.as_f32().iter().map(|&x| x != 0.0).collect())
            }
            (Data::F16(_) | Data::BF16(_) | Data::F32(_) | Data::F8E4M3(_) | Data::F8E5M2(_), d) if d.is_float() => {
                Data::from_f32(self.as_f32().into_owned(), d)
            }
            (Data::F16(_) | Data::BF16(_) | Data::F32(_) | Data::F8E4M3(_) | Data::F8E5M2(_), d) => {
                // saturating truncation per destination type
                let f = self.as_f32();
                match d {
                    DType::I8 => Data::I8(f.iter().map(|&x| x as i8).collect()),
                    DType::U8 => Data::U8(f.iter().map(|&x| x as u8).collect()),
                    DType::I32 => Data::I32(f.iter().map(|&x| x as i32).collect()),
                    DType::U32 => Data::U32(f.iter().map(|&x| x as u32).collect()),
                    _ => Data::I64(f.iter().map(|&x| x as i64).collect()),
                }
            }
            (_, d) if d.is_float() => {
                // int → float rounds once: directly for f32 (Rust `as`), and
                // through a round-to-odd f32 for f16/bf16 (`half`'s f64
                // conversions, and i64 → f64, would round twice).
                let v = self.as_i64();
                match d {
                    DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
                    DType::F16 => Data::F16(v.iter().map(|&x| f16::from_f32(i64_to_f32_odd(x))).collect()),
                    DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f32(i64_to_f32_odd(x))).collect()),
                    _ => Data::from_f32(v.iter().map(|&x| i64_to_f32_odd(x)).collect(), d),
                }
            }
            (_, d) => Data::from_i64(self.as_i64().into_owned(), d),
        }
    }

    /// `n` zeros of dtype `d`.
    pub fn zeros(d: DType, n: usize) -> Data {
        if d.is_float() {
            Data::from_f32(vec![0.0; n], d)
        } else {
            Data::from_i64(vec![0; n], d)
        }
    }
}

pub use ferrotile_ir::numeric::{bf16_from_f64, f16_from_f64};
use ferrotile_ir::numeric::{fp8_decode, fp8_encode, i64_to_f32_odd, Fp8};

fn sel<T: Copy>(c: &[bool], a: &[T], b: &[T]) -> Vec<T> {
    c.iter().zip(a.iter().zip(b)).map(|(&c, (&x, &y))| if c { x } else { y }).collect()
}

/// Bit width of `d`.
pub fn bits(d: DType) -> u32 {
    d.bits()
}

/// Elementwise binary op on equal-length data of one dtype.
pub fn binary(op: BinOp, a: &Data, b: &Data) -> Result<Data, String> {
    let d = a.dtype();
    if let (Data::F32(x), Data::F32(y)) = (a, b) {
        return Ok(Data::F32(x.iter().zip(y).map(|(&p, &q)| fbin(op, p, q)).collect()));
    }
    if d.is_float() {
        let (x, y) = (a.as_f32(), b.as_f32());
        return Ok(Data::from_f32(x.iter().zip(y.iter()).map(|(&p, &q)| fbin(op, p, q)).collect(), d));
    }
    if d == DType::Bool {
        let (x, y) = (a.as_bool(), b.as_bool());
        return Ok(Data::B(
            x.iter()
                .zip(y)
                .map(|(&p, &q)| match op {
                    BinOp::And | BinOp::LAnd | BinOp::Min => p & q,
                    BinOp::Or | BinOp::LOr | BinOp::Max => p | q,
                    BinOp::Xor => p ^ q,
                    _ => unreachable!("typed away by the builder"),
                })
                .collect(),
        ));
    }
    if let (Data::I32(x), Data::I32(y)) = (a, b) {
        if matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) {
            return Ok(Data::I32(
                x.iter()
                    .zip(y)
                    .map(|(&p, &q)| match op {
                        BinOp::Add => p.wrapping_add(q),
                        BinOp::Sub => p.wrapping_sub(q),
                        _ => p.wrapping_mul(q),
                    })
                    .collect(),
            ));
        }
    }
    let (x, y) = (a.as_i64(), b.as_i64());
    let w = bits(d);
    let signed = d.is_signed();
    let mut out = Vec::with_capacity(x.len());
    for (&p, &q) in x.iter().zip(y.iter()) {
        out.push(ibin(op, p, q, w, signed)?);
    }
    Ok(Data::from_i64(out, d))
}

fn fbin(op: BinOp, a: f32, b: f32) -> f32 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Max => a.max(b),
        BinOp::Min => a.min(b),
        _ => unreachable!("typed away by the builder: {op:?} on floats"),
    }
}

/// Integer binary op on `w`-bit values (wrapping; division rules in the
/// module doc); `Err` for ops the builder types away.
pub fn ibin(op: BinOp, a: i64, b: i64, w: u32, signed: bool) -> Result<i64, String> {
    Ok(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        // (one semantics on every backend, WGSL's: x / 0 = x, x % 0 = 0,
        // MIN / -1 = MIN, MIN % -1 = 0)
        BinOp::Div if b == 0 => a,
        BinOp::Div => a.wrapping_div(b),
        BinOp::Rem if b == 0 => 0,
        BinOp::Rem => a.wrapping_rem(b),
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl => {
            if b < 0 || b >= w as i64 {
                0
            } else {
                a.wrapping_shl(b as u32)
            }
        }
        BinOp::Shr => {
            if b < 0 || b >= w as i64 {
                if signed && a < 0 {
                    -1
                } else {
                    0
                }
            } else {
                a >> b
            }
        }
        BinOp::Max => a.max(b),
        BinOp::Min => a.min(b),
        BinOp::LAnd | BinOp::LOr => unreachable!("logical ops on integers are typed away"),
    })
}

/// Elementwise comparison of equal-length data of one dtype: a mask.
pub fn cmp(op: CmpOp, a: &Data, b: &Data) -> Data {
    fn go<T: PartialOrd + Copy>(op: CmpOp, x: &[T], y: &[T]) -> Vec<bool> {
        x.iter()
            .zip(y)
            .map(|(p, q)| match op {
                CmpOp::Eq => p == q,
                CmpOp::Ne => p != q,
                CmpOp::Lt => p < q,
                CmpOp::Le => p <= q,
                CmpOp::Gt => p > q,
                CmpOp::Ge => p >= q,
            })
            .collect()
    }
    Data::B(match (a, b) {
        // pointers are ordered within one buffer; pointers into different
        // buffers are unequal and unordered (every ordering is false)
        (Data::Ptr(x), Data::Ptr(y)) => x.iter().zip(y).map(|(&(bp, p), &(bq, q))| if bp == bq { go(op, &[p], &[q])[0] } else { op == CmpOp::Ne }).collect(),
        (Data::F32(x), Data::F32(y)) => go(op, x, y),
        (Data::I32(x), Data::I32(y)) => go(op, x, y),
        _ if a.dtype().is_float() => go(op, &a.as_f32(), &b.as_f32()),
        _ => go(op, &a.as_i64(), &b.as_i64()),
    })
}

/// Elementwise unary op (16-bit floats computed in f32 and rounded).
pub fn unary(op: UnOp, x: &Data) -> Data {
    let d = x.dtype();
    if d.is_float() {
        let f = x.as_f32();
        let r: Vec<f32> = f.iter().map(|&v| funary(op, v)).collect();
        return Data::from_f32(r, d);
    }
    if d == DType::Bool {
        return Data::B(x.as_bool().iter().map(|&b| if op == UnOp::Not { !b } else { b }).collect());
    }
    let v = x.as_i64();
    let r: Vec<i64> = v
        .iter()
        .map(|&a| match op {
            UnOp::Neg => a.wrapping_neg(),
            UnOp::Not => !a,
            UnOp::Abs => a.wrapping_abs(),
            _ => unreachable!("float-only op on integers is typed away"),
        })
        .collect();
    Data::from_i64(r, d)
}

/// `exp` and `exp2` flush results below the least normal f32 to +0 on
/// every backend (docs/semantics.md): CUDA's `ex2.approx.ftz`, Triton's
/// `exp2`.
fn flush_subnormal(r: f32) -> f32 {
    if r.abs() < f32::MIN_POSITIVE {
        0.0f32.copysign(r)
    } else {
        r
    }
}

/// A float unary op on one f32 value.
pub fn funary(op: UnOp, v: f32) -> f32 {
    match op {
        UnOp::Neg => -v,
        UnOp::Not => unreachable!(),
        UnOp::Exp => flush_subnormal(v.exp()),
        UnOp::Exp2 => flush_subnormal(v.exp2()),
        UnOp::Log => v.ln(),
        UnOp::Log2 => v.log2(),
        UnOp::Sqrt => v.sqrt(),
        UnOp::Rsqrt => ((1.0f64) / (v as f64).sqrt()) as f32,
        UnOp::Abs => v.abs(),
        UnOp::Sigmoid => (1.0 / (1.0 + (-(v as f64)).exp())) as f32,
        UnOp::Tanh => v.tanh(),
        UnOp::Erf => erf(v as f64) as f32,
        UnOp::Sin => v.sin(),
        UnOp::Cos => v.cos(),
        UnOp::Floor => v.floor(),
        UnOp::Ceil => v.ceil(),
        UnOp::Round => v.round_ties_even(),
        UnOp::RoundTf32 => super::tf32(v),
    }
}

/// The error function in f64: Taylor series for |x| < 3, asymptotic erfc
/// beyond (absolute error well below f32 resolution everywhere).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 3.0 {
        let mut term = a;
        let mut sum = a;
        let x2 = a * a;
        let mut n = 0.0;
        loop {
            n += 1.0;
            term *= -x2 / n;
            let t = term / (2.0 * n + 1.0);
            sum += t;
            // `<=`: for x = 0 both sides are 0 (with `<` it never ended)
            if t.abs() <= 1e-17 * sum.abs() {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else if a < 6.0 {
        let x2 = a * a;
        let mut s = 1.0;
        let mut term = 1.0;
        for k in 1..12 {
            let nt = term * -((2 * k - 1) as f64) / (2.0 * x2);
            if nt.abs() > term.abs() {
                break;
            }
            term = nt;
            s += term;
        }
        1.0 - (-x2).exp() / (a * std::f64::consts::PI.sqrt()) * s
    } else {
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}
