//! The main job: the kernel library on the best device available, every
//! result verified against an f64 reference, then timed and placed against
//! the device's roofline (`--help` for the options). The same as
//! `ferrotile run-library`; see [`ferrotile_benches::job`].
//!
//! `cargo run --release -p ferrotile-benches --bin run-library [-- --quick] [--svg FILE] [--json FILE]`

use clap::Parser;

#[derive(Parser)]
#[command(name = "run-library", about = "The kernel library on the best device, verified against f64, timed against the roofline")]
struct Cli {
    #[command(flatten)]
    args: ferrotile_benches::job::JobArgs,
}

fn main() {
    std::process::exit(ferrotile_benches::job::main(&Cli::parse().args))
}
