//! WGSL helper functions written into a shader on first use (`helper`):
//! correctly rounded division and conversions, 64-bit integer
//! arithmetic, and the math functions whose WGSL builtins are too
//! loose (`exp`, `log`, `tanh`, `erf`, `sin`/`cos`).

use super::*;
use crate::plan::mathfn;

impl<'k> WgslWriter<'k> {
    pub(super) fn helper(&mut self, name: &str) -> String {
        if self.helpers.contains_key(name) {
            return name.to_string();
        }
        let code = match name {
            // fp8 (held as the f32 value): decode a code, encode with
            // nearest-even rounding and saturation, round to the format —
            // `ferrotile_ir::numeric::fp8_encode`'s steps
            _ if name.starts_with("ft_e4m3_") || name.starts_with("ft_e5m2_") => {
                let f = if name.starts_with("ft_e4m3_") { ferrotile_ir::numeric::Fp8::E4M3 } else { ferrotile_ir::numeric::Fp8::E5M2 };
                let t = &name[..8];
                let (m, sh) = (f.mant(), 23 - f.mant());
                match &name[8..] {
                    "dec" => {
                        let special = match f {
                            ferrotile_ir::numeric::Fp8::E4M3 => "if (t == 0x7fu) { v = bitcast<f32>(0x7fffffffu); }".to_string(),
                            ferrotile_ir::numeric::Fp8::E5M2 => format!("if (t >= 0x7cu) {{ v = bitcast<f32>(0x7f800000u | ((t & 3u) << {sh}u)); }}"),
                        };
                        format!(
                            "fn {t}dec(b: u32) -> f32 {{\n    let t = b & 0x7fu;\n    var v = bitcast<f32>((t << {sh}u) + {:#x}u);\n    if (t < {}u) {{ v = v * 2.0 - {}; }}\n    {special}\n    return bitcast<f32>(bitcast<u32>(v) | ((b & 0x80u) << 24u));\n}}\n",
                            (127 - f.bias()) << 23,
                            1u32 << m,
                            f32_lit(f32::from_bits(f.min_normal_bits()))
                        )
                    }
                    "enc" => format!(
                        "fn {t}enc(x: f32) -> u32 {{\n    let b = bitcast<u32>(x);\n    let s = (b >> 24u) & 0x80u;\n    var a = b & 0x7fffffffu;\n    if (a > 0x7f800000u) {{ return s | 0x7fu; }}\n    a = min(a, {:#x}u);\n    if (a < {:#x}u) {{ return s | u32(round(bitcast<f32>(a) * {})); }}\n    let r = a + {:#x}u + ((a >> {sh}u) & 1u);\n    return s | ((r >> {sh}u) - {}u);\n}}\n",
                        f.max_bits(),
                        f.min_normal_bits(),
                        f32_lit(f.subnormal_scale()),
                        (1u32 << (sh - 1)) - 1,
                        (127 - f.bias()) << m
                    ),
                    _ => {
                        self.helper(&format!("{t}dec"));
                        self.helper(&format!("{t}enc"));
                        format!("fn {t}r(x: f32) -> f32 {{ return {t}dec({t}enc(x)); }}\n")
                    }
                }
            }
            "ft_isnan" => "fn ft_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n".to_string(),
            "ft_fmax" | "ft_fmin" => {
                self.helper("ft_isnan");
                let c = if name == "ft_fmax" { ">" } else { "<" };
                format!(
                    r#"// the non-NaN operand when one is NaN (branch-free: a NaN `b` fails the comparison)
fn {name}(a: f32, b: f32) -> f32 {{
    return select(a, b, b {c} a || ft_isnan(a));
}}
"#
                )
            }
            "ft_f2h" => F2H.to_string(),
            "ft_h2f" => {
                if self.o.shader_f16 {
                    self.uses_f16 = true;
                    "// f16 bits -> f32 (exact)\nfn ft_h2f(h: u32) -> f32 { return unpack2x16float(h).x; }\n".to_string()
                } else {
                    H2F.to_string()
                }
            }
            "ft_rh" => {
                self.helper("ft_f2h");
                self.helper("ft_h2f");
                "// round an f32 to the nearest-even f16 value\nfn ft_rh(x: f32) -> f32 { return ft_h2f(ft_f2h(x)); }\n".to_string()
            }
            "ft_f2b" => F2B.to_string(),
            "ft_b2f" => "fn ft_b2f(h: u32) -> f32 { return bitcast<f32>(h << 16u); }\n".to_string(),
            "ft_rb" => {
                self.helper("ft_f2b");
                self.helper("ft_b2f");
                "// round an f32 to the nearest-even bf16 value\nfn ft_rb(x: f32) -> f32 { return ft_b2f(ft_f2b(x)); }\n".to_string()
            }
            "ft_div" => DIV.to_string(),
            "ft_exp" => EXP.to_string(),
            "ft_exp2" => EXP2.to_string(),
            "ft_i2f" => r#"// i32 -> f32 rounded to nearest-even (both parts exact, one rounding in +)
fn ft_i2f(x: i32) -> f32 { let lo = x & 0xffff; return f32(x - lo) + f32(lo); }
"#
            .to_string(),
            "ft_u2f" => "fn ft_u2f(x: u32) -> f32 { let lo = x & 0xffffu; return f32(x - lo) + f32(lo); }\n".to_string(),
            "ft_u2f_odd" => U2F_ODD.to_string(),
            "ft_i2f_odd" => {
                self.helper("ft_u2f_odd");
                r#"fn ft_i2f_odd(x: i32) -> f32 {
    let n = x < 0;
    let f = ft_u2f_odd(select(bitcast<u32>(x), 0u - bitcast<u32>(x), n));
    return select(f, -f, n);
}
"#
                .to_string()
            }
            "ft_f2i" => {
                self.helper("ft_isnan");
                r#"// saturating, NaN -> 0
fn ft_f2i(x: f32) -> i32 {
    if (ft_isnan(x)) { return 0i; }
    if (x >= 2147483648.0f) { return 2147483647i; }
    if (x <= -2147483648.0f) { return bitcast<i32>(0x80000000u); }
    return i32(x);
}
"#
                .to_string()
            }
            "ft_f2u" => {
                self.helper("ft_isnan");
                r#"// saturating, NaN -> 0
fn ft_f2u(x: f32) -> u32 {
    if (ft_isnan(x) || x <= 0.0f) { return 0u; }
    if (x >= 4294967296.0f) { return 4294967295u; }
    return u32(x);
}
"#
                .to_string()
            }
            "ft_log" => {
                self.helper("ft_div");
                log_code()
            }
            "ft_tanh" => {
                self.helper("ft_div");
                self.helper("ft_exp");
                tanh_code()
            }
            "ft_sigmoid" => {
                self.helper("ft_div");
                self.helper("ft_exp");
                "fn ft_sigmoid(x: f32) -> f32 { return ft_div(1.0f, 1.0f + ft_exp(-x)); }\n".to_string()
            }
            "ft_erf" => {
                self.helper("ft_div");
                self.helper("ft_exp");
                erf_code()
            }
            "ft_sincos" => sincos_code(),
            "ft_tf32" => r#"// round to a 10-bit mantissa, nearest-even (finite values)
fn ft_tf32(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7f800000u) == 0x7f800000u) { return x; }
    return bitcast<f32>((b + 0xfffu + ((b >> 13u) & 1u)) & 0xffffe000u);
}
"#
            .to_string(),
            "ft_tf32_trunc" => r#"// drop the 13 low mantissa bits (finite values)
