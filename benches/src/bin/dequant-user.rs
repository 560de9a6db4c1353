//! A W4A16 GEMM written in the DSL the way a user of the GPTQ-style Triton
//! kernels writes it: 4-bit weights packed 8 to an `i32` along K, one
//! bf16 scale and one 4-bit zero point per group of `GROUP` rows of K and
//! column; each K step loads the packed words its `BK` rows need (every
//! word once per row it holds: the loads repeat addresses, the cache
//! serves them), unpacks with shift and mask, dequantizes
//! `(q − z) · s` to bf16 and feeds the tile to `dot` as B. Nothing in the
//! compiler knows about quantization: this is issue 20's second test
//! kernel (its table: 153 µs against Triton's 54 at 1×8192×8192) and the
//! starting point of issue 22.
//!
//! Checked against f64 on the dequantized math (sampled outputs, poisoned
//! output, odd M and N); timed as `attn-user` does (CUDA graphs and back
//! to back). Effective bandwidth counts the packed weights, scales, zeros
//! and activations once.
//!
//! `dequant-user [--device cuda|wgpu|cpu] [--shapes MxNxK,..] [--configs BMxBNxBKxWARPSxSTAGES,..]`
//! `dequant-user --emit BMxBNxBK WARPS STAGES [sm]`: the PTX (no GPU), with
//! the compiler's explanations on stderr.

use ferrotile::prelude::*;
use ferrotile::{Buffer, Device};
use ferrotile_benches::{time_both, Timing};
use ferrotile_kernels::reference::Rng;
use half::bf16;

/// `out[m, n] = Σ_k x[m, k] · ((q[k, n] − z[k/G, n]) · s[k/G, n])`, with
/// `q[k, n] = (w[k/8, n] >> 4·(k % 8)) & 15` and the zero points packed
/// like the weights (`zp[k/G, n/8] >> 4·(n % 8)`). K must be a multiple of
/// `GROUP` (itself a multiple of 8), N a multiple of 8.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn w4a16<const BM: i32, const BN: i32, const BK: i32, const GROUP: i32>(
    x: Ptr<bf16>,
    w: Ptr<i32>,
    scales: Ptr<bf16>,
    zp: Ptr<i32>,
    out: Ptr<bf16>,
    m: i32,
    n: i32,
    k: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let m_ok = expand_dims(rm < m, 1);
    let n_ok = expand_dims(rn < n, 0);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + rk;
        let k_ok = kk < k;
        let a = load(x + expand_dims((rm as i64) * (k as i64), 1) + expand_dims(kk as i64, 0), m_ok & expand_dims(k_ok, 0), 0.0);
        let words = load(w + expand_dims(((kk / 8) as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), expand_dims(k_ok, 1) & n_ok, 0);
        let q = (words >> expand_dims((kk % 8) * 4, 1)) & 15;
        let g = expand_dims(kk / GROUP, 1);
        let s = load(scales + (g as i64) * (n as i64) + expand_dims(rn as i64, 0), expand_dims(k_ok, 1) & n_ok, 0.0) as f32;
        let zw = load(zp + (g as i64) * ((n / 8) as i64) + expand_dims((rn / 8) as i64, 0), expand_dims(k_ok, 1) & n_ok, 0);
        let z = (zw >> expand_dims((rn % 8) * 4, 0)) & 15;
        let b = (((q - z) as f32) * s) as bf16;
        acc = dot(a, b, acc);
    }
    store(out + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), acc as bf16, m_ok & n_ok);
}

/// The same product in its decode form, `outᵀ = Wᵀ · xᵀ`, as a user of
/// Hopper writes a small-M W4A16 kernel: the `BN` output columns are the
/// `dot`'s rows (`wgmma` wants M ≥ 64), the `BM ≤ 16` tokens its columns,
/// and the weight tile `[BN, BK]` — each thread's packed word along K
/// unpacked and dequantized — is the `dot`'s A, computed in registers.
/// With `FERROTILE_OPERAND_LAYOUTS=1` the compiler keeps it there (its
/// K-interleaved fragments: one packed word is a run of 8 K) instead of
/// staging it through shared memory.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn w4a16_t<const BN: i32, const BM: i32, const BK: i32, const GROUP: i32>(
    x: Ptr<bf16>,
    w: Ptr<i32>,
    scales: Ptr<bf16>,
    zp: Ptr<i32>,
    out: Ptr<bf16>,
    m: i32,
    n: i32,
    k: i32,
) {
    let rn = program_id(0) * BN + arange(0, BN);
    let rm = program_id(1) * BM + arange(0, BM);
    let n_ok = expand_dims(rn < n, 1);
    let m_ok = expand_dims(rm < m, 0);
    let wrow = w + expand_dims(rn as i64, 1);
    let mut acc = zeros([BN, BM], f32);
    // (K is a multiple of GROUP and BK divides GROUP: no K tail, one group
    // per step — its scale and zero point per column, broadcast along K)
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let words = load(wrow + expand_dims(((kk / 8) as i64) * (n as i64), 0), n_ok, 0);
        let q = (words >> expand_dims((kk % 8) * 4, 0)) & 15;
        let g = (k0 / GROUP) as i64;
        let s = load(scales + g * (n as i64) + (rn as i64), rn < n, 0.0) as f32;
        let zw = load(zp + g * ((n / 8) as i64) + ((rn / 8) as i64), rn < n, 0);
        let z = (zw >> ((rn % 8) * 4)) & 15;
        let a = (((q - expand_dims(z, 1)) as f32) * expand_dims(s, 1)) as bf16;
        let xt = load(x + expand_dims(kk as i64, 1) + expand_dims((rm as i64) * (k as i64), 0), m_ok, 0.0);
        acc = dot(a, xt, acc);
    }
    store(out + expand_dims((rm as i64) * (n as i64), 0) + expand_dims(rn as i64, 1), acc as bf16, n_ok & m_ok);
}

