//! Host-side helpers of the conformance suite: a seeded generator, element
//! traits (sentinels, correct rounding, ordered bits), poisoned buffers and
//! the comparison routines that turn the first mismatch into an error message.

use ferrotile::{bf16, f16, Buffer, Device, Element, FloatElement};
use std::fmt::Debug;

pub type R = Result<(), String>;

/// Turn any displayable error into the suite's `String` error with context.
pub fn e2s<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

// ------------------------------------------------------------------ rng

/// The seeded generator (SplitMix64) shared with the library tests.
pub use ferrotile_kernels::reference::Rng;

/// The 1-D problem sizes every elementwise case walks: (n, BLOCK). Sizes
/// are mostly not multiples of the block, so the last program is masked.
pub const SIZES_1D: &[(usize, i32)] = &[(1, 64), (7, 64), (100, 128), (1000, 256), (4097, 64), (4097, 1024)];

/// Elements past `n` that each output buffer carries; they must keep the sentinel.
pub const PAD: usize = 37;

pub fn cdiv(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

// ----------------------------------------------------------- elements

/// Every element type a buffer can hold, with a poison value.
pub trait El: Element + Debug {
    const NAME: &'static str;
    /// The poison written to outputs before a launch. Floats use a signaling
    /// NaN payload no arithmetic produces; integers the 0x5A byte pattern.
    fn sentinel() -> Self;
    fn is_sentinel(self) -> bool;
    /// Whether no correct result can equal the sentinel (true for the float
    /// NaN payload). Integer sentinels are ordinary values: an output equal
    /// to it passes when the reference agrees.
    fn sentinel_is_unique() -> bool {
        false
    }
}

/// f32, f16 and bf16 on the host.
pub trait Flt: El + FloatElement {
    /// Explicit mantissa bits.
    const MANT: u32;
    /// Correctly rounded (nearest-even) conversion from f64.
    fn round(x: f64) -> Self;
    /// Bits mapped to an integer line where adjacent floats differ by 1.
    fn ord(self) -> i64;
}

/// The integer types on the host.
pub trait Int: El {
    const BITS: u32;
    const SIGNED: bool;
    const MIN: i64;
    const MAX: i64;
    fn to_i64(self) -> i64;
    /// Wrap (truncate) an i64 to this type.
    fn wrap(v: i64) -> Self;
}

impl El for f32 {
    const NAME: &'static str = "f32";
    fn sentinel() -> Self {
        f32::from_bits(0x7f85_a5a5)
    }
    fn is_sentinel(self) -> bool {
        self.to_bits() == 0x7f85_a5a5
    }
    fn sentinel_is_unique() -> bool {
        true
    }
}
impl El for f16 {
    const NAME: &'static str = "f16";
    fn sentinel() -> Self {
        f16::from_bits(0x7d5a)
    }
    fn is_sentinel(self) -> bool {
        self.to_bits() == 0x7d5a
    }
    fn sentinel_is_unique() -> bool {
        true
    }
}
impl El for bf16 {
    const NAME: &'static str = "bf16";
    fn sentinel() -> Self {
        bf16::from_bits(0x7f85)
    }
    fn is_sentinel(self) -> bool {
        self.to_bits() == 0x7f85
    }
    fn sentinel_is_unique() -> bool {
        true
    }
}

/// Round an f64 to f32 *toward zero, setting the last bit when inexact*
/// (round-to-odd). Rounding that result to a format with at most 22 bits of
/// mantissa then gives the correctly rounded value (no double rounding).
pub fn f64_to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if x.is_nan() || r as f64 == x {
        return r;
    }
    if r.is_infinite() {
        return f32::MAX.copysign(x as f32);
    }
    let t = if (r as f64).abs() > x.abs() { f32::from_bits(r.to_bits() - 1) } else { r };
    f32::from_bits(t.to_bits() | 1)
}

fn ord_bits(bits: u64, sign_bit: u64) -> i64 {
    if bits & sign_bit != 0 {
        -((bits & !sign_bit) as i64)
    } else {
        bits as i64
    }
}

impl Flt for f32 {
    const MANT: u32 = 23;
    fn round(x: f64) -> Self {
        x as f32
    }
    fn ord(self) -> i64 {
        ord_bits(self.to_bits() as u64, 1 << 31)
    }
}
impl Flt for f16 {
    const MANT: u32 = 10;
    fn round(x: f64) -> Self {
        f16::from_f32(f64_to_f32_odd(x))
    }
    fn ord(self) -> i64 {
        ord_bits(self.to_bits() as u64, 1 << 15)
    }
}
impl Flt for bf16 {
    const MANT: u32 = 7;
    fn round(x: f64) -> Self {
        bf16::from_f32(f64_to_f32_odd(x))
    }
    fn ord(self) -> i64 {
        ord_bits(self.to_bits() as u64, 1 << 15)
    }
}