fn ft_tf32_trunc(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7f800000u) == 0x7f800000u) { return x; }
    return bitcast<f32>(b & 0xffffe000u);
}
"#
            .to_string(),
            "ft_add64" => r#"// i64 as vec2<u32>(low, high)
fn ft_add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let lo = a.x + b.x; return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x)); }
"#
            .to_string(),
            "ft_sub64" => r#"fn ft_sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x)); }
"#
            .to_string(),
            "ft_lt64" => r#"// signed a < b
fn ft_lt64(a: vec2<u32>, b: vec2<u32>) -> bool { return bitcast<i32>(a.y) < bitcast<i32>(b.y) || (a.y == b.y && a.x < b.x); }
"#
            .to_string(),
            "ft_mulwide" => MULWIDE.to_string(),
            "ft_mul64" => {
                self.helper("ft_mulwide");
                r#"fn ft_mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let p = ft_mulwide(a.x, b.x); return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x); }
"#
                .to_string()
            }
            "ft_shl64" => SHL64.to_string(),
            "ft_shr64" => SHR64.to_string(),
            "ft_udivrem64" => UDIVREM64.to_string(),
            "ft_divrem64" => {
                self.helper("ft_udivrem64");
                self.helper("ft_sub64");
                DIVREM64.to_string()
            }
            "ft_l2f" => {
                self.helper("ft_u2f");
                self.helper("ft_u2f_odd");
                self.helper("ft_sub64");
                L2F.to_string()
            }
            "ft_f2l" => {
                self.helper("ft_isnan");
                self.helper("ft_sub64");
                F2L.to_string()
            }
            _ => panic!("wgsl: unknown helper {name}"),
        };
        self.helpers.insert(name.to_string(), code);
        name.to_string()
    }
}

