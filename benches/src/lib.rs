//! Shared pieces of the benchmark and main-job binaries.

use std::time::Instant;

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