/// The same product, written the way the analysis says it should
/// be: split K over `program_id(2)` (partial sums added atomically into an
/// f32 output), one scale row and one zero-point row per group, each
/// packed word loaded once and unpacked in registers
/// (`[BK/8, BN] → [BK/8, 8, BN] → [BK, BN]`), and `(q − z)` — an exact
/// small integer — fed to `dot` per group, the scale applied to the
/// group's partial sum. `BK` divides `GROUP`; `k_split` is a multiple of
/// `GROUP`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn w4a16_split<const BM: i32, const BN: i32, const BK: i32, const GROUP: i32>(
    x: Ptr<bf16>,
    w: Ptr<i32>,
    scales: Ptr<bf16>,
    zp: Ptr<i32>,
    out: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    k_split: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let k_lo = program_id(2) * k_split;
    let k_hi = minimum(k_lo + k_split, k);
    let m_ok = expand_dims(rm < m, 1);
    let n_ok = rn < n;
    let rw = arange(0, BK / 8);
    let shifts = expand_dims(expand_dims(arange(0, 8) * 4, 0), 2);
    let mut acc = zeros([BM, BN], f32);
    for g0 in (k_lo..k_hi).step_by(GROUP) {
        let g = g0 / GROUP;
        let s = load(scales + (g as i64) * (n as i64) + (rn as i64), n_ok, 0.0) as f32;
        let zw = load(zp + (g as i64) * ((n / 8) as i64) + ((rn / 8) as i64), n_ok, 0);
        let z = expand_dims(((zw >> ((rn % 8) * 4)) & 15) as f32, 0);
        let mut part = zeros([BM, BN], f32);
        for k0 in (g0..g0 + GROUP).step_by(BK) {
            let kk = k0 + arange(0, BK);
            let a = load(x + expand_dims((rm as i64) * (k as i64), 1) + expand_dims(kk as i64, 0), m_ok & expand_dims(kk < k, 0), 0.0);
            let kw = k0 / 8 + rw;
            let words = load(w + expand_dims((kw as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), expand_dims(kw < k / 8, 1) & expand_dims(n_ok, 0), 0);
            let q = reshape((expand_dims(words, 1) >> shifts) & 15, [BK, BN]);
            let b = ((q as f32) - z) as bf16;
            part = dot(a, b, part);
        }
        acc = acc + part * expand_dims(s, 0);
    }
    atomic_add(out + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), acc, m_ok & expand_dims(n_ok, 0));
}

#[derive(Clone, Copy, Debug)]
struct Cfg {
    bm: i32,
    bn: i32,
    bk: i32,
    warps: u32,
    stages: u32,
}

fn parse_cfg(s: &str) -> Option<Cfg> {
    let v: Vec<u32> = s.split('x').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    (v.len() == 5).then(|| Cfg { bm: v[0] as i32, bn: v[1] as i32, bk: v[2] as i32, warps: v[3], stages: v[4] })
}

const GROUP: usize = 128;

/// Host data of one problem: activations, packed weights, scales, packed
/// zero points, and the dequantized weights in f64 (for the reference).
struct Problem {
    x: Vec<bf16>,
    w: Vec<i32>,
    s: Vec<bf16>,
    z: Vec<i32>,
    deq: Vec<f64>,
}

fn problem(m: usize, n: usize, k: usize, seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let x: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    let q: Vec<u32> = (0..k * n).map(|_| rng.below(16) as u32).collect();
    let groups = k / GROUP;
    let zq: Vec<u32> = (0..groups * n).map(|_| rng.below(16) as u32).collect();
    let s: Vec<bf16> = (0..groups * n).map(|_| bf16::from_f64(rng.range(0.005, 0.02))).collect();
    let mut w = vec![0i32; k / 8 * n];
    for kk in 0..k {
        for j in 0..n {
            w[kk / 8 * n + j] |= (q[kk * n + j] << (4 * (kk % 8))) as i32;
        }
    }
    let n8 = n.div_ceil(8);
    let mut z = vec![0i32; groups * n8];
    for g in 0..groups {
        for j in 0..n {
            z[g * n8 + j / 8] |= (zq[g * n + j] << (4 * (j % 8))) as i32;
        }
    }
    // (the kernel's own math: (q − z)·s in f32, rounded to bf16 — the
    // check then measures the kernel, not the rounding the user asked for)
    let deq = (0..k * n)
        .map(|i| {
            let at = (i / n) / GROUP * n + i % n;
            bf16::from_f32((q[i] as f32 - zq[at] as f32) * s[at].to_f32()).to_f64()
        })
        .collect();
    Problem { x, w, s, z, deq }
}