const F2H: &str = "// f32 -> f16 bits, round to nearest-even (the `half` crate's conversion)
fn ft_f2h(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let s = (b >> 16u) & 0x8000u;
    let e = b & 0x7f800000u;
    let m = b & 0x007fffffu;
    if (e == 0x7f800000u) { return s | 0x7c00u | select(0u, 0x200u, m != 0u) | (m >> 13u); }
    let he = i32(e >> 23u) - 112i;
    if (he >= 31i) { return s | 0x7c00u; }
    if (he <= 0i) {
        if (14i - he > 24i) { return s; }
        let mm = m | 0x00800000u;
        let sh = u32(14i - he);
        var hm = mm >> sh;
        let rb = 1u << (sh - 1u);
        if ((mm & rb) != 0u && (mm & (3u * rb - 1u)) != 0u) { hm = hm + 1u; }
        return s | hm;
    }
    let r = s | (u32(he) << 10u) | (m >> 13u);
    if ((m & 0x1000u) != 0u && (m & 0x2fffu) != 0u) { return r + 1u; }
    return r;
}
";

const H2F: &str = "// f16 bits -> f32 (exact)
fn ft_h2f(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) { return bitcast<f32>(s | select(0x7f800000u, 0x7fc00000u, m != 0u) | (m << 13u)); }
    if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * 5.9604644775390625e-8f)); }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
";

const F2B: &str = "// f32 -> bf16 bits, round to nearest-even (the `half` crate's conversion)
fn ft_f2b(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    if ((b & 0x8000u) != 0u && (b & 0x17fffu) != 0u) { return (b >> 16u) + 1u; }
    return b >> 16u;
}
";

const U2F_ODD: &str = "// u32 -> f32 rounded to odd (then rounding to f16/bf16 rounds once)
fn ft_u2f_odd(a: u32) -> f32 {
    let lz = countLeadingZeros(a);
    if (lz >= 8u) { return f32(a); }
    let sh = 8u - lz;
    var m = a >> sh;
    if ((a & ((1u << sh) - 1u)) != 0u) { m = m | 1u; }
    return f32(m) * bitcast<f32>((127u + sh) << 23u);
}
";

const MULWIDE: &str = "// full 32 x 32 -> 64-bit product
fn ft_mulwide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
";

const SHL64: &str = "// shifts by < 0 or >= 64 give 0
fn ft_shl64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(0u, 0u); }
    let n = b.x;
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }
    return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}
";

const SHR64: &str = "// arithmetic; shifts by < 0 or >= 64 give the sign
fn ft_shr64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let hi = bitcast<i32>(a.y);
    let s = select(0u, 0xffffffffu, hi < 0i);
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(s, s); }
    let n = b.x;
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(bitcast<u32>(hi >> (n - 32u)), s); }
    return vec2<u32>((a.x >> n) | (a.y << (32u - n)), bitcast<u32>(hi >> n));
}
";

