//! The benchmark harness and the tools behind the `ferrotile` CLI
//! (`ferrotile-cli`): the main job ([`job`]), the benchmark ([`bench`]),
//! charts ([`chart`]), the backend report ([`devices`]) and the kernel
//! dump ([`dump`]); below, the timing helpers they share.

pub mod bench;
pub mod chart;
pub mod devices;
pub mod dump;
pub mod job;

use ferrotile::Device;
use std::time::Instant;

/// The device a tool's `--device cpu|cuda|wgpu` names (default:
/// `Device::best()`); an unknown name or an unavailable device prints why
/// and exits with code 2 (a named device is never replaced by another).
pub fn device_arg(args: &[String]) -> Device {
    let name = args.iter().position(|a| a == "--device").and_then(|i| args.get(i + 1)).map(String::as_str);
    job::open_device(name).unwrap_or_else(|e| {
        eprintln!("no device: {e}");
        std::process::exit(2)
    })
}

/// What `FERROTILE_EXPLAIN=1` would print for a kernel compiled offline
/// (the `--emit` of the user-kernel tools), and its size, on stderr.
pub fn explain_ptx(p: &ferrotile_backends::ptx::PtxKernel) {
    for (line, why) in &p.fma_dots {
        eprintln!("line {line}: dot on the FMA path: {why}");
    }
    for (line, why) in &p.mma_sync_dots {
        eprintln!("line {line}: dot not on wgmma: {why}");
    }
    for (line, what) in &p.conversions {
        eprintln!("line {line}: through shared memory: {what}");
    }
    eprintln!("{} threads, {} bytes of shared memory, {} tensor maps", p.threads, p.smem_bytes, p.tensor_maps.len());
}

/// Median wall time of `reps` runs of `f` after `warmup` runs, in seconds.
pub fn median_time(warmup: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let mut ts: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ts[ts.len() / 2]
}

/// Median device time per call (ms), measured two ways ([`time_both`]).
#[derive(Clone, Copy)]
pub struct Timing {
    /// back-to-back launches
    pub b2b: f64,
    /// replayed from a graph (`None`: the device has no graphs)
    pub graph: Option<f64>,
}

impl Timing {
    /// The reported time: from the graph where there is one (as the
    /// peers' script times PyTorch and cuBLAS), else back to back.
    pub fn ms(&self) -> f64 {
        self.graph.unwrap_or(self.b2b)
    }
}

/// Median device time per call of `f`, two ways, alternating batch by
/// batch so that both see the same clocks (a long 8192³ run heats the GPU
/// and lowers them; measured one after the other, the second method lost
/// up to 20 %): `batch` calls back to back, and `batch` calls captured once
/// into a graph and replayed (`Device::capture`: how the peers' script
/// times cuBLAS — no host overhead, no launch gaps). The graph time is
/// `None` where the device has no graphs.
pub fn time_both(dev: &Device, reps: usize, batch: usize, mut f: impl FnMut() -> ferrotile::Result<()>) -> ferrotile::Result<Timing> {
    let graph = if dev.kind() == ferrotile::DeviceKind::Cuda {
        match dev.capture(|| (0..batch).try_for_each(|_| f())) {
            Ok(g) => Some(g),
            Err(e) => {
                println!("(no graph: {e})");
                None
            }
        }
    } else {
        None
    };
    if let Some(g) = &graph {
        g.replay()?;
        dev.synchronize()?;
    }
    let (mut b2b, mut gs) = (vec![], vec![]);
    for _ in 0..reps.div_ceil(batch).max(5) {
        b2b.push(dev.time_ms(|| (0..batch).try_for_each(|_| f()))? / batch as f64);
        if let Some(g) = &graph {
            gs.push(dev.time_ms(|| g.replay())? / batch as f64);
        }
    }
    Ok(Timing { b2b: median_of(b2b).unwrap_or(f64::NAN), graph: median_of(gs) })
}

pub fn median_of(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied()
}