fn run(dev: &Device, m: usize, n: usize, k: usize, cfgs: &[Cfg]) -> Result<bool, String> {
    let e = |e: ferrotile::Error| e.to_string();
    if !k.is_multiple_of(GROUP) || !n.is_multiple_of(8) {
        return Err(format!("{m}x{n}x{k}: K must be a multiple of {GROUP} and N of 8"));
    }
    let p = problem(m, n, k, 3);
    let x: Buffer<bf16> = dev.from_slice(&p.x).map_err(e)?;
    let w: Buffer<i32> = dev.from_slice(&p.w).map_err(e)?;
    let s: Buffer<bf16> = dev.from_slice(&p.s).map_err(e)?;
    let z: Buffer<i32> = dev.from_slice(&p.z).map_err(e)?;
    let bytes = (p.w.len() * 4 + p.s.len() * 2 + p.z.len() * 4 + p.x.len() * 2 + m * n * 2) as f64;
    let mut ok = true;
    for &c in cfgs {
        let mut o: Buffer<bf16> = dev.from_slice(&vec![bf16::NAN; m * n]).map_err(e)?;
        let grid = [m.div_ceil(c.bm as usize) as u32, n.div_ceil(c.bn as usize) as u32, 1];
        let cfg = LaunchConfig::new(grid).num_warps(c.warps).num_stages(c.stages);
        // (SWAP=1: the decode form `w4a16_t`, `BN` columns a program along
        // the grid's x; BK must divide the group)
        let swap = std::env::var("SWAP").is_ok_and(|v| v == "1");
        let cfg_t = LaunchConfig::new([grid[1], grid[0], 1]).num_warps(c.warps).num_stages(c.stages);
        let launch = |o: &mut Buffer<bf16>| {
            if swap {
                w4a16_t::launch(dev, cfg_t, &x, &w, &s, &z, o, m as i32, n as i32, k as i32, c.bn, c.bm, c.bk, GROUP as i32)
            } else {
                w4a16::launch(dev, cfg, &x, &w, &s, &z, o, m as i32, n as i32, k as i32, c.bm, c.bn, c.bk, GROUP as i32)
            }
        };
        if let Err(err) = launch(&mut o).and_then(|_| dev.synchronize()) {
            println!("w4a16 {m}x{n}x{k} {c:?}: error: {err}");
            ok = false;
            continue;
        }
        let got = o.to_vec().map_err(e)?;
        let mut rng = Rng::new(9);
        let mut cells: Vec<(usize, usize)> = (0..48).map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize)).collect();
        cells.extend([(0, 0), (m - 1, n - 1)]);
        let wants: Vec<f64> = cells.iter().map(|&(i, j)| (0..k).map(|kk| p.x[i * k + kk].to_f64() * p.deq[kk * n + j]).sum()).collect();
        // (relative to the element, or to a tenth of the outputs' RMS where
        // the element is near zero)
        let rms = (wants.iter().map(|w| w * w).sum::<f64>() / wants.len() as f64).sqrt();
        let worst = cells
            .iter()
            .zip(&wants)
            .map(|(&(i, j), w)| {
                let g = got[i * n + j].to_f64();
                if g.is_finite() {
                    (g - w).abs() / (w.abs() + 0.1 * rms)
                } else {
                    f64::INFINITY
                }
            })
            .fold(0.0f64, f64::max);
        // (bf16 output: 2^-9 relative; f32 accumulation)
        let pass = worst <= 1e-2;
        ok &= pass;
        let t: Timing = if dev.kind() == ferrotile::DeviceKind::Cpu {
            Timing { b2b: f64::NAN, graph: None }
        } else {
            time_both(dev, 100, 20, || launch(&mut o)).map_err(e)?
        };
        println!(
            "w4a16 g{GROUP} {m}x{n}x{k} BM={:<3} BN={:<3} BK={:<3} warps={} stages={}  {:>8.1} us (b2b {:>8.1})  {:>6.0} GB/s  err {worst:.1e}{}",
            c.bm,
            c.bn,
            c.bk,
            c.warps,
            c.stages,
            t.ms() * 1e3,
            t.b2b * 1e3,
            bytes / (t.ms() * 1e-3) / 1e9,
            if pass { "" } else { "  FAIL" }
        );
    }
    Ok(ok)
}

