//! Bad arguments to the library's host functions are error values — never a
//! panic (debug builds check every integer overflow), and never a launch
//! that reaches outside its buffers: random sizes, strides and options —
//! zeros, small odd values, values at the 2³¹ / 2³² / `usize` edges —
//! against short buffers, on the CPU interpreter. Most calls are refused;
//! the few that launch run tiny problems. A launch the host checks let
//! through that then touches memory outside a buffer shows up here as the
//! interpreter's out-of-bounds error (on a GPU, behind `launch_unchecked`,
//! it would be undefined behavior; behind the guards, a silently partial
//! result) and fails the test like a panic does.

use ferrotile::{bf16, f8e4m3, Device, FloatElement};
use ferrotile_kernels::attention::{
    attention, attention_backward, attention_varlen, AttentionOptions, AttentionProblem, PagedKv, Strides, TokenStrides, VarlenProblem,
};
use ferrotile_kernels::gemm::{gemm, Activation, GemmOptions};
use ferrotile_kernels::quant::{
    fp8_gemm, quantize, quantize_int8, quantize_rows, w8a8_gemm, wq_gemm, Fp8Options, Fp8Scales, Int8Packed, Int8Weights, PackedWeights, QuantConfig,
    QuantFormat, QuantOptions, QuantWeights, W8A8Config, W8A8Options,
};
use ferrotile_kernels::reference::Rng;
use ferrotile_kernels::LibError;
use std::panic::{catch_unwind, AssertUnwindSafe};

const EDGES: &[usize] = &[
    0,
    1,
    2,
    3,
    7,
    16,
    17,
    64,
    127,
    128,
    256,
    257,
    1 << 20,
    (1 << 30) + 1,
    (1 << 31) - 1,
    1 << 31,
    1 << 32,
    (1 << 32) + 1,
    1 << 62,
    usize::MAX / 2,
    usize::MAX - 1,
    usize::MAX,
];

const CASES: usize = 1500;

/// Mostly small values (the ones that may pass the checks and launch), a
/// third from the edges.
fn pick(rng: &mut Rng) -> usize {
    if rng.below(3) == 0 {
        EDGES[rng.below(EDGES.len() as u64) as usize]
    } else {
        rng.below(9) as usize
    }
}

fn opt(rng: &mut Rng) -> Option<usize> {
    (rng.below(2) == 0).then(|| pick(rng))
}

/// Runs `f`; a panic, or an error that is a fault inside a launch, fails
/// with `what`.
fn check(what: &str, f: impl FnOnce() -> Result<(), LibError>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(_) => panic!("{what}: panicked"),
        Ok(Err(e)) if e.to_string().contains("out-of-bounds") => panic!("{what}: a launch reached outside a buffer: {e}"),
        Ok(_) => {}
    }
}

/// [`check`] for inputs taken on trust (varlen offsets the host does not
/// read): a guarded launch's fault — the kernel kept the bad offsets inside
/// the buffers and the checked launch reported it — is the expected
/// answer; an unguarded access outside a buffer or a panic is not.
fn check_trusted(what: &str, f: impl FnOnce() -> Result<(), LibError>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(_) => panic!("{what}: panicked"),
        Ok(Err(LibError::Launch(ferrotile::Error::Fault { .. }))) => {}
        Ok(Err(e)) if e.to_string().contains("out-of-bounds") => panic!("{what}: a launch reached outside a buffer: {e}"),
        Ok(_) => {}
    }
}

fn buf<T: FloatElement>(dev: &Device, n: usize) -> ferrotile::Buffer<T> {
    dev.zeros::<T>(n).unwrap()
}

