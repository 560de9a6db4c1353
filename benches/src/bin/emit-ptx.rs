//! Print the PTX of a library kernel specialization (no GPU needed).
//! `emit-ptx <kernel> <BLOCK> <f32|f16|bf16> <num_warps> [sm]`, or
//! `emit-ptx gemm <BM>x<BN>x<BK> <f32|tf32|f16|bf16> <num_warps> [sm] [bias] [stages=N]`
//! `[views] [colb] [swap] [cluster] [ws]` (`colb`: a column-major B; `swap`: the
//! swapped product Cᵀ = Bᵀ·Aᵀ of row-major operands; `cluster`: clusters of
//! 2 with one N tile; `ws`: a producer warpgroup, as `FERROTILE_WS=1` asks —
//! without it the PTX is the runtime's default);
//! `emit-ptx round_tf32_transpose <B> f32 <num_warps> [sm]`;
//! `emit-ptx wq_gemm <BM>x<BN>x<BK>x<BITS> <f16|bf16> <num_warps> [sm] [stages=N] [group=G] [zeros] [split] [even] [bias] [relu|gelu]`
//! (`wq_gemv <BN>x<BK>x<BITS> ...`: the one-row kernel);
//! `emit-ptx attention_decode <BM>x<BN>x<DP>x<G> <f16|bf16> <warps> [sm] [stages=N] [paged]`
//! (the quantized GEMM; the compiler's explanations on stderr);
//! a trailing `wgsl` prints a row kernel's WGSL instead (subgroups on);
//! `unchecked`: a row or quantized kernel without the guards (as `launch_unchecked`);
//! `proven`: as launched on rows as long as the block (masks proven true).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: emit-ptx <kernel> <BLOCK> <f32|f16|bf16> <num_warps> [sm]");
        std::process::exit(2);
    }
    use ferrotile_kernels::norm::*;
    use ferrotile_kernels::softmax::*;
    let dt = match a[3].as_str() {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    };
    let sm = a.get(5).and_then(|s| s.parse().ok()).unwrap_or(90);
    if a[1] == "gemm" {
        let k = ferrotile_kernels::gemm::gemm_kernel::ir();
        let t: Vec<i64> = a[2].split('x').map(|v| v.parse().unwrap()).collect();
        let bias = a.iter().any(|x| x == "bias") as i64;
        let stages: u32 = a.iter().find_map(|x| x.strip_prefix("stages=")).and_then(|v| v.parse().ok()).unwrap_or(2);
        let views = a.iter().any(|x| x == "views") as i64;
        let tf32 = (a[3] == "tf32") as i64;
        // `cluster`: clusters of 2 (one N tile: GROUP_M = 0)
        let cluster = a.iter().any(|x| x == "cluster");
        let cx = [t[0], t[1], t[2], if cluster { 0 } else { 8 }, 0, bias, tf32, views];
        let spec = specialize(k, &cx, &[dt, dt]).unwrap();
        // row-major A: unit stride along K (sak); B row-major (sbn) or
        // column-major (sbk); C row-major (scn). `swap`: the swapped
        // product of row-major operands (the kernel's A is Bᵀ, unit stride
        // sam; its B is Aᵀ, unit stride sbk; C written transposed, scm)
        let b_unit = if a.iter().any(|x| x == "colb") { "sbk" } else { "sbn" };
        let units: &[&str] = if a.iter().any(|x| x == "swap") { &["sam", "sbk", "scm"] } else { &["sak", b_unit, "scn"] };
        let one: Vec<bool> = k.params.iter().map(|p| units.contains(&p.name.as_str())).collect();
        let p = emit(
            &spec,
            &PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                arg_one: one,
                pipeline: stages.saturating_sub(1),
                warp_specialize: a.iter().any(|x| x == "ws"),
                cluster: if cluster { 2 } else { 1 },
                ..PtxOptions::new(sm, a[4].parse().unwrap(), k.params.len())
            },
        )
        .unwrap();
        eprintln!("shared memory: {} bytes", p.smem_bytes);
        println!("{}", p.text);
        return;
    }
    if a[1] == "attention_decode" {
        // `emit-ptx attention_decode <BM>x<BN>x<DP>x<G> <f16|bf16> <warps> [sm] [stages=N] [paged]`
        let k = ferrotile_kernels::attention::attention_decode::ir();
        let t: Vec<i64> = a[2].split('x').map(|v| v.parse().unwrap()).collect();
        let stages: u32 = a.iter().find_map(|x| x.strip_prefix("stages=")).and_then(|v| v.parse().ok()).unwrap_or(3);
        let mut cx: Vec<i64> = t.clone();
        cx.extend([0, 0, 0, 0, a.iter().any(|x| x == "paged") as i64, 1]);
        let spec = specialize(k, &cx, &[dt]).unwrap();
        let p = emit(
            &spec,
            &PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                pipeline: stages.saturating_sub(1),
                ..PtxOptions::new(sm, a[4].parse().unwrap(), k.params.len())
            },
        )
        .unwrap();
        print_explained(&p);
        return;
    }
    if a[1] == "wq_gemm" || a[1] == "wq_gemv" {
        let gemv = a[1] == "wq_gemv";
        let k = if gemv { ferrotile_kernels::quant::wq_gemv_kernel::ir() } else { ferrotile_kernels::quant::wq_gemm_kernel::ir() };
        let t: Vec<i64> = a[2].split('x').map(|v| v.parse().unwrap()).collect();
        let stages: u32 = a.iter().find_map(|x| x.strip_prefix("stages=")).and_then(|v| v.parse().ok()).unwrap_or(3);
        let flag = |f: &str| a.iter().any(|x| x == f) as i64;
        let group: i64 = a.iter().find_map(|x| x.strip_prefix("group=")).and_then(|v| v.parse().ok()).unwrap_or(128);
        let mut cx: Vec<i64> = t.clone();
        cx.extend([group, flag("zeros"), flag("split")]);
        if !gemv {
            cx.push(flag("even"));
        }
        // (the epilogue: `bias`, `relu` / `gelu`)
        cx.extend([flag("bias"), flag("relu") + 2 * flag("gelu")]);
        let spec = specialize(k, &cx, &[dt]).unwrap();
        let p = emit(
            &spec,
            &PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                pipeline: stages.saturating_sub(1),
                pipeline_every_loop: gemv,
                partial_accumulators: std::env::var("FERROTILE_PARTIAL_ACC").map_or(true, |v| v != "0"),
                register_operands: std::env::var("FERROTILE_REGISTER_OPERANDS").is_ok_and(|v| v == "1"),
                packed_16bit: std::env::var("FERROTILE_PACKED_16BIT").map_or(true, |v| v != "0"),
                safety: if a.iter().any(|x| x == "unchecked") { Safety::Unchecked } else { Safety::Safe },
                ..PtxOptions::new(sm, a[4].parse().unwrap(), k.params.len())
            },
        )
        .unwrap();
        print_explained(&p);
        return;
    }
    let k = match a[1].as_str() {
        "softmax_row" => softmax_row::ir(),
        "softmax_looped" => softmax_looped::ir(),
        "layer_norm_row" => layer_norm_row::ir(),
        "layer_norm_looped" => layer_norm_looped::ir(),
        "rms_norm_row" => rms_norm_row::ir(),
        "rms_norm_looped" => rms_norm_looped::ir(),
        "round_tf32_transpose" => ferrotile_kernels::gemm::round_tf32_transpose_kernel::ir(),
        other => {
            eprintln!("unknown kernel {other}");
            std::process::exit(2)
        }
    };
    let types: Vec<DType> = if a[1] == "round_tf32_transpose" { vec![] } else { vec![dt] };
    let spec = specialize(k, &[a[2].parse().unwrap()], &types).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    eprintln!("{}", spec.to_text());
    if a.iter().any(|x| x == "wgsl") {
        // the shader the wgpu runtime builds on a subgroup-capable GPU
        let wg = a[4].parse::<u32>().unwrap() * 32;
        let o = ferrotile_backends::wgsl::WgslOptions {
            workgroup_size: wg,
            subgroups: true,
            shader_f16: true,
            max_workgroup_storage: 49152,
            arg_div: vec![16; guarded_params(k)],
            ..Default::default()
        };
        let w = ferrotile_backends::wgsl::emit(&spec, &o).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        println!("{}", w.text);
        return;
    }
    // (`div=N`: what the launch proves of every integer argument — 1 for
    // odd row lengths and strides)
    let div: u32 = a.iter().find_map(|x| x.strip_prefix("div=")).and_then(|v| v.parse().ok()).unwrap_or(16);
    let p = emit(
        &spec,
        &PtxOptions {
            arg_div: vec![div; guarded_params(k)],
            pipeline: 1,
            warp_specialize: true,
            safety: if a.iter().any(|x| x == "unchecked") { Safety::Unchecked } else { Safety::Safe },
            // (`proven`: a launch whose arguments meet every mask bound —
            // rows as long as the block)
            proven_masks: if a.iter().any(|x| x == "proven") { ferrotile::ir::passes::proven_masks::bounds(&spec) } else { vec![] },
            ..PtxOptions::new(sm, a[4].parse().unwrap(), k.params.len())
        },
    )
    .unwrap();
    println!("{}", p.text);
}

/// The PTX on stdout; the compiler's explanations (conversions through
/// shared memory) and the shared memory it takes on stderr.
fn print_explained(p: &ferrotile_backends::ptx::PtxKernel) {
    for (line, what) in &p.conversions {
        eprintln!("line {line}: {what}");
    }
    for (line, whole, held) in &p.partial_sums {
        eprintln!("line {line}: accumulator carried pre-summed: {held} registers per thread instead of {whole}");
    }
    eprintln!("shared memory: {} bytes", p.smem_bytes);
    println!("{}", p.text);
}