/// The library's `quant::wq_gemm` on the same problem (its packed layout is
/// the one this kernel reads): tuned on the first call, then timed as the
/// user kernel is.
fn run_library(
    dev: &Device,
    m: usize,
    n: usize,
    k: usize,
    config: Option<ferrotile_kernels::quant::QuantConfig>,
    bits: u32,
    epilogue: bool,
) -> Result<bool, String> {
    use ferrotile_kernels::gemm::Activation;
    use ferrotile_kernels::quant::{wq_gemm, PackedWeights, QuantFormat, QuantOptions, QuantWeights};
    let e = |e: ferrotile_kernels::LibError| e.to_string();
    let p = problem(m, n, k, 3);
    let packed = if bits == 4 {
        PackedWeights {
            k,
            n,
            format: QuantFormat { bits: 4, group: GROUP, zeros: true },
            qweight: p.w.clone(),
            scales: p.s.clone(),
            qzeros: p.z.clone(),
            perm: None,
        }
    } else {
        // W8A16: per-channel symmetric, random bytes and scales
        let mut rng = Rng::new(5);
        PackedWeights {
            k,
            n,
            format: QuantFormat { bits: 8, group: 0, zeros: false },
            qweight: (0..k / 4 * n).map(|_| rng.next_u64() as i32).collect(),
            scales: (0..n).map(|_| bf16::from_f64(rng.range(0.5, 1.5) / 64.0)).collect(),
            qzeros: vec![],
            perm: None,
        }
    };
    let w = QuantWeights::upload(dev, &packed).map_err(e)?;
    let x: Buffer<bf16> = dev.from_slice(&p.x).map_err(|e| e.to_string())?;
    let mut o: Buffer<bf16> = dev.from_slice(&vec![bf16::NAN; m * n]).map_err(|e| e.to_string())?;
    // `--epilogue`: a bias of random values and GELU fused into the GEMM
    let bias_h: Vec<bf16> = {
        let mut rng = Rng::new(21);
        (0..n).map(|_| bf16::from_f64(rng.normal())).collect()
    };
    let bias: Buffer<bf16> = dev.from_slice(&bias_h).map_err(|e| e.to_string())?;
    let opts = if epilogue {
        QuantOptions { config, bias: Some(&bias), activation: Activation::Gelu, ..Default::default() }
    } else {
        QuantOptions { config, ..Default::default() }
    };
    wq_gemm(dev, &x, &w, &mut o, m, &opts).map_err(e)?;
    dev.synchronize().map_err(|e| e.to_string())?;
    let got = o.to_vec().map_err(|e| e.to_string())?;
    let mut rng = Rng::new(9);
    let mut cells: Vec<(usize, usize)> = (0..48).map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize)).collect();
    cells.extend([(0, 0), (m - 1, n - 1)]);
    // (the exact dequantized weights, and the metric of the library's tests)
    let post = |j: usize, v: f64| {
        if epilogue {
            let v = v + bias_h[j].to_f64();
            0.5 * v * (1.0 + ferrotile_kernels::reference::erf(v / std::f64::consts::SQRT_2))
        } else {
            v
        }
    };
    let worst = ferrotile_kernels::reference::quant_gemm_epilogue_err(
        |i, kk| p.x[i * k + kk].to_f64(),
        &packed.dequantize(),
        post,
        |i, j| got[i * n + j].to_f64(),
        n,
        k,
        &cells,
    );
    let pass = worst <= 1e-2;
    let t: Timing = if dev.kind() == ferrotile::DeviceKind::Cpu {
        Timing { b2b: f64::NAN, graph: None }
    } else {
        time_both(dev, 100, 20, || {
            wq_gemm(dev, &x, &w, &mut o, m, &opts).map_err(|e| ferrotile::Error::Launch { kernel: "wq_gemm".into(), msg: e.to_string() })
        })
        .map_err(|e| e.to_string())?
    };
    // host time per call: calls queued without waiting (the device runs
    // behind), so this is what the host spends, not the kernels
    let host_us = if dev.kind() == ferrotile::DeviceKind::Cpu {
        f64::NAN
    } else {
        dev.synchronize().map_err(|e| e.to_string())?;
        let t0 = std::time::Instant::now();
        for _ in 0..50 {
            wq_gemm(dev, &x, &w, &mut o, m, &opts).map_err(e)?;
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / 50.0;
        dev.synchronize().map_err(|e| e.to_string())?;
        us
    };
    let bytes = (packed.qweight.len() * 4 + packed.scales.len() * 2 + packed.qzeros.len() * 4 + p.x.len() * 2 + m * n * 2) as f64;
    let cfg = config.map_or("tuned".to_string(), |c| format!("{c:?}"));
    let fmt = if bits == 4 { format!("w4 g{GROUP}") } else { "w8 per-channel".to_string() };
    let fmt = if epilogue { format!("{fmt} +bias+gelu") } else { fmt };
    println!(
        "library wq_gemm {fmt} {m}x{n}x{k} {cfg}  {:>8.1} us (b2b {:>8.1}, host {host_us:>6.1} per call)  {:>6.0} GB/s  err {worst:.1e}{}",
        t.ms() * 1e3,
        t.b2b * 1e3,
        bytes / (t.ms() * 1e-3) / 1e9,
        if pass { "" } else { "  FAIL" }
    );
    Ok(pass)
}

/// The library's W8A8 GEMM (`quant::w8a8_gemm`, int8 tensor cores) on
/// random int8 operands and scales, tuned on the first call; checked on
/// sampled outputs against the exact integer product in f64, then timed
/// (the GEMM alone, and `quantize_rows` of the activations alone).
fn run_w8a8(dev: &Device, m: usize, n: usize, k: usize, config: Option<ferrotile_kernels::quant::W8A8Config>) -> Result<bool, String> {
    use ferrotile_kernels::quant::{quantize_rows, w8a8_gemm, Int8Packed, Int8Weights, W8A8Options};
    let e = |e: ferrotile_kernels::LibError| e.to_string();
    let f = |e: ferrotile::Error| e.to_string();
    let mut rng = Rng::new(21);
    let i8s = |rng: &mut Rng, len: usize| -> Vec<i8> { (0..len).map(|_| rng.int(-128, 127) as i8).collect() };
    let xq = i8s(&mut rng, m * k);
    let xs: Vec<f32> = (0..m).map(|_| rng.range(0.5, 2.0) as f32 / 127.0).collect();
    let w = Int8Packed::new(i8s(&mut rng, n * k), (0..n).map(|_| rng.range(0.5, 2.0) as f32 / 127.0).collect(), n, k).map_err(e)?;
    let wd = Int8Weights::upload(dev, &w).map_err(e)?;
    let (xqd, xsd) = (dev.from_slice(&xq).map_err(f)?, dev.from_slice(&xs).map_err(f)?);
    let mut o: Buffer<bf16> = dev.from_slice(&vec![bf16::NAN; m * n]).map_err(f)?;
    let opts = W8A8Options { config, ..Default::default() };
    w8a8_gemm(dev, &xqd, &xsd, &wd, &mut o, m, &opts).map_err(e)?;
    let got = o.to_vec().map_err(f)?;
    let mut worst = 0.0f64;
    let mut cells: Vec<(usize, usize)> = (0..64).map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize)).collect();
    cells.extend([(0, 0), (m - 1, n - 1)]);
    for &(i, j) in &cells {
        let d: i64 = (0..k).map(|kk| xq[i * k + kk] as i64 * w.q[j * k + kk] as i64).sum();
        let want = d as f64 * xs[i] as f64 * w.scales[j] as f64;
        let g = got[i * n + j].to_f64();
        worst = worst.max(if g.is_finite() { (g - want).abs() / (want.abs() + 1e-3) } else { f64::INFINITY });
    }
    let pass = worst <= 1.0 / 128.0;
    if dev.kind() == ferrotile::DeviceKind::Cpu {
        println!("w8a8 {m}x{n}x{k}: err {worst:.1e}{}", if pass { "" } else { "  FAIL" });
        return Ok(pass);
    }
    let t = time_both(dev, 100, 20, || {
        w8a8_gemm(dev, &xqd, &xsd, &wd, &mut o, m, &opts).map_err(|e| ferrotile::Error::Launch { kernel: "w8a8_gemm".into(), msg: e.to_string() })
    })
    .map_err(f)?;
    // the activations' quantization, on bf16 rows of the same shape
    let x: Buffer<bf16> = dev.from_slice(&(0..m * k).map(|_| bf16::from_f64(rng.normal())).collect::<Vec<_>>()).map_err(f)?;
    let (mut q2, mut s2): (Buffer<i8>, Buffer<f32>) = (dev.zeros(m * k).map_err(f)?, dev.zeros(m).map_err(f)?);
    let tq = time_both(dev, 100, 20, || {
        quantize_rows(dev, &x, m, k, 0, &mut q2, &mut s2).map_err(|e| ferrotile::Error::Launch { kernel: "quantize_rows".into(), msg: e.to_string() })
    })
    .map_err(f)?;
    let cfg = config.map_or("tuned".to_string(), |c| format!("{c:?}"));
    println!(
        "library w8a8 {m}x{n}x{k} {cfg}  {:>8.1} us  {:>6.0} TOPS  (b2b {:>8.1})  quantize_rows {:>7.1} us {:>6.0} GB/s  err {worst:.1e}{}",
        t.ms() * 1e3,
        2.0 * (m * n * k) as f64 / (t.ms() * 1e-3) / 1e12,
        t.b2b * 1e3,
        tq.ms() * 1e3,
        (m * k * 3 + m * 4) as f64 / (tq.ms() * 1e-3) / 1e9,
        if pass { "" } else { "  FAIL" }
    );
    Ok(pass)
}

