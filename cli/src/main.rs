//! `ferrotile`: the command line of the project.
//!
//! - `ferrotile devices` — the backends this machine runs, what
//!   `Device::best()` picks, and why a missing one is missing;
//! - `ferrotile run-library` — the main job: the whole kernel library on
//!   the best device, verified against f64, timed against the roofline
//!   (`--svg` draws the chart, `--json` writes the results);
//! - `ferrotile bench` — the benchmark of the row kernels and the GEMM
//!   next to copy bandwidth (its JSON lines join `benches/peers.py`'s);
//! - `ferrotile dump` — a library kernel's IR, PTX or WGSL for given
//!   constexprs and dtypes, with ptxas's register report;
//! - `ferrotile chart` — the SVG chart of `bench` / `run-library` /
//!   `peers.py` JSON lines, ferrotile next to each peer.
//!
//! Each subcommand's `--help` lists its options. The work is done in
//! `ferrotile-benches` (`job`, `bench`, `dump`, `chart`, `devices`).

use clap::{Parser, Subcommand};
use ferrotile_benches::{bench, chart, devices, dump, job};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "ferrotile", version, about = "Tile-level GPU kernels in Rust: devices, the kernel library, benchmarks, kernel dumps, charts")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The backends this machine runs (CPU interpreter, CUDA, wgpu, ptxas) and what Device::best() picks.
    Devices,
    /// The main job: the kernel library on the best device, verified against f64, timed against the roofline.
    RunLibrary(job::JobArgs),
    /// The benchmark: row kernels or the GEMM, graph-replayed and back-to-back times, next to copy bandwidth.
    Bench(bench::BenchArgs),
    /// A library kernel's IR, PTX or WGSL for given constexprs and dtypes (no GPU needed).
    Dump(dump::DumpArgs),
    /// An SVG chart of JSON result lines (bench --json, run-library --json, peers.py --json): each case, each implementation.
    Chart(ChartArgs),
}

#[derive(clap::Args)]
struct ChartArgs {
    /// JSON-lines files to read (one result per line; `impl` names the implementation).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Where to write the SVG.
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// The chart's title.
    #[arg(long, default_value = "ferrotile and its peers")]
    title: String,
}

fn chart(a: &ChartArgs) -> i32 {
    let mut recs = vec![];
    for f in &a.files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {}: {e}", f.display());
                return 2;
            }
        };
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(v) => recs.push(v),
                Err(e) => {
                    eprintln!("error: {}:{}: {e}", f.display(), i + 1);
                    return 2;
                }
            }
        }
    }
    match chart::compare_svg(&recs, &a.title).and_then(|svg| std::fs::write(&a.out, svg).map_err(|e| format!("{}: {e}", a.out.display()))) {
        Ok(()) => {
            println!("{} results → {}", recs.len(), a.out.display());
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

fn main() {
    let code = match Cli::parse().command {
        Command::Devices => {
            print!("{}", devices::report());
            0
        }
        Command::RunLibrary(a) => job::main(&a),
        Command::Bench(a) => bench::main(&a),
        Command::Dump(a) => dump::main(&a),
        Command::Chart(a) => chart(&a),
    };
    std::process::exit(code)
}