#[test]
fn attention_arguments_are_checked() {
    let dev = Device::cpu();
    let mut rng = Rng::new(1);
    for i in 0..CASES {
        let st = |rng: &mut Rng| Strides { batch: pick(rng), head: pick(rng), seq: pick(rng) };
        let heads_q = pick(&mut rng);
        let p = AttentionProblem {
            batch: pick(&mut rng),
            heads_q,
            // (mostly a divisor of heads_q: the cases that get further)
            heads_kv: [heads_q, 1, pick(&mut rng)][rng.below(3) as usize],
            seqlen_q: pick(&mut rng),
            seqlen_k: pick(&mut rng),
            head_dim: pick(&mut rng),
            q: st(&mut rng),
            k: st(&mut rng),
            v: st(&mut rng),
            o: st(&mut rng),
        };
        let lens: Vec<usize> = (0..5).map(|_| rng.below(700) as usize).collect();
        let table = dev.from_slice(&(0..lens[4] as i32).map(|j| j % 5 - 1).collect::<Vec<_>>()).unwrap();
        let seqlens = dev.from_slice(&(0..lens[4] as i32).map(|j| j % 7 - 2).collect::<Vec<_>>()).unwrap();
        let paged =
            (rng.below(4) == 0).then(|| PagedKv { block_table: &table, max_pages: pick(&mut rng), page_size: pick(&mut rng), num_pages: pick(&mut rng) });
        let opts = AttentionOptions {
            causal: rng.below(2) == 0,
            window: (opt(&mut rng), opt(&mut rng)),
            scale: [None, Some(0.0), Some(-1.0), Some(f32::NAN), Some(0.125)][rng.below(5) as usize],
            paged,
            seqlens_k: (rng.below(4) == 0).then_some(&seqlens),
            ..Default::default()
        };
        let what = format!(
            "attention case {i}: {p:?} causal {} window {:?} scale {:?} paged {:?} lens {lens:?}",
            opts.causal,
            opts.window,
            opts.scale,
            opts.paged.map(|g| (g.max_pages, g.page_size, g.num_pages))
        );
        let (q, k, v) = (buf::<bf16>(&dev, lens[0]), buf::<bf16>(&dev, lens[1]), buf::<bf16>(&dev, lens[2]));
        let mut lse = dev.zeros::<f32>(lens[3]).unwrap();
        check(&what, || {
            let mut o = buf::<bf16>(&dev, lens[3]);
            attention(&dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &opts)
        });
        let bopts = AttentionOptions { paged: None, seqlens_k: None, ..opts };
        check(&format!("backward {what}"), || {
            let (mut dq, mut dk, mut dv) = (buf::<bf16>(&dev, lens[0]), buf::<bf16>(&dev, lens[1]), buf::<bf16>(&dev, lens[2]));
            let o = buf::<bf16>(&dev, lens[3]);
            attention_backward(&dev, &q, &k, &v, &o, &o, &lse, &mut dq, &mut dk, &mut dv, &p, &bopts)
        });
        // packed variable-length sequences: cumulative lengths that may be
        // decreasing, negative or past the totals
        let ts = |rng: &mut Rng| TokenStrides { token: pick(rng), head: pick(rng) };
        let cu = |rng: &mut Rng| -> Vec<i32> {
            let n = rng.below(6) as usize;
            let mut acc = 0i32;
            (0..n)
                .map(|_| {
                    let v = acc;
                    acc = acc.wrapping_add(rng.below(9) as i32 - 1);
                    v
                })
                .collect::<Vec<_>>()
        };
        let (cuq, cuk) = (cu(&mut rng), cu(&mut rng));
        let last = |c: &[i32]| c.last().map_or(0, |&v| v.max(0) as usize);
        let vp = VarlenProblem {
            // (mostly the batch and totals the cumulative lengths say)
            batch: if rng.below(4) == 0 { pick(&mut rng) } else { cuq.len().saturating_sub(1) },
            heads_q: p.heads_q,
            heads_kv: p.heads_kv,
            head_dim: p.head_dim,
            total_q: if rng.below(4) == 0 { pick(&mut rng) } else { last(&cuq) },
            total_k: if rng.below(4) == 0 { pick(&mut rng) } else { last(&cuk) },
            max_seqlen_q: if rng.below(4) == 0 { pick(&mut rng) } else { 9 },
            max_seqlen_k: if rng.below(4) == 0 { pick(&mut rng) } else { 9 },
            q: ts(&mut rng),
            k: ts(&mut rng),
            v: ts(&mut rng),
            o: ts(&mut rng),
            // (offsets on trust a third of the time: then they reach the
            // kernels, whose guards keep them inside the tensors)
            check_offsets: rng.below(3) != 0,
        };
        let (cq, ck) = (dev.from_slice(&cuq).unwrap(), dev.from_slice(&cuk).unwrap());
        let vopts = AttentionOptions { paged: None, seqlens_k: None, ..opts };
        let check_varlen = if vp.check_offsets { check } else { check_trusted };
        check_varlen(&format!("varlen case {i}: {vp:?}"), || {
            let mut o = buf::<bf16>(&dev, lens[3]);
            attention_varlen(&dev, &q, &k, &v, &mut o, None, &cq, &ck, &vp, &vopts)
        });
    }
}