/// The library's FP8 GEMM (`quant::fp8_gemm`, e4m3, row-wise scales, bf16
/// out) on random operands, tuned on the first call; checked on sampled
/// outputs against f64 (the bf16 rounding and the tensor cores' fast
/// accumulation: 2⁻¹² of Σ|terms|), then timed.
fn run_fp8(dev: &Device, m: usize, n: usize, k: usize, config: Option<ferrotile_kernels::quant::W8A8Config>) -> Result<bool, String> {
    use ferrotile::f8e4m3;
    use ferrotile_kernels::quant::{fp8_gemm, Fp8Options, Fp8Scales};
    let f = |e: ferrotile::Error| e.to_string();
    let mut rng = Rng::new(31);
    let a: Vec<f8e4m3> = (0..m * k).map(|_| f8e4m3::from_f32(rng.normal() as f32)).collect();
    let b: Vec<f8e4m3> = (0..n * k).map(|_| f8e4m3::from_f32(rng.normal() as f32)).collect();
    // (`FP8_BLOCKS=1`: DeepSeek-V3's block-wise scales instead of row-wise)
    let blocks = std::env::var("FP8_BLOCKS").is_ok_and(|v| v == "1");
    let kb = k.div_ceil(128);
    let (la, lb) = if blocks { (m * kb, n.div_ceil(128) * kb) } else { (m, n) };
    let sa: Vec<f32> = (0..la).map(|_| rng.range(0.5, 2.0) as f32 / 64.0).collect();
    let sb: Vec<f32> = (0..lb).map(|_| rng.range(0.5, 2.0) as f32 / 64.0).collect();
    let (ad, bd, sad, sbd) = (dev.from_slice(&a).map_err(f)?, dev.from_slice(&b).map_err(f)?, dev.from_slice(&sa).map_err(f)?, dev.from_slice(&sb).map_err(f)?);
    let mut o: Buffer<bf16> = dev.from_slice(&vec![bf16::NAN; m * n]).map_err(f)?;
    let scales = if blocks { Fp8Scales::Blocks { a: &sad, b: &sbd } } else { Fp8Scales::Rows { a: &sad, b: &sbd } };
    let opts = Fp8Options { scales, config, ..Default::default() };
    let scale =
        |i: usize, j: usize, kk: usize| if blocks { sa[i * kb + kk / 128] as f64 * sb[(j / 128) * kb + kk / 128] as f64 } else { sa[i] as f64 * sb[j] as f64 };
    fp8_gemm(dev, &ad, &bd, &mut o, m, n, k, &opts).map_err(|e| e.to_string())?;
    let got = o.to_vec().map_err(f)?;
    let mut worst = 0.0f64;
    for _ in 0..64 {
        let (i, j) = (rng.below(m as u64) as usize, rng.below(n as u64) as usize);
        let (mut d, mut mag) = (0.0f64, 0.0f64);
        for kk in 0..k {
            let p = a[i * k + kk].to_f32() as f64 * b[j * k + kk].to_f32() as f64 * scale(i, j, kk);
            d += p;
            mag += p.abs();
        }
        let s = 1.0;
        let g = got[i * n + j].to_f64();
        let tol = (d * s).abs() / 200.0 + mag * s * k.div_ceil(32) as f64 / 8192.0 + 1e-6;
        worst = worst.max(if g.is_finite() { (g - d * s).abs() / tol } else { f64::INFINITY });
    }
    let pass = worst <= 1.0;
    if dev.kind() == ferrotile::DeviceKind::Cpu {
        println!("fp8 {m}x{n}x{k}: {worst:.2} of the tolerance{}", if pass { "" } else { "  FAIL" });
        return Ok(pass);
    }
    let t = time_both(dev, 100, 20, || {
        fp8_gemm(dev, &ad, &bd, &mut o, m, n, k, &opts).map_err(|e| ferrotile::Error::Launch { kernel: "fp8_gemm".into(), msg: e.to_string() })
    })
    .map_err(f)?;
    let cfg = config.map_or("tuned".to_string(), |c| format!("{c:?}"));
    println!(
        "library fp8 e4m3 {} {m}x{n}x{k} {cfg}  {:>8.1} us  {:>6.0} TFLOP/s  (b2b {:>8.1})  {worst:.2} of the tolerance{}",
        if blocks { "blockwise" } else { "rowwise" },
        t.ms() * 1e3,
        2.0 * (m * n * k) as f64 / (t.ms() * 1e-3) / 1e12,
        t.b2b * 1e3,
        if pass { "" } else { "  FAIL" }
    );
    Ok(pass)
}

