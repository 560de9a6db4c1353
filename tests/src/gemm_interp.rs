//! The library GEMM kernel (`gemm_kernel`, any specialization) run on the
//! CPU interpreter with row-major bf16 operands, for IR-pass equivalence
//! tests (pipelining, view lowering).

use ferrotile::__private::Arg;
use ferrotile::{bf16, Device};

/// A deterministic stream of bf16 values in [-2, 2) (xorshift64 from
/// `seed`), for operands of the equivalence tests.
pub fn bf16_stream(mut seed: u64) -> impl FnMut() -> bf16 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        bf16::from_f32(((seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0)
    }
}

/// `C = A·B` (M×K · K×N, row-major) over `splits` K ranges of `k_split`
/// (partials one after the other in C), with `bm × bn` tiles; C starts
/// poisoned with NaN.
#[allow(clippy::too_many_arguments)]
pub fn run(k: &ferrotile::ir::Kernel, m: usize, n: usize, kk: usize, bm: usize, bn: usize, a: &[bf16], b: &[bf16], splits: usize, k_split: usize) -> Vec<f32> {
    let dev = Device::cpu();
    let (ab, bb) = (dev.from_slice(a).unwrap(), dev.from_slice(b).unwrap());
    let mut c = dev.full(splits * m * n, f32::NAN).unwrap();
    let bias = dev.zeros::<f32>(1).unwrap();
    let tiles = (m.div_ceil(bm) * n.div_ceil(bn)) as u32;
    let (mi, ni, ki) = (m as i64, n as i64, kk as i64);
    let args = vec![
        Arg::buffer(&ab),
        Arg::buffer(&bb),
        Arg::buffer_mut(&mut c),
        Arg::buffer(&bias),
        Arg::scalar(m as i32),
        Arg::scalar(n as i32),
        Arg::scalar(kk as i32),
        Arg::scalar(ki),
        Arg::scalar(1i64),
        Arg::scalar(ni),
        Arg::scalar(1i64),
        Arg::scalar(ni),
        Arg::scalar(1i64),
        Arg::scalar(mi * ki),
        Arg::scalar(ki * ni),
        Arg::scalar(mi * ni),
        Arg::scalar(1.0f32),
        Arg::scalar(k_split as i32),
        Arg::scalar(mi * ni),
    ];
    ferrotile::runtime::run_interpreted(k, &dev, [tiles, 1, splits as u32], &args).unwrap();
    drop(args);
    c.to_vec().unwrap()
}

/// Per parameter of `gemm_kernel`: whether a launch on row-major A, B and C
/// passes it as 1 — its unit strides, as `gemm::kernel_args` maps them,
/// plain or `swap`ped (the PTX backend's `arg_one` facts).
pub fn unit_strides(k: &ferrotile::ir::Kernel, swap: bool) -> Vec<bool> {
    // (any sizes but 1)
    let (m, n, kk) = (100usize, 200usize, 300i64);
    let a = ferrotile_kernels::gemm::kernel_args([m, n], [kk, 1, n as i64, 1, 0, 0], n as i64, swap);
    let names = ["sam", "sak", "sbk", "sbn", "sab", "sbb"];
    k.params
        .iter()
        .map(|p| match p.name.as_str() {
            "scm" => a.scm == 1,
            "scn" => a.scn == 1,
            name => names.iter().position(|x| *x == name).is_some_and(|i| a.strides[i] == 1),
        })
        .collect()
}