const UDIVREM64: &str = "// unsigned 64-bit (quotient.xy, remainder.zw), restoring division
fn ft_udivrem64(n: vec2<u32>, d: vec2<u32>) -> vec4<u32> {
    if (n.y == 0u && d.y == 0u && d.x != 0u) { return vec4<u32>(n.x / d.x, 0u, n.x % d.x, 0u); }
    var q = vec2<u32>(0u, 0u);
    var r = vec2<u32>(0u, 0u);
    // from the dividend's highest set bit down (none when n == 0): a trip
    // count the shader compiler cannot unroll (a fixed 64 made lavapipe's
    // LLVM spend minutes per shader with several divisions)
    let top = select(31i - i32(countLeadingZeros(n.x)), 63i - i32(countLeadingZeros(n.y)), n.y != 0u);
    for (var i: i32 = top; i >= 0i; i = i - 1i) {
        let bit = select((n.x >> u32(i)) & 1u, (n.y >> u32(i - 32i)) & 1u, i >= 32i);
        r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
        if (r.y > d.y || (r.y == d.y && r.x >= d.x)) {
            r = vec2<u32>(r.x - d.x, r.y - d.y - select(0u, 1u, r.x < d.x));
            if (i >= 32i) { q.y = q.y | (1u << u32(i - 32i)); } else { q.x = q.x | (1u << u32(i)); }
        }
    }
    return vec4<u32>(q, r);
}
";

const DIVREM64: &str = "// signed 64-bit (quotient.xy, remainder.zw), truncating, wrapping
fn ft_divrem64(a: vec2<u32>, b: vec2<u32>) -> vec4<u32> {
    let z = vec2<u32>(0u, 0u);
    // x / 0 = x, x % 0 = 0 (as WGSL's own integer division)
    if (all(b == z)) { return vec4<u32>(a, z); }
    let na = bitcast<i32>(a.y) < 0i;
    let nb = bitcast<i32>(b.y) < 0i;
    let qr = ft_udivrem64(select(a, ft_sub64(z, a), na), select(b, ft_sub64(z, b), nb));
    return vec4<u32>(select(qr.xy, ft_sub64(z, qr.xy), na != nb), select(qr.zw, ft_sub64(z, qr.zw), na));
}
";

const L2F: &str = "// i64 -> f32, rounded to nearest-even (odd = false) or to odd (odd = true)
fn ft_l2f(a: vec2<u32>, odd: bool) -> f32 {
    let neg = bitcast<i32>(a.y) < 0i;
    let m = select(a, ft_sub64(vec2<u32>(0u, 0u), a), neg);
    var f: f32;
    if (m.y == 0u) {
        f = select(ft_u2f(m.x), ft_u2f_odd(m.x), odd);
    } else {
        // the top 32 bits with a sticky bit, then one rounding
        let lz = countLeadingZeros(m.y);
        let sh = 32u - lz;
        var top = m.y;
        var rest = m.x;
        if (lz > 0u) { top = (m.y << lz) | (m.x >> sh); rest = m.x << lz; }
        top = top | select(0u, 1u, rest != 0u);
        f = select(ft_u2f(top), ft_u2f_odd(top), odd) * bitcast<f32>((127u + sh) << 23u);
    }
    return select(f, -f, neg);
}
";

const F2L: &str = "// f32 -> i64, truncating, saturating, NaN -> 0
fn ft_f2l(x: f32) -> vec2<u32> {
    if (ft_isnan(x)) { return vec2<u32>(0u, 0u); }
    if (x >= 9223372036854775808.0f) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
    if (x <= -9223372036854775808.0f) { return vec2<u32>(0u, 0x80000000u); }
    let a = trunc(abs(x));
    var m: vec2<u32>;
    if (a < 4294967296.0f) {
        m = vec2<u32>(u32(a), 0u);
    } else {
        let hi = floor(a * 2.3283064365386963e-10f);
        m = vec2<u32>(u32(a - hi * 4294967296.0f), u32(hi));
    }
    return select(m, ft_sub64(vec2<u32>(0u, 0u), m), x < 0.0f);
}
";