macro_rules! int_el {
    ($t:ty, $name:literal, $sent:expr, $signed:expr) => {
        impl El for $t {
            const NAME: &'static str = $name;
            fn sentinel() -> Self {
                $sent
            }
            fn is_sentinel(self) -> bool {
                self == $sent
            }
        }
        impl Int for $t {
            const BITS: u32 = <$t>::BITS;
            const SIGNED: bool = $signed;
            const MIN: i64 = <$t>::MIN as i64;
            const MAX: i64 = <$t>::MAX as i64;
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn wrap(v: i64) -> Self {
                v as $t
            }
        }
    };
}
int_el!(i8, "i8", 0x5a, true);
int_el!(u8, "u8", 0x5a, false);
int_el!(i32, "i32", 0x5a5a_5a5a, true);
int_el!(u32, "u32", 0x5a5a_5a5a, false);
int_el!(i64, "i64", 0x5a5a_5a5a_5a5a_5a5a, true);

/// A random integer of type `T`: mostly full-range, sometimes small, and
/// sometimes one of the edge values (0, ±1, MIN, MAX).
pub fn rand_int<T: Int>(rng: &mut Rng) -> T {
    let v = match rng.below(8) {
        0 => rng.pick(&[0, 1, -1, T::MIN, T::MAX, T::MIN + 1, T::MAX - 1, 2]),
        1 | 2 => rng.int(-20, 20),
        3 => rng.int(-1000, 1000),
        _ => rng.next_u64() as i64,
    };
    T::wrap(v)
}

/// A random float: normal-ish values over several magnitudes, with rare
/// special values (±0, ±inf, NaN, halfway cases) when `specials`.
pub fn rand_float<T: Flt>(rng: &mut Rng, specials: bool) -> T {
    if specials && rng.chance(0.06) {
        return T::from_f64(rng.pick(&[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0]));
    }
    let scale = rng.pick(&[0.01, 1.0, 1.0, 10.0, 100.0]);
    T::round(rng.normal() * scale)
}

/// An output buffer of `len` poisoned elements.
pub fn poisoned<T: El>(dev: &Device, len: usize) -> Result<Buffer<T>, String> {
    dev.full(len, T::sentinel()).map_err(|e| format!("allocating {len} {}: {e}", T::NAME))
}

pub fn upload<T: El>(dev: &Device, v: &[T]) -> Result<Buffer<T>, String> {
    dev.from_slice(v).map_err(|e| format!("uploading {} {}: {e}", v.len(), T::NAME))
}

pub fn download<T: El>(b: &Buffer<T>) -> Result<Vec<T>, String> {
    b.to_vec().map_err(|e| format!("reading back {}: {e}", T::NAME))
}

// ----------------------------------------------------------- checking

/// What a check is about, for messages: case, dtype, sizes, seed.
#[derive(Clone)]
pub struct Ctx {
    pub case: &'static str,
    pub seed: u64,
    pub what: String,
}

impl Ctx {
    pub fn new(case: &'static str, seed: u64, what: impl Into<String>) -> Self {
        Ctx { case, seed, what: what.into() }
    }
    pub fn err(&self, msg: impl std::fmt::Display) -> String {
        format!("case `{}` [{}] seed {}: {}", self.case, self.what, self.seed, msg)
    }
    pub fn launch<E: std::fmt::Display>(&self, r: Result<(), E>) -> R {
        r.map_err(|e| self.err(format!("launch failed: {e}")))
    }
}

/// `got` holds `want.len()` checked elements followed by a pad that must
/// still hold the sentinel. `ok(got, want)` decides each element; `inputs(i)`
/// describes the inputs of element `i` for the message.
pub fn check_with<T: El, W: Debug>(c: &Ctx, output: &str, got: &[T], want: &[W], ok: impl Fn(usize, T, &W) -> bool, inputs: &dyn Fn(usize) -> String) -> R {
    if got.len() < want.len() {
        return Err(c.err(format!("output `{output}`: read back {} elements, expected at least {}", got.len(), want.len())));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.is_sentinel() && (T::sentinel_is_unique() || !ok(i, *g, w)) {
            return Err(c.err(format!("output `{output}` element {i} was never written (still the poison value); want {w:?}; inputs: {}", inputs(i))));
        }
        if !ok(i, *g, w) {
            return Err(c.err(format!("output `{output}` first mismatch at element {i}: got {g:?}, want {w:?}; inputs: {}", inputs(i))));
        }
    }
    check_pad(c, output, got, want.len())
}

/// Elements from `from` on must still hold the sentinel.
pub fn check_pad<T: El>(c: &Ctx, output: &str, got: &[T], from: usize) -> R {
    for (i, g) in got.iter().enumerate().skip(from) {
        if !g.is_sentinel() {
            return Err(c.err(format!("output `{output}` element {i} (past the {from} valid elements: a masked-off lane) was written with {g:?}")));
        }
    }
    Ok(())
}

pub fn no_inputs(_: usize) -> String {
    String::new()
}

/// Exact comparison.
pub fn check_eq<T: El + PartialEq>(c: &Ctx, output: &str, got: &[T], want: &[T], inputs: &dyn Fn(usize) -> String) -> R {
    check_with(c, output, got, want, |_, g, w| g == *w, inputs)
}

/// Float equality: equal values (±0 equal) or both NaN.
pub fn same_float(g: f64, w: f64) -> bool {
    g == w || (g.is_nan() && w.is_nan())
}