/// The `--emit*` modes' arguments: `AxBxC WARPS STAGES [sm]` (sm 90 by
/// default).
fn emit_args(args: &[String]) -> (Vec<i64>, u32, u32, u32) {
    let t: Vec<i64> = args[0].split('x').map(|v| v.parse().unwrap()).collect();
    let warps: u32 = args[1].parse().unwrap();
    let stages: u32 = args[2].parse().unwrap();
    let sm: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(90);
    (t, warps, stages, sm)
}

/// Emit a specialization as PTX: the compiler's explanations on stderr,
/// the text on stdout.
fn print_ptx(spec: &ferrotile::ir::Kernel, opts: &ferrotile_backends::ptx::PtxOptions) {
    let p = ferrotile_backends::ptx::emit(spec, opts).unwrap_or_else(|e| panic!("{e:?}"));
    ferrotile_benches::explain_ptx(&p);
    println!("{}", p.text);
}

/// `--emit BMxBNxBK WARPS STAGES [sm]`: the user-written W4A16 kernel of
/// this file (`SPLIT=1` its split-K form, `SWAP=1` the decode form
/// `w4a16_t`) with the options the CUDA runtime takes by default: operand
/// layouts on (`FERROTILE_OPERAND_LAYOUTS=0`: off).
fn emit(args: &[String]) {
    use ferrotile::ir::passes::guard::guarded_params;
    use ferrotile::ir::specialize;
    use ferrotile_backends::ptx::PtxOptions;
    let (t, warps, stages, sm) = emit_args(args);
    // (SWAP=1: the decode form `w4a16_t`, its constants BN, BM first)
    let swap = std::env::var("SWAP").is_ok_and(|v| v == "1");
    let k = if swap {
        w4a16_t::ir()
    } else if std::env::var("SPLIT").is_ok() {
        w4a16_split::ir()
    } else {
        w4a16::ir()
    };
    let consts = if swap { [t[1], t[0], t[2], GROUP as i64] } else { [t[0], t[1], t[2], GROUP as i64] };
    let spec = specialize(k, &consts, &[]).unwrap();
    let opts = PtxOptions {
        arg_div: vec![16; guarded_params(k)],
        pipeline: stages - 1,
        operand_layouts: std::env::var("FERROTILE_OPERAND_LAYOUTS").map_or(true, |v| v != "0"),
        ..PtxOptions::new(sm, warps, k.params.len())
    };
    print_ptx(&spec, &opts);
}

/// An experiment (`--emit-lib` with `KMAJOR=1`): `ferrotile_kernels::quant::wq_gemm_kernel` over weights repacked K-major: `qweight[n, k / P]`,
/// each output channel's packed words contiguous along K (`kw` words per
/// channel, `kw = k / P`), scales and zero points as in
/// `ferrotile_kernels::quant::wq_gemm_kernel`. The words of a channel's consecutive K are
/// consecutive in memory, so a thread that holds a run of K of one column
/// (the register-operand layouts of `mma.sync`) loads four words — 32
/// weights — in one 16-byte access, and the dequantized tile feeds the
/// tensor cores from its registers. K is a multiple of `BK` and the
/// split covers `k_blocks · BK` of it per program (the host checks both):
/// no K masks.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn w4_kmajor<T: Float, const BM: i32, const BN: i32, const BK: i32, const BITS: i32, const GROUP: i32, const HAS_ZEROS: bool, const SPLIT: bool>(
    x: Ptr<T>,
    qweight: Ptr<i32>,
    scales: Ptr<T>,
    qzeros: Ptr<i32>,
    out: Ptr<T>,
    ws: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    kw: i32,
    k_blocks: i32,
    sxm: i64,
    som: i64,
) {
    let word_shift = 4 - BITS / 4;
    let lane_mask = 32 / BITS - 1;
    let qmask = (1 << BITS) - 1;
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let m_ok = expand_dims(rm < m, 1);
    let n_ok = expand_dims(rn < n, 0);
    let k_lo = program_id(2) * k_blocks * BK;
    let k_hi = minimum(k_lo + k_blocks * BK, k);
    let xrow = x + expand_dims((rm as i64) * sxm, 1);
    let wrow = qweight + expand_dims((rn as i64) * (kw as i64), 0);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (k_lo..k_hi).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let a = load(xrow + expand_dims(kk as i64, 0), m_ok, 0.0);
        // runs of P equal words along K, consecutive from run to run
        let words = load(wrow + expand_dims((kk >> word_shift) as i64, 1), n_ok, 0);
        let q = (words >> expand_dims((kk & lane_mask) * BITS, 1)) & qmask;
        let g = (k0 / GROUP) as i64;
        let s = load(broadcast_to(expand_dims(scales + g * (n as i64) + (rn as i64), 0), [BK, BN]), n_ok, 0.0);
        let mut z = full([BK, BN], 1 << (BITS - 1), i32);
        if HAS_ZEROS {
            let zp = broadcast_to(expand_dims(qzeros + g * ((n >> word_shift) as i64) + ((rn >> word_shift) as i64), 0), [BK, BN]);
            z = (load(zp, n_ok, 0) >> expand_dims((rn & lane_mask) * BITS, 0)) & qmask;
        }
        let b = ((q as T) - (z as T)) * s;
        acc = dot(a, b, acc);
    }
    if SPLIT {
        let mn = (m as i64) * (n as i64);
        store(ws + (program_id(2) as i64) * mn + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), acc, m_ok & n_ok);
    } else {
        store(out + expand_dims((rm as i64) * som, 1) + expand_dims(rn as i64, 0), acc as T, m_ok & n_ok);
    }
}