const DIV: &str = "// correctly rounded a / b with integer arithmetic (WGSL's division may be
// 2.5 ulp off, and fma-based corrections fail where fma is not fused):
// 25 quotient bits by long division in 8-bit steps, a sticky bit, one
// nearest-even rounding. NaN, infinite, zero and subnormal operands, and
// subnormal or overflowing quotients, take the hardware quotient.
fn ft_div(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ea = (ua >> 23u) & 0xffu;
    let eb = (ub >> 23u) & 0xffu;
    if (ea == 0xffu || eb == 0xffu || ea == 0u || eb == 0u) { return a / b; }
    let ma = (ua & 0x7fffffu) | 0x800000u;
    let mb = (ub & 0x7fffffu) | 0x800000u;
    var e = i32(ea) - i32(eb) + 127i;
    var n = ma;
    if (ma < mb) { n = ma << 1u; e = e - 1i; }
    var q = n / mb;
    var r = n % mb;
    for (var i = 0u; i < 3u; i = i + 1u) {
        r = r << 8u;
        q = (q << 8u) | (r / mb);
        r = r % mb;
    }
    var m = q >> 1u;
    if ((q & 1u) != 0u && (r != 0u || (m & 1u) != 0u)) { m = m + 1u; }
    if (m == 0x1000000u) { m = m >> 1u; e = e + 1i; }
    if (e <= 0i || e >= 255i) { return a / b; }
    return bitcast<f32>(((ua ^ ub) & 0x80000000u) | (u32(e) << 23u) | (m & 0x7fffffu));
}
";

const EXP: &str = "// exp with ~1 ulp error (WGSL's exp is 3 + 2|x| ulp): k = rint(x log2 e),
// r = x - k ln2 (ln2 split so k * hi is exact without fma), cephes
// polynomial, scaled by 2^k in two steps
fn ft_exp(x: f32) -> f32 {
    if (x > 88.72284f) { return bitcast<f32>(0x7f800000u); }
    if (x < -87.33655f) { return 0.0f; }
    let k = round(x * 1.442695f);
    let r = (x - k * 0.693359375f) - k * -2.1219444e-4f;
    let z = r * r;
    var p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    let y = p * z + r + 1.0f;
    let ki = i32(k);
    let h = ki >> 1u;
    let e = (y * bitcast<f32>(u32(h + 127i) << 23u)) * bitcast<f32>(u32(ki - h + 127i) << 23u);
    // results below the least normal f32 are +0, as on every backend
    return select(e, 0.0f, e < 1.17549435e-38f);
}
";

const EXP2: &str = "// 2^x with ~1 ulp error: k = rint(x), r = x - k (exact), cephes polynomial
fn ft_exp2(x: f32) -> f32 {
    if (x >= 128.0f) { return bitcast<f32>(0x7f800000u); }
    if (x < -126.0f) { return 0.0f; }
    let k = round(x);
    let r = x - k;
    var p = 1.535336188319500e-4f;
    p = p * r + 1.339887440266574e-3f;
    p = p * r + 9.618437357674640e-3f;
    p = p * r + 5.550332471162809e-2f;
    p = p * r + 2.402264791363012e-1f;
    p = p * r + 6.931472028550421e-1f;
    let y = p * r + 1.0f;
    let ki = i32(k);
    let h = ki >> 1u;
    let e = (y * bitcast<f32>(u32(h + 127i) << 23u)) * bitcast<f32>(u32(ki - h + 127i) << 23u);
    // results below the least normal f32 are +0, as on every backend
    return select(e, 0.0f, e < 1.17549435e-38f);
}
";