/// What a backend's float arithmetic may do beyond the suite's default
/// contract (IEEE-exact + - * / sqrt, fused fma, subnormals preserved).
/// WGSL through SPIR-V allows these relaxations (sqrt within 2.5 ulp, fma
/// possibly unfused, subnormals possibly flushed, a*b+c possibly
/// contracted), and drivers use them: NVIDIA's Vulkan driver flushes f32
/// subnormals, rounds sqrt within 1 ulp and contracts a*b+c; llvmpipe does
/// not fuse fma. PTX and the interpreter promise the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatModel {
    /// Largest distance (in ulps of the correctly rounded result) of sqrt.
    pub sqrt_ulps: u64,
    pub fma_may_be_unfused: bool,
    /// f32 (and so bf16) subnormal results may be replaced by zero.
    pub subnormals_may_flush: bool,
    /// `a * b + c` may be contracted into one fused multiply-add (SPIR-V
    /// drivers do unless an operation is decorated NoContraction, which
    /// naga does not emit; NVIDIA's Vulkan driver contracts).
    pub mul_add_may_contract: bool,
}

impl FloatModel {
    pub const IEEE: FloatModel = FloatModel { sqrt_ulps: 0, fma_may_be_unfused: false, subnormals_may_flush: false, mul_add_may_contract: false };
    pub const WGSL: FloatModel = FloatModel { sqrt_ulps: 3, fma_may_be_unfused: true, subnormals_may_flush: true, mul_add_may_contract: true };

    pub fn of(dev: &Device) -> FloatModel {
        if dev.kind() == ferrotile::DeviceKind::Wgpu {
            FloatModel::WGSL
        } else {
            FloatModel::IEEE
        }
    }
}

thread_local! {
    static MODEL: std::cell::Cell<FloatModel> = const { std::cell::Cell::new(FloatModel::IEEE) };
}

/// The float model of the device the current case runs on (set by
/// `run_case` for the case's thread).
pub fn float_model() -> FloatModel {
    MODEL.with(|m| m.get())
}

pub fn set_float_model(m: FloatModel) {
    MODEL.with(|c| c.set(m));
}

/// A zero where the reference is an f32 subnormal, on a device that may
/// flush subnormals.
fn flushed(g: f64, w: f64) -> bool {
    float_model().subnormals_may_flush && g == 0.0 && w != 0.0 && w.abs() < f32::MIN_POSITIVE as f64
}

/// Distance in units in the last place of `T` between `g` and `w`; both
/// NaN is 0, one NaN (or mismatched infinities) is `u64::MAX`.
pub fn ulps<T: Flt>(g: T, w: T) -> u64 {
    let (gf, wf) = (g.to_f64(), w.to_f64());
    if gf.is_nan() || wf.is_nan() {
        return if gf.is_nan() && wf.is_nan() { 0 } else { u64::MAX };
    }
    if gf.is_infinite() || wf.is_infinite() {
        return if gf == wf { 0 } else { u64::MAX };
    }
    g.ord().abs_diff(w.ord())
}

/// Floats vs exact f64 references: element passes when it is within `max_ulps`
/// of the reference rounded to `T`, or within `rel * |want| + abs` of it.
pub fn check_float<T: Flt>(c: &Ctx, output: &str, got: &[T], want: &[f64], max_ulps: u64, rel: f64, abs: f64, inputs: &dyn Fn(usize) -> String) -> R {
    check_with(
        c,
        output,
        got,
        want,
        |_, g, &w| {
            let gf = g.to_f64();
            if same_float(gf, w) || flushed(gf, w) {
                return true;
            }
            if ulps(g, T::round(w)) <= max_ulps {
                return true;
            }
            gf.is_finite() && w.is_finite() && (gf - w).abs() <= rel * w.abs() + abs
        },
        inputs,
    )
}

/// Floats vs references that are exactly representable in `T` (already rounded).
pub fn check_float_exact<T: Flt>(c: &Ctx, output: &str, got: &[T], want: &[f64], inputs: &dyn Fn(usize) -> String) -> R {
    check_with(c, output, got, want, |_, g, &w| same_float(g.to_f64(), w) || flushed(g.to_f64(), w), inputs)
}

/// Launch errors are values: a `Runtime` error naming the kernel is required.
pub fn expect_runtime_error(c: &Ctx, r: ferrotile::Result<()>, kernel: &str, needle: &str) -> R {
    match r {
        Ok(()) => Err(c.err(format!("expected a run-time error ({needle}) from kernel `{kernel}`, but the launch succeeded"))),
        Err(ferrotile::Error::Runtime { kernel: k, msg, .. }) => {
            if k != kernel {
                return Err(c.err(format!("run-time error names kernel `{k}`, expected `{kernel}`")));
            }
            if !msg.contains(needle) {
                return Err(c.err(format!("run-time error message `{msg}` does not mention `{needle}`")));
            }
            Ok(())
        }
        Err(e) => Err(c.err(format!("expected Error::Runtime ({needle}) from `{kernel}`, got another error: {e}"))),
    }
}