#[test]
fn gemm_and_row_kernel_arguments_are_checked() {
    let dev = Device::cpu();
    let mut rng = Rng::new(2);
    for i in 0..CASES {
        let (m, n, k) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
        let lens: Vec<usize> = (0..4).map(|_| rng.below(300) as usize).collect();
        let batch = pick(&mut rng);
        let what = format!("case {i}: {m}x{n}x{k} batch {batch} lens {lens:?}");
        let (a, b, bias) = (buf::<bf16>(&dev, lens[0]), buf::<bf16>(&dev, lens[1]), buf::<bf16>(&dev, lens[3]));
        check(&format!("gemm {what}"), || {
            let mut c = buf::<bf16>(&dev, lens[2]);
            let opts = GemmOptions { batch, bias: (rng.below(2) == 0).then_some(&bias), activation: Activation::Gelu, ..Default::default() };
            gemm(&dev, &a, &b, &mut c, m, n, k, &opts)
        });
        check(&format!("softmax {what}"), || {
            let mut y = buf::<bf16>(&dev, lens[2]);
            ferrotile_kernels::softmax(&dev, &a, &mut y, m, n)
        });
        check(&format!("layer_norm {what}"), || {
            let mut y = buf::<bf16>(&dev, lens[2]);
            ferrotile_kernels::layer_norm(&dev, &a, &b, &bias, &mut y, m, n, 1e-5)
        });
        check(&format!("rms_norm {what}"), || {
            let mut y = buf::<bf16>(&dev, lens[2]);
            ferrotile_kernels::rms_norm(&dev, &a, &b, &mut y, m, n, 1e-5)
        });
    }
}

#[test]
fn quantized_gemm_arguments_are_checked() {
    let dev = Device::cpu();
    let mut rng = Rng::new(3);
    for i in 0..CASES {
        let m = pick(&mut rng);
        // W4A16 / W8A16 weights of a valid small shape, or a claimed shape
        // that their vectors do not hold
        let (qk, qn) = if rng.below(4) == 0 { (pick(&mut rng), pick(&mut rng)) } else { (8 * rng.below(6) as usize, 8 * rng.below(6) as usize) };
        let (sx, so) = if rng.below(2) == 0 { (0, 0) } else { (pick(&mut rng), pick(&mut rng)) };
        // buffer lengths: mostly what the shape needs (plus a little), where
        // that is small, else random
        let mut fit = |rows: usize, stride: usize, cols: usize| {
            let want = rows.checked_sub(1).and_then(|r| r.checked_mul(if stride == 0 { cols } else { stride })).and_then(|v| v.checked_add(cols));
            match want {
                Some(w) if w <= 1 << 14 && rng.below(4) != 0 => w + rng.below(3) as usize,
                _ => rng.below(300) as usize,
            }
        };
        let lens = [fit(m, sx, qk), fit(qk, 0, qn), fit(m, so, qn), fit(1, 0, qn.max(m))];
        let (x, bias) = (buf::<bf16>(&dev, lens[0]), buf::<bf16>(&dev, lens[3]));
        let f = QuantFormat { bits: [4, 8, 3][rng.below(3) as usize], group: [0, 16, 32, 64, 128, 7][rng.below(6) as usize], zeros: rng.below(2) == 0 };
        let config = (rng.below(2) == 0).then(|| QuantConfig {
            bm: pick(&mut rng) as u32,
            bn: pick(&mut rng) as u32,
            bk: pick(&mut rng) as u32,
            num_warps: pick(&mut rng) as u32,
            num_stages: pick(&mut rng) as u32,
            split_k: pick(&mut rng) as u32,
            decode: rng.below(2) == 0,
            scale_w: rng.below(2) == 0,
        });
        let what = format!("case {i}: m {m} {qk}x{qn} {f:?} {config:?} strides {sx} {so} lens {lens:?}");
        let small = |v: usize| v.min(1 << 12);
        let p = if f.bits == 4 { 8 } else { 4 };
        let groups = if f.group == 0 { 1 } else { small(qk).div_ceil(f.group) };
        let pw = PackedWeights::<bf16> {
            k: qk,
            n: qn,
            format: f,
            qweight: vec![0x1234_5678; small(qk) / p * small(qn)],
            scales: vec![bf16::ONE; groups * small(qn)],
            qzeros: if f.zeros { vec![0x0101_0101; groups * small(qn).div_ceil(p)] } else { vec![] },
            perm: None,
        };
        check(&format!("wq_gemm {what}"), || {
            let w = QuantWeights::upload(&dev, &pw)?;
            let mut o = buf::<bf16>(&dev, lens[2]);
            let opts = QuantOptions { bias: (rng.below(2) == 0).then_some(&bias), activation: Activation::Relu, x_row_stride: sx, out_row_stride: so, config };
            wq_gemm(&dev, &x, &w, &mut o, m, &opts)
        });
        // (mostly as many weights as the claimed shape, where that is small)
        let wlen = qk.checked_mul(qn).filter(|&l| l <= 1 << 12 && rng.below(4) != 0).unwrap_or(lens[1]);
        let wf: Vec<f32> = (0..wlen).map(|j| (j % 5) as f32 - 2.0).collect();
        check(&format!("quantize {what}"), || quantize::<bf16>(&wf, qk, qn, f).map(|_| ()));
        // W8A8: int8 weights `[n, k]`, per-token quantization of x
        check(&format!("w8a8 {what}"), || {
            let packed = quantize_int8(&wf, qk, qn)?;
            let w = Int8Weights::upload(&dev, &packed)?;
            let (mut xq, mut xs) = (dev.zeros::<i8>(lens[0]).unwrap(), dev.zeros::<f32>(lens[3]).unwrap());
            quantize_rows(&dev, &x, m, qk, sx, &mut xq, &mut xs)?;
            // (xq is contiguous: its row stride is K)
            let sx = 0;
            // (the persistent grid rides on the random `decode` flag)
            let config = config.map(|c| W8A8Config {
                bm: c.bm,
                bn: c.bn,
                bk: c.bk,
                num_warps: c.num_warps,
                num_stages: c.num_stages,
                split_k: c.split_k,
                persistent: c.decode,
            });
            let mut o = buf::<bf16>(&dev, lens[2]);
            let opts = W8A8Options { bias: Some(&bias), activation: Activation::Gelu, x_row_stride: sx, out_row_stride: so, config };
            w8a8_gemm(&dev, &xq, &xs, &w, &mut o, m, &opts)
        });
        check(&format!("Int8Packed::new {what}"), || {
            Int8Packed::new(vec![1; wlen], vec![1.0; if rng.below(2) == 0 { qn.min(1 << 12) } else { lens[3] }], qn, qk).map(|p| drop(p.dequantize()))
        });
        check(&format!("fp8 {what}"), || {
            let a = buf::<f8e4m3>(&dev, lens[0]);
            let b = buf::<f8e4m3>(&dev, lens[1]);
            let (sa, sb) = (dev.zeros::<f32>(lens[3]).unwrap(), dev.zeros::<f32>(lens[2]).unwrap());
            let scales =
                [Fp8Scales::Tensor { a: 1.0, b: 2.0 }, Fp8Scales::Rows { a: &sa, b: &sb }, Fp8Scales::Blocks { a: &sa, b: &sb }][rng.below(3) as usize];
            let mut o = buf::<bf16>(&dev, lens[2]);
            let opts = Fp8Options { scales, bias: Some(&bias), activation: Activation::None, out_row_stride: so, config: None };
            fp8_gemm(&dev, &a, &b, &mut o, m, qn, qk, &opts)
        });
    }
}

