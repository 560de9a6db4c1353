//! `bench`: the kernel library next to the device's copy bandwidth (row
//! kernels) or TFLOP/s (GEMM); `bench --help` lists the options. The same
//! as `ferrotile bench` (the `ferrotile-cli` crate); the measurement is
//! described in [`ferrotile_benches::bench`].

use clap::Parser;

#[derive(Parser)]
#[command(name = "bench", about = "The kernel library's speed next to the device's copy bandwidth (row kernels) or TFLOP/s (GEMM)")]
struct Cli {
    #[command(flatten)]
    args: ferrotile_benches::bench::BenchArgs,
}

fn main() {
    std::process::exit(ferrotile_benches::bench::main(&Cli::parse().args))
}
