//! Golden PTX and WGSL: the backends' output, pinned byte for byte.
//!
//! Two kinds of goldens, both under `tests/golden/`:
//!
//! - **Full text** (`ptx/*.ptx`, `wgsl/*.wgsl`) for every library kernel in
//!   the configurations that exercise each code path: softmax / layer-norm /
//!   RMSNorm single-tile and looped, GEMM on FMA, `mma.sync` + `cp.async`,
//!   `wgmma` + `cp.async`, `wgmma` + TMA (one stream and warp-specialized),
//!   clusters with multicast, split-K and its reduction, the swapped decode
//!   product, tf32 (both MMA forms), epilogues; the same kernels as WGSL.
//!   A change shows up as a readable diff in review.
//! - **A digest manifest** (`conformance.digest`): every specialization the
//!   op conformance suite launches, emitted for sm_80 and sm_90 (integer
//!   arguments divisible by 16 or not) and as WGSL, one FNV-1a digest per
//!   output. It covers every op of the language without committing
//!   megabytes; when a line changes, `emit-ptx` or `FERROTILE_DUMP_PTX`
//!   shows the text.
//!
//! Refactors of the compiler keep both unchanged; a commit that changes
//! them on purpose says why, and re-blesses with
//! `FERROTILE_BLESS=1 cargo test -p ferrotile-tests --test golden`.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::{specialize, DType, Kernel};
use ferrotile::Device;
use ferrotile_backends::ptx::{self, PtxOptions};
use ferrotile_backends::wgsl::{self, WgslOptions};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn bless() -> bool {
    std::env::var("FERROTILE_BLESS").is_ok_and(|v| v == "1")
}

/// Compare `text` with the golden file `rel` (or write it when blessing).
fn check(rel: &str, text: &str) -> Result<(), String> {
    let path = golden_dir().join(rel);
    if bless() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return Ok(());
    }
    let want = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e} (FERROTILE_BLESS=1 creates it)", path.display()))?;
    if want == text {
        return Ok(());
    }
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), text.lines().collect());
    let i = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
    Err(format!(
        "{rel}: first difference at line {} ({} lines golden, {} now):\n  golden: {}\n  now:    {}",
        i + 1,
        w.len(),
        g.len(),
        w.get(i).unwrap_or(&"<eof>"),
        g.get(i).unwrap_or(&"<eof>")
    ))
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn ptx_opts(k: &Kernel, sm: u32, num_warps: u32, pipeline: u32) -> PtxOptions {
    // (unguarded, as `launch_unchecked` compiles: the text the compiler's
    // own decisions make; the guards have goldens of their own)
    PtxOptions { arg_div: vec![16; k.params.len()], pipeline, safety: Safety::Unchecked, ..PtxOptions::new(sm, num_warps, k.params.len()) }
}

/// Integer parameters named in `units` are known to equal 1 (unit strides).
fn units(k: &Kernel, units: &[&str]) -> Vec<bool> {
    k.params.iter().map(|p| units.contains(&p.name.as_str())).collect()
}

fn emit_ptx(spec: &Kernel, o: &PtxOptions) -> String {
    match ptx::emit(spec, o) {
        Ok(p) => format!("// smem_bytes {} threads {} params {:?}\n{}", p.smem_bytes, p.threads, p.params, p.text),
        Err(e) => format!("// error: {e}\n"),
    }
}

fn emit_wgsl(spec: &Kernel, o: &WgslOptions) -> String {
    match wgsl::emit(spec, o) {
        Ok(w) => w.text,
        Err(e) => format!("// error: {e}\n"),
    }
}

fn lavapipe(k: &Kernel) -> WgslOptions {
    WgslOptions {
        workgroup_size: 128,
        subgroups: false,
        shader_f16: false,
        max_workgroup_storage: 32768,
        arg_div: vec![16; k.params.len()],
        arg_one: vec![],
        safety: Safety::Unchecked,
        slice_layouts: true,
        word_stores: true,
    }
}

fn nvidia(k: &Kernel, warps: u32) -> WgslOptions {
    WgslOptions {
        workgroup_size: 32 * warps,
        subgroups: true,
        shader_f16: true,
        max_workgroup_storage: 49152,
        arg_div: vec![16; k.params.len()],
        arg_one: vec![],
        safety: Safety::Unchecked,
        slice_layouts: true,
        word_stores: true,
    }
}

/// GEMM constexprs: BM, BN, BK, GROUP_M, ACT, BIAS, TF32, VIEWS.
struct Gemm {
    name: &'static str,
    t: DType,
    u: DType,
    cx: [i64; 8],
    sm: u32,
    warps: u32,
    stages: u32,
    units: &'static [&'static str],
    ws: bool,
    cluster: u32,
}