/// Checkpoint imports take tensors as a file gives them: any lengths, any
/// group indices, any shape claims.
#[test]
fn checkpoint_imports_are_checked() {
    let mut rng = Rng::new(4);
    for i in 0..CASES {
        let (k, n) = if rng.below(3) == 0 { (pick(&mut rng), pick(&mut rng)) } else { (16 * rng.below(5) as usize, 8 * rng.below(5) as usize) };
        let group = [0, 16, 32, 7, pick(&mut rng)][rng.below(5) as usize];
        let bits = [4, 8, 2][rng.below(3) as usize];
        let len = |rng: &mut Rng, want: Option<usize>| match want {
            Some(w) if w <= 1 << 12 && rng.below(4) != 0 => w,
            _ => rng.below(64) as usize,
        };
        let groups = if group == 0 { Some(1) } else { k.checked_div(group) };
        let qw: Vec<i32> = (0..len(&mut rng, k.checked_mul(n).map(|v| v / 8))).map(|j| (j as i32).wrapping_mul(0x3b9a_ca07)).collect();
        let qz: Vec<i32> = (0..len(&mut rng, groups.and_then(|g| g.checked_mul(n)).map(|v| v / 8))).map(|j| j as i32 * 7).collect();
        let sc: Vec<bf16> = (0..len(&mut rng, groups.and_then(|g| g.checked_mul(n)))).map(|_| bf16::ONE).collect();
        // g_idx: in order, shuffled within range, or out of range
        let gi: Vec<i32> = (0..len(&mut rng, Some(k)))
            .map(|r| match rng.below(3) {
                0 => (r / group.max(1)) as i32,
                1 => rng.below(groups.unwrap_or(1).clamp(1, 64) as u64) as i32,
                _ => rng.below(200) as i32 - 100,
            })
            .collect();
        let what = format!("case {i}: k {k} n {n} group {group} bits {bits} lens {} {} {} {}", qw.len(), qz.len(), sc.len(), gi.len());
        check(&format!("from_gptq {what}"), || {
            PackedWeights::from_gptq(&qw, &qz, &sc, (rng.below(2) == 0).then_some(&gi[..]), k, n, bits, group).map(|w| drop(w.dequantize()))
        });
        check(&format!("from_awq {what}"), || PackedWeights::from_awq(&qw, &qz, &sc, k, n, group).map(|w| drop(w.dequantize())));
    }
}