/// `--emit-lib BMxBNxBK WARPS STAGES [sm]`: the library's W4A16 GEMM
/// kernel (bf16, group 128, zero points, split K) as the tuner would
/// compile it; `REG=1` turns register operands on, `UNCHECKED=1` the
/// guards off (as the library launches it), `UNROLL=1` the threaded
/// copies of the pipelined body; `EVEN=0` the masked weight reads (the
/// default is `EVEN`, as decode shapes launch).
fn emit_lib(args: &[String]) {
    use ferrotile::ir::passes::guard::guarded_params;
    use ferrotile::ir::specialize;
    use ferrotile_backends::ptx::PtxOptions;
    let (t, warps, stages, sm) = emit_args(args);
    let kmajor = std::env::var("KMAJOR").is_ok_and(|v| v == "1");
    let k = if kmajor { w4_kmajor::ir() } else { ferrotile_kernels::quant::wq_gemm_kernel::ir() };
    let even = !std::env::var("EVEN").is_ok_and(|v| v == "0") as i64;
    // (`BITS=8`, `GROUP=g`, `ZEROS=0`: the W8A16 library's per-channel symmetric form is `BITS=8 GROUP=8192 ZEROS=0`)
    let env = |v: &str, d: i64| std::env::var(v).ok().and_then(|g| g.parse().ok()).unwrap_or(d);
    let (bits, group, zeros) = (env("BITS", 4), env("GROUP", 128), env("ZEROS", 1));
    let cx: Vec<i64> = if kmajor { vec![t[0], t[1], t[2], 4, 128, 1, 1] } else { vec![t[0], t[1], t[2], bits, group, zeros, 1, even, 0, 0] };
    let spec = specialize(k, &cx, &[ferrotile::ir::DType::BF16]).unwrap();
    let reg = std::env::var("REG").is_ok_and(|v| v == "1");
    let unchecked = std::env::var("UNCHECKED").is_ok_and(|v| v == "1");
    let safety = if unchecked { ferrotile::ir::passes::guard::Safety::Unchecked } else { ferrotile::ir::passes::guard::Safety::Safe };
    let opts = PtxOptions {
        arg_div: vec![16; guarded_params(k)],
        pipeline: stages - 1,
        register_operands: reg,
        safety,
        unroll_pipelined: std::env::var("UNROLL").is_ok_and(|v| v == "1"),
        ..PtxOptions::new(sm, warps, k.params.len())
    };
    print_ptx(&spec, &opts);
}