fn log_code() -> String {
    let mut p = format!(
        "// natural log, ~1 ulp: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s),
// s = (m-1)/(m+1), odd series to s^11 (the PTX backend's formula)
fn ft_log(x: f32) -> f32 {{
    let bx = bitcast<u32>(x);
    if (bx == 0u || bx == 0x80000000u) {{ return bitcast<f32>(0xff800000u); }}
    if (bx > 0x80000000u || (bx & 0x7fffffffu) > 0x7f800000u) {{ return bitcast<f32>(0x7fc00000u); }}
    if (bx == 0x7f800000u) {{ return x; }}
    let sub = bx < 0x00800000u;
    let bits = select(bx, bitcast<u32>(x * 8388608.0f), sub);
    var e = i32((bits >> 23u) & 255u) - select(127i, 150i, sub);
    var m = bitcast<f32>((bits & 0x7fffffu) | 0x3f800000u);
    if (m > {}) {{ m = m * 0.5f; e = e + 1i; }}
    let sv = ft_div(m - 1.0f, m + 1.0f);
    let s2 = sv * sv;
    var p = {};
",
        f32_lit(f32::from_bits(0x3FB504F3)),
        fl(2.0 / 11.0)
    );
    for c in [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0] {
        let _ = writeln!(p, "    p = fma(p, s2, {});", fl(c));
    }
    p.push_str("    p = p * s2;\n    let lm = fma(sv, p, sv) + sv;\n    let ef = f32(e);\n");
    let _ = writeln!(p, "    let r = fma(ef, {}, lm);", fl(-2.1219444e-4));
    let _ = writeln!(p, "    return fma(ef, {}, r);\n}}", fl(0.693359375));
    p
}

fn tanh_code() -> String {
    let mut p = String::from(
        "// |x| < 0.25: odd Taylor polynomial; else sign(x) (1-e)/(1+e), e = exp(-2|x|)
fn ft_tanh(x: f32) -> f32 {
    let a = abs(x);
    let e = ft_exp(a * -2.0f);
    let q0 = ft_div(1.0f - e, 1.0f + e);
    let q = bitcast<f32>((bitcast<u32>(q0) & 0x7fffffffu) | (bitcast<u32>(x) & 0x80000000u));
    let x2 = x * x;
",
    );
    let coef = [62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0, 1.0];
    let _ = writeln!(p, "    var p = {};", fl(coef[0]));
    for c in &coef[1..] {
        let _ = writeln!(p, "    p = fma(p, x2, {});", fl(*c));
    }
    p.push_str("    p = p * x;\n    return select(q, p, a < 0.25f);\n}\n");
    p
}

fn erf_code() -> String {
    let mut p = String::from(
        "// |x| < 0.5: Taylor series; else Abramowitz-Stegun 7.1.26
fn ft_erf(x: f32) -> f32 {
    let a = abs(x);
    let x2 = x * x;
",
    );
    let cs = mathfn::erf_taylor();
    let _ = writeln!(p, "    var p = {};", fl(cs[8]));
    for c in cs[..8].iter().rev() {
        let _ = writeln!(p, "    p = fma(p, x2, {});", fl(*c));
    }
    p.push_str("    p = p * x;\n");
    let _ = writeln!(p, "    let t = ft_div(1.0f, fma(a, {}, 1.0f));", fl(mathfn::ERF_AS_P));
    let ac = mathfn::ERF_AS_POLY;
    let _ = writeln!(p, "    var q = {};", fl(ac[0]));
    for c in &ac[1..] {
        let _ = writeln!(p, "    q = fma(q, t, {});", fl(*c));
    }
    p.push_str(
        "    q = q * t;
    q = 1.0f - q * ft_exp(-x2);
    q = bitcast<f32>((bitcast<u32>(q) & 0x7fffffffu) | (bitcast<u32>(x) & 0x80000000u));
    return select(q, p, a < 0.5f);
}
",
    );
    p
}

fn sincos_code() -> String {
    let mut p = format!(
        "// sin (c = 0) or cos (c = 1): k = rint(x 2/pi), r = x - k pi/2 (3-part
// Cody-Waite whose first two products are exact without fma for
// |k| < 2^12), Taylor polynomials on |r| <= pi/4, quadrant from k
fn ft_sincos(x: f32, c: i32) -> f32 {{
    let kf = round(x * {});
    let r = ((x - kf * 1.5703125f) - kf * 4.837512969970703125e-4f) - kf * 7.54978995489188216e-8f;
    let r2 = r * r;
",
        fl(std::f64::consts::FRAC_2_PI),
    );
    let sc = [-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0];
    let _ = writeln!(p, "    var s = {};", fl(sc[0]));
    for c in &sc[1..] {
        let _ = writeln!(p, "    s = fma(s, r2, {});", fl(*c));
    }
    p.push_str("    s = s * r2;\n    s = fma(s, r, r);\n");
    let cc = [1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0];
    let _ = writeln!(p, "    var cp = {};", fl(cc[0]));
    for c in &cc[1..] {
        let _ = writeln!(p, "    cp = fma(cp, r2, {});", fl(*c));
    }
    p.push_str(
        "    let q = i32(clamp(kf, -1073741824.0f, 1073741824.0f)) + c;
    let y = select(s, cp, (q & 1i) != 0i);
    return select(y, -y, (q & 2i) != 0i);
}
",
    );
    p
}
