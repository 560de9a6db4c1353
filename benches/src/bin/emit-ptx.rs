//! Print the PTX of a library kernel specialization (no GPU needed).
//! `emit-ptx <kernel> <BLOCK> <f32|f16|bf16> <num_warps> [sm]`

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
    let k = match a[1].as_str() {
        "softmax_row" => softmax_row::ir(),
        "softmax_looped" => softmax_looped::ir(),
        "layer_norm_row" => layer_norm_row::ir(),
        "layer_norm_looped" => layer_norm_looped::ir(),
        "rms_norm_row" => rms_norm_row::ir(),
        "rms_norm_looped" => rms_norm_looped::ir(),
        other => {
            eprintln!("unknown kernel {other}");
            std::process::exit(2)
        }
    };
    let dt = match a[3].as_str() {
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => DType::F32,
    };
    let spec = specialize(k, &[a[2].parse().unwrap()], &[dt]).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    eprintln!("{}", spec.to_text());
    let sm = a.get(5).and_then(|s| s.parse().ok()).unwrap_or(90);
    let p = emit(&spec, &PtxOptions { sm, num_warps: a[4].parse().unwrap(), arg_div16: vec![true; k.params.len()] }).unwrap();
    println!("{}", p.text);
}