#[test]
fn library_kernels_match_golden_files() {
    use ferrotile_kernels::gemm::*;
    use ferrotile_kernels::norm::*;
    use ferrotile_kernels::softmax::*;
    let mut errs = vec![];
    let mut push = |r: Result<(), String>| {
        if let Err(e) = r {
            errs.push(e)
        }
    };
    // row kernels: (kernel, BLOCK, dtype, warps)
    let rows: Vec<(&'static Kernel, i64, DType, u32)> = vec![
        (softmax_row::ir(), 4096, DType::F32, 8),
        (softmax_row::ir(), 1024, DType::BF16, 2),
        (softmax_looped::ir(), 2048, DType::BF16, 4),
        (layer_norm_row::ir(), 4096, DType::BF16, 8),
        (layer_norm_row::ir(), 1024, DType::F32, 2),
        (layer_norm_looped::ir(), 2048, DType::F16, 4),
        (rms_norm_row::ir(), 8192, DType::BF16, 16),
        (rms_norm_looped::ir(), 2048, DType::F32, 4),
    ];
    for (k, block, dt, warps) in rows {
        let spec = specialize(k, &[block], &[dt]).unwrap();
        let base = format!("{}.{block}.{dt}", k.name);
        for sm in [80, 90] {
            push(check(&format!("ptx/{base}.sm{sm}.ptx"), &emit_ptx(&spec, &ptx_opts(k, sm, warps, 1))));
        }
        push(check(&format!("wgsl/{base}.lavapipe.wgsl"), &emit_wgsl(&spec, &lavapipe(k))));
        push(check(&format!("wgsl/{base}.subgroups.wgsl"), &emit_wgsl(&spec, &nvidia(k, warps))));
    }

    // the multi-row softmax: (ROWS, BLOCK, dtype, warps); slice layouts
    // on PTX (no barrier: each row reduces within a warp)
    for (r, block, dt, warps) in [(16i64, 256i64, DType::BF16, 8u32), (4, 1024, DType::F32, 8)] {
        let k = softmax_rows::ir();
        let spec = specialize(k, &[r, block], &[dt]).unwrap();
        let base = format!("{}.{r}x{block}.{dt}", k.name);
        push(check(&format!("ptx/{base}.sm90.ptx"), &emit_ptx(&spec, &ptx_opts(k, 90, warps, 1))));
        push(check(&format!("wgsl/{base}.lavapipe.wgsl"), &emit_wgsl(&spec, &lavapipe(k))));
    }

    // GEMM configurations, as the library launches them
    const ROW: &[&str] = &["sak", "sbn", "scn"];
    const COLB: &[&str] = &["sak", "sbk", "scn"];
    const SWAP: &[&str] = &["sam", "sbk", "scm"];
    let (bf, f16, f32) = (DType::BF16, DType::F16, DType::F32);
    let g = |name, t, u, cx, sm, warps, stages, units, ws, cluster| Gemm { name, t, u, cx, sm, warps, stages, units, ws, cluster };
    let gemms = [
        g("fma_f32", f32, f32, [64, 64, 32, 8, 0, 0, 0, 0], 90, 4, 2, ROW, false, 1),
        g("fma_f32_strided", f32, f32, [32, 64, 16, 4, 1, 1, 0, 0], 80, 4, 1, &[], false, 1),
        g("mma_sync_cp_async_bf16", bf, bf, [128, 128, 32, 8, 0, 0, 0, 0], 80, 4, 3, ROW, false, 1),
        g("mma_sync_f16_bias_gelu", f16, f32, [128, 64, 64, 8, 2, 1, 0, 0], 80, 4, 2, ROW, false, 1),
        g("mma_sync_tf32", f32, f32, [128, 128, 32, 8, 0, 0, 1, 0], 80, 4, 3, ROW, false, 1),
        g("wgmma_cp_async_bf16", bf, bf, [128, 128, 64, 8, 0, 0, 0, 0], 90, 4, 3, ROW, false, 1),
        g("wgmma_cp_async_strided", bf, bf, [128, 128, 64, 8, 1, 1, 0, 0], 90, 4, 3, &[], false, 1),
        g("wgmma_tma_bf16", bf, bf, [128, 256, 64, 8, 0, 0, 0, 1], 90, 8, 4, ROW, false, 1),
        g("wgmma_tma_colb_f16", f16, f16, [128, 128, 64, 8, 1, 1, 0, 1], 90, 4, 4, COLB, false, 1),
        g("wgmma_tma_ws", bf, bf, [128, 256, 64, 8, 0, 0, 0, 1], 90, 8, 4, ROW, true, 1),
        g("wgmma_tma_cluster", bf, bf, [64, 16, 256, 0, 0, 0, 0, 1], 90, 4, 3, SWAP, false, 2),
        g("wgmma_tma_cluster_ws", bf, bf, [64, 16, 256, 0, 0, 0, 0, 1], 90, 4, 3, SWAP, true, 2),
        g("decode_swapped", bf, bf, [64, 16, 256, 0, 0, 2, 0, 1], 90, 4, 2, SWAP, false, 1),
        g("splitk_partials", bf, f32, [64, 64, 64, 8, 0, 0, 0, 1], 90, 4, 4, ROW, false, 1),
        g("wgmma_tf32_tma", f32, f32, [128, 128, 32, 8, 0, 0, 1, 1], 90, 4, 3, ROW, false, 1),
        g("wgmma_tf32_cp_async", f32, f32, [128, 128, 32, 8, 0, 0, 1, 0], 90, 4, 3, ROW, false, 1),
    ];
    let k = gemm_kernel::ir();
    for c in &gemms {
        let spec = specialize(k, &c.cx, &[c.t, c.u]).unwrap();
        let o = PtxOptions { arg_one: units(k, c.units), warp_specialize: c.ws, cluster: c.cluster, ..ptx_opts(k, c.sm, c.warps, c.stages - 1) };
        push(check(&format!("ptx/gemm.{}.ptx", c.name), &emit_ptx(&spec, &o)));
    }
    // GEMM as WGSL (`dot` as FMA loops), in shapes lavapipe's 32 KiB fit
    for (name, t, u, cx) in [
        ("f32", f32, f32, [32, 32, 16, 8, 0, 0, 0, 0]),
        ("bf16_bias_relu", bf, f32, [32, 64, 32, 4, 1, 1, 0, 0]),
        ("views_f16", f16, f16, [64, 64, 16, 8, 0, 0, 0, 1]),
    ] {
        let spec = specialize(k, &cx, &[t, u]).unwrap();
        push(check(&format!("wgsl/gemm.{name}.lavapipe.wgsl"), &emit_wgsl(&spec, &lavapipe(k))));
    }
    // Guarded, as `launch` compiles them (every buffer length a multiple
    // of 16): a row kernel single-tile and looped (checked too), GEMM on
    // TMA (views checked on the host), on cp.async rings and on FMA.
    let guarded = |k: &Kernel, sm, warps, stages, safety| PtxOptions { arg_div: vec![16; guarded_params(k)], safety, ..ptx_opts(k, sm, warps, stages) };
    for (k, block, dt, warps) in [(softmax_row::ir(), 4096, DType::F32, 8), (layer_norm_looped::ir(), 2048, DType::F16, 4)] {
        let spec = specialize(k, &[block], &[dt]).unwrap();
        let base = format!("{}.{block}.{dt}", k.name);
        push(check(&format!("ptx/{base}.sm90.safe.ptx"), &emit_ptx(&spec, &guarded(k, 90, warps, 1, Safety::Safe))));
        push(check(&format!("ptx/{base}.sm90.checked.ptx"), &emit_ptx(&spec, &guarded(k, 90, warps, 1, Safety::Checked))));
        let wo = WgslOptions { arg_div: vec![16; guarded_params(k)], safety: Safety::Safe, ..lavapipe(k) };
        push(check(&format!("wgsl/{base}.lavapipe.safe.wgsl"), &emit_wgsl(&spec, &wo)));
    }
    for c in gemms.iter().filter(|c| ["wgmma_tma_bf16", "mma_sync_cp_async_bf16", "fma_f32"].contains(&c.name)) {
        let spec = specialize(k, &c.cx, &[c.t, c.u]).unwrap();
        let o = PtxOptions { arg_one: units(k, c.units), ..guarded(k, c.sm, c.warps, c.stages - 1, Safety::Safe) };
        push(check(&format!("ptx/gemm.{}.safe.ptx", c.name), &emit_ptx(&spec, &o)));
    }
    let r = gemm_splitk_reduce::ir();
    let spec = specialize(r, &[1024, 2, 1], &[bf]).unwrap();
    push(check("ptx/gemm_splitk_reduce.1024.bf16.ptx", &emit_ptx(&spec, &ptx_opts(r, 90, 4, 1))));
    push(check("wgsl/gemm_splitk_reduce.1024.bf16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(r))));
    let t = round_tf32_transpose_kernel::ir();
    let spec = specialize(t, &[64], &[]).unwrap();
    push(check("ptx/round_tf32_transpose.64.ptx", &emit_ptx(&spec, &ptx_opts(t, 90, 4, 1))));
    push(check("wgsl/round_tf32_transpose.64.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(t))));
    // attention as the library launches it: the forward kernel (d128 on
    // 8 warps; causal GQA d64 with the log-sum-exp), the decode kernel and
    // the split combine; WGSL in lavapipe's tiles
    use ferrotile_kernels::attention::{attention_combine, attention_decode, attention_fwd};
    let f = attention_fwd::ir();
    for (name, t, cx, warps, stages) in
        [("d128.bf16", bf, [128i64, 128, 128, 1, 0, 0, 0, 1], 8u32, 2u32), ("d64.gqa4.causal.lse.f16", f16, [128, 64, 64, 4, 1, 0, 1, 1], 4, 2)]
    {
        let spec = specialize(f, &cx, &[t]).unwrap();
        push(check(&format!("ptx/attention_fwd.{name}.sm90.ptx"), &emit_ptx(&spec, &guarded(f, 90, warps, stages - 1, Safety::Unchecked))));
    }
    let spec = specialize(f, &[16, 16, 64, 2, 1, 1, 1, 1], &[bf]).unwrap();
    push(check("wgsl/attention_fwd.d64.gqa2.window.lse.bf16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(f))));
    let dk = attention_decode::ir();
    let spec = specialize(dk, &[16, 64, 128, 4, 1, 1, 1, 0, 0, 1], &[bf]).unwrap();
    push(check("ptx/attention_decode.gqa4.d128.split.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(dk, 90, 4, 2, Safety::Unchecked))));
    let spec = specialize(dk, &[16, 64, 128, 1, 0, 1, 0, 0, 1, 1], &[bf]).unwrap();
    push(check("ptx/attention_decode.paged.d128.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(dk, 90, 4, 2, Safety::Unchecked))));
    let spec = specialize(dk, &[16, 16, 64, 1, 0, 0, 0, 1, 0, 1], &[f16]).unwrap();
    push(check("wgsl/attention_decode.d64.f16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(dk))));
    let c = attention_combine::ir();
    let spec = specialize(c, &[16, 128, 1], &[bf]).unwrap();
    push(check("ptx/attention_combine.16x128.bf16.sm90.ptx", &emit_ptx(&spec, &ptx_opts(c, 90, 4, 1))));
    push(check("wgsl/attention_combine.16x128.bf16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(c))));
    // the backward: dK/dV at BM 32 (`Pᵀ·dO` and `dSᵀ·Q` with K = 32 from
    // registers on `wgmma`), dQ, causal GQA; WGSL in lavapipe's tiles
    use ferrotile_kernels::attention::{attention_bwd_dkdv, attention_bwd_dq};
    let bk = attention_bwd_dkdv::ir();
    let spec = specialize(bk, &[32, 64, 64, 1, 0, 0, 0, 0], &[bf]).unwrap();
    push(check("ptx/attention_bwd_dkdv.32x64.d64.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(bk, 90, 4, 1, Safety::Unchecked))));
    let spec = specialize(bk, &[16, 32, 64, 2, 1, 0, 1, 0], &[f16]).unwrap();
    push(check("wgsl/attention_bwd_dkdv.gqa2.causal.f16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(bk))));
    let bq = attention_bwd_dq::ir();
    let spec = specialize(bq, &[64, 64, 128, 4, 1, 0], &[bf]).unwrap();
    push(check("ptx/attention_bwd_dq.64x64.d128.gqa4.causal.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(bq, 90, 4, 1, Safety::Unchecked))));
    // variable-length forward: offsets loaded from cu_seqlens, K read
    // through `trans` of a cp.async slot
    let vl = ferrotile_kernels::attention::attention_fwd_varlen::ir();
    let spec = specialize(vl, &[128, 64, 128, 4, 1, 0, 1, 1], &[bf]).unwrap();
    push(check("ptx/attention_fwd_varlen.128x64.d128.gqa4.causal.lse.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(vl, 90, 8, 1, Safety::Unchecked))));
    let spec = specialize(vl, &[32, 32, 64, 2, 1, 1, 1, 1], &[f16]).unwrap();
    push(check("wgsl/attention_fwd_varlen.d64.gqa2.window.f16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(vl))));
    // the quantized GEMM (decode tile, split K) and GEMV (pipelined loop
    // without a dot), W4 with zero points
    use ferrotile_kernels::quant::{wq_gemm_kernel, wq_gemv_kernel};
    let qg = wq_gemm_kernel::ir();
    let spec = specialize(qg, &[16, 128, 64, 4, 128, 1, 1, 0, 0, 0], &[bf]).unwrap();
    push(check("ptx/wq_gemm.16x128x64.w4z.split.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(qg, 90, 4, 2, Safety::Safe))));
    let qv = wq_gemv_kernel::ir();
    let spec = specialize(qv, &[256, 64, 4, 128, 1, 1, 0, 0], &[bf]).unwrap();
    push(check(
        "ptx/wq_gemv.256x64.w4z.split.bf16.sm90.ptx",
        &emit_ptx(&spec, &PtxOptions { pipeline_every_loop: true, ..guarded(qv, 90, 8, 2, Safety::Safe) }),
    ));
    let spec = specialize(qv, &[32, 32, 8, 4096, 0, 0, 1, 2], &[f16]).unwrap();
    push(check("wgsl/wq_gemv.32x32.w8.f16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(qv))));
    // W8A8: int8 `wgmma` with the weights through `trans` of a K-major
    // TMA slot, scales and bias in the epilogue; the per-row quantization
    use ferrotile_kernels::quant::{quantize_rows_kernel, w8a8_gemm_kernel};
    let w8 = w8a8_gemm_kernel::ir();
    let spec = specialize(w8, &[128, 256, 128, 8, 1, 0, 0], &[bf]).unwrap();
    push(check("ptx/w8a8_gemm.128x256x128.bias.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(w8, 90, 8, 2, Safety::Safe))));
    let spec = specialize(w8, &[16, 32, 32, 8, 0, 1, 1], &[f16]).unwrap();
    push(check("wgsl/w8a8_gemm.16x32x32.split.f16.lavapipe.wgsl", &emit_wgsl(&spec, &lavapipe(w8))));
    let f8 = ferrotile_kernels::quant::fp8_gemm_kernel::ir();
    let spec = specialize(f8, &[128, 256, 128, 8, 1, 1, 0, 0, 0], &[DType::F8E4M3, bf]).unwrap();
    push(check("ptx/fp8_gemm.128x256x128.e4m3.rowwise.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(f8, 90, 8, 2, Safety::Safe))));
    let spec = specialize(f8, &[128, 128, 128, 8, 1, 2, 1, 0, 0], &[DType::F8E4M3, bf]).unwrap();
    push(check("ptx/fp8_gemm.128x128x128.e4m3.blockwise.bias.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(f8, 90, 8, 2, Safety::Safe))));
    let qr = quantize_rows_kernel::ir();
    let spec = specialize(qr, &[1024], &[bf]).unwrap();
    push(check("ptx/quantize_rows.1024.bf16.sm90.ptx", &emit_ptx(&spec, &guarded(qr, 90, 4, 0, Safety::Safe))));
    assert!(errs.is_empty(), "{} golden files differ:\n{}", errs.len(), errs.join("\n"));
}

#[test]
fn conformance_kernels_match_golden_digests() {
    let specs: Arc<Mutex<Vec<Kernel>>> = Arc::default();
    let s2 = specs.clone();
    ferrotile::runtime::set_specialization_observer(move |k| s2.lock().unwrap().push(k.clone()));
    let dev = Device::cpu();
    for c in ferrotile_tests::conformance::cases() {
        // outcomes are checked by conformance_cpu; here only the kernels count
        let _ = ferrotile_tests::conformance::run_case(&c, &dev, 7);
    }
    let specs = specs.lock().unwrap().clone();
    assert!(specs.len() >= 20, "too few specializations captured: {}", specs.len());
    let mut lines = vec![];
    for k in &specs {
        let id = format!("{} [{}]", k.name, k.describe_binding());
        for (sm, div16) in [(80, false), (80, true), (90, false), (90, true)] {
            let o = PtxOptions { arg_div: vec![if div16 { 16 } else { 1 }; k.params.len()], ..ptx_opts(k, sm, 4, 1) };
            let text = emit_ptx(k, &o);
            lines.push(format!("{id} sm{sm}{} {:016x} {}", if div16 { " div16" } else { "" }, fnv1a(&text), text.len()));
        }
        for (what, o) in [("lavapipe", lavapipe(k)), ("subgroups", nvidia(k, 4))] {
            let text = emit_wgsl(k, &o);
            lines.push(format!("{id} wgsl-{what} {:016x} {}", fnv1a(&text), text.len()));
        }
    }
    lines.sort();
    lines.dedup();
    let mut text = lines.join("\n");
    text.push('\n');
    check("conformance.digest", &text).unwrap_or_else(|e| panic!("{e}\n(`FERROTILE_DUMP_PTX=1` or `emit-ptx` prints the text of a specialization)"));
}