/// `--emit-decode BNxBMxBK WARPS STAGES [sm]`: the library's decode form
/// `ferrotile_kernels::quant::wq_decode_kernel` (bf16, W4 — `BITS=8`: W8 — group 128 or `GROUP`, zero
/// points — `ZEROS=0`: none —, split K, `EVEN`), unguarded, with the options its launch takes:
/// operand layouts, broadcast slices, affine addresses and rotated loops
/// on (`FERROTILE_OPERAND_LAYOUTS=0` / `FERROTILE_BROADCAST_SLICES=0` /
/// `FERROTILE_AFFINE_ADDRESSES=0` / `FERROTILE_ROTATE_CHAINS=0`: off).
fn emit_decode(args: &[String]) {
    use ferrotile::ir::passes::guard::{guarded_params, Safety};
    use ferrotile::ir::specialize;
    use ferrotile_backends::ptx::PtxOptions;
    let (t, warps, stages, sm) = emit_args(args);
    let k = ferrotile_kernels::quant::wq_decode_kernel::ir();
    let group = std::env::var("GROUP").ok().and_then(|g| g.parse().ok()).unwrap_or(128);
    // (`BITS=8`: W8A16, zero points as for W4)
    let bits = std::env::var("BITS").ok().and_then(|g| g.parse().ok()).unwrap_or(4);
    let zeros = std::env::var("ZEROS").ok().and_then(|g| g.parse().ok()).unwrap_or(1);
    // (`SCALE_W=1`: the scales on the weights, the tensor cores accumulating)
    let scale_w = std::env::var("SCALE_W").is_ok_and(|v| v == "1") as i64;
    let spec = specialize(k, &[t[0], t[1], t[2], bits, group, zeros, 1, 1, 0, 0, scale_w], &[ferrotile::ir::DType::BF16]).unwrap();
    let on = |v: &str| std::env::var(v).map_or(true, |v| v != "0");
    let opts = PtxOptions {
        arg_div: vec![16; guarded_params(k)],
        pipeline: stages - 1,
        safety: Safety::Unchecked,
        broadcast_slices: on("FERROTILE_BROADCAST_SLICES"),
        affine_addresses: on("FERROTILE_AFFINE_ADDRESSES"),
        operand_layouts: on("FERROTILE_OPERAND_LAYOUTS"),
        rotate_chains: on("FERROTILE_ROTATE_CHAINS"),
        // (`UNROLL=1`: threaded copies, with `wgmma` bodies —
        // `FERROTILE_UNROLL_WGMMA=1` —; `FERROTILE_INFLIGHT_REG_A=1`)
        unroll_pipelined: std::env::var("UNROLL").is_ok_and(|v| v == "1"),
        unroll_wgmma: std::env::var("FERROTILE_UNROLL_WGMMA").is_ok_and(|v| v == "1"),
        inflight_register_a: std::env::var("FERROTILE_INFLIGHT_REG_A").is_ok_and(|v| v == "1"),
        ..PtxOptions::new(sm, warps, k.params.len())
    };
    print_ptx(&spec, &opts);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: dequant-user [--device cuda|wgpu|cpu] [--shapes MxNxK,..] [--configs BMxBNxBKxWARPSxSTAGES,..]\n       dequant-user --library [--w8] [--epilogue] [--lib-configs BMxBNxBKxWARPSxSTAGESxSPLIT[xD],..] [--shapes ..]\n       dequant-user --w8a8|--fp8 [--w8-configs BMxBNxBKxWARPSxSTAGES[xSPLIT],..] [--shapes ..]\n       dequant-user --emit BMxBNxBK WARPS STAGES [sm]\n       dequant-user --emit-decode BNxBMxBK WARPS STAGES [sm]\n       [REG=1] [UNCHECKED=1] [UNROLL=1] [KMAJOR=1] [EVEN=0] dequant-user --emit-lib BMxBNxBK WARPS STAGES [sm]");
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--emit-decode") {
        emit_decode(&args[i + 1..]);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--emit-lib") {
        emit_lib(&args[i + 1..]);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--emit") {
        emit(&args[i + 1..]);
        return;
    }
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let dev = ferrotile_benches::device_arg(&args);
    let gpu = dev.kind() == ferrotile::DeviceKind::Cuda;
    let shapes: Vec<[usize; 3]> = arg("--shapes")
        .unwrap_or_else(|| if gpu { "1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336".into() } else { "3x72x256,17x40x384".into() })
        .split(',')
        .filter_map(|s| {
            let v: Vec<usize> = s.split('x').map(|x| x.parse().ok()).collect::<Option<_>>()?;
            (v.len() == 3).then(|| [v[0], v[1], v[2]])
        })
        .collect();
    let cfgs: Vec<Cfg> = arg("--configs")
        .unwrap_or_else(|| if gpu { "16x64x128x4x3,16x128x128x4x3,16x32x256x4x3,64x64x128x4x3".into() } else { "16x32x32x4x2,16x16x64x4x2".into() })
        .split(',')
        .filter_map(parse_cfg)
        .collect();
    println!("dequant-user on {}", dev.name());
    let mut ok = true;
    if args.iter().any(|a| a == "--w8a8" || a == "--fp8") {
        // `--w8-configs BMxBNxBKxWARPSxSTAGES[xSPLIT[xPERSISTENT]],..`: forced
        // configurations too (PERSISTENT 1: a grid of one program per SM)
        let forced: Vec<ferrotile_kernels::quant::W8A8Config> = arg("--w8-configs")
            .unwrap_or_default()
            .split(',')
            .filter_map(|s| {
                let v: Vec<u32> = s.split('x').map(|x| x.parse().ok()).collect::<Option<_>>()?;
                (5..=7).contains(&v.len()).then(|| ferrotile_kernels::quant::W8A8Config {
                    bm: v[0],
                    bn: v[1],
                    bk: v[2],
                    num_warps: v[3],
                    num_stages: v[4],
                    split_k: v.get(5).copied().unwrap_or(1),
                    persistent: v.get(6).is_some_and(|&p| p != 0),
                })
            })
            .collect();
        let fp8 = args.iter().any(|a| a == "--fp8");
        for &[m, n, k] in &shapes {
            for c in std::iter::once(None).chain(forced.iter().copied().map(Some)) {
                match if fp8 { run_fp8(&dev, m, n, k, c) } else { run_w8a8(&dev, m, n, k, c) } {
                    Ok(o) => ok &= o,
                    Err(e) => {
                        println!("w8a8 {m}x{n}x{k} {c:?}: error: {e}");
                        ok = false;
                    }
                }
            }
        }
        if !ok {
            std::process::exit(1);
        }
        return;
    }
    if args.iter().any(|a| a == "--library") {
        // `--lib-configs BMxBNxBKxWARPSxSTAGESxSPLIT[xD],..`: forced
        // configurations too (a trailing `xD`: the decode form, `BM` the
        // rows of x, `BN` the weight columns; `xDS`: the decode form with the
        // scales on the weights)
        let forced: Vec<ferrotile_kernels::quant::QuantConfig> = arg("--lib-configs")
            .unwrap_or_default()
            .split(',')
            .filter_map(|s| {
                let (scale_w, s) = match s.strip_suffix("xDS") {
                    Some(t) => (true, format!("{t}xD")),
                    None => (false, s.to_string()),
                };
                let decode = s.ends_with("xD");
                let v: Vec<u32> = s.trim_end_matches("xD").split('x').map(|x| x.parse().ok()).collect::<Option<_>>()?;
                (v.len() == 6).then(|| ferrotile_kernels::quant::QuantConfig {
                    bm: v[0],
                    bn: v[1],
                    bk: v[2],
                    num_warps: v[3],
                    num_stages: v[4],
                    split_k: v[5],
                    decode,
                    scale_w,
                })
            })
            .collect();
        // (`--only-forced`: without the tuned configuration first — one
        // kernel to profile)
        let tuned = !args.iter().any(|a| a == "--only-forced");
        for &[m, n, k] in &shapes {
            for c in tuned.then_some(None).into_iter().chain(forced.iter().copied().map(Some)) {
                match run_library(&dev, m, n, k, c, if args.iter().any(|a| a == "--w8") { 8 } else { 4 }, args.iter().any(|a| a == "--epilogue")) {
                    Ok(o) => ok &= o,
                    Err(e) => {
                        println!("library {m}x{n}x{k} {c:?}: error: {e}");
                        ok = false;
                    }
                }
            }
        }
        if !ok {
            std::process::exit(1);
        }
        return;
    }
    for &[m, n, k] in &shapes {
        match run(&dev, m, n, k, &cfgs) {
            Ok(o) => ok &= o,
            Err(e) => {
                println!("error: {e}");
                ok = false;
            }
        }
    }
    if !ok {
        std::process::exit(1);
    }
}
