//! Autotuning a kernel of your own: the same row-sum kernel in several
//! configurations (`BLOCK` columns per step and the warp count), timed on
//! the device on the first call for a shape, the fastest remembered for
//! every later call with the same key (the CPU interpreter has no warps to
//! tune: there it takes the first configuration).
//!
//! `cargo run --release -p ferrotile-kernels --example autotune`
//! (`FERROTILE_AUTOTUNE_PRINT=1` prints the choice).

use ferrotile::prelude::*;
use ferrotile::{Autotuner, TuneConfig};

/// `out[r] = Σ_c x[r, c]`, `BLOCK` columns per step.
#[kernel]
pub fn row_sum<const BLOCK: i32>(x: Ptr<f32>, out: Ptr<f32>, cols: i32) {
    let row = program_id(0) as i64;
    let mut acc = zeros([BLOCK], f32);
    for c0 in (0..cols).step_by(BLOCK) {
        let c = c0 + arange(0, BLOCK);
        acc = acc + load(x + row * (cols as i64) + c, c < cols, 0.0);
    }
    store(out + row, sum(acc, axis = 0));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    let (rows, cols) = (512usize, 5000usize);
    let xv: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect();
    let x = dev.from_slice(&xv)?;
    let mut out = dev.zeros::<f32>(rows)?;
    let configs: Vec<TuneConfig> =
        [(256, 2), (512, 4), (1024, 4), (2048, 8)].iter().map(|&(block, warps)| TuneConfig::new(warps).with("BLOCK", block)).collect();
    let tuner = Autotuner::new("row_sum", configs);
    // the key says which calls share a choice: here, the column count
    let key = format!("cols={cols}");
    let chosen = tuner.run(&dev, &key, |tc| {
        let cfg = LaunchConfig::new([rows as u32, 1, 1]).num_warps(tc.num_warps);
        row_sum::launch(&dev, cfg, &x, &mut out, cols as i32, tc.get("BLOCK")? as i32)
    })?;
    let got = out.to_vec()?;
    for r in 0..rows {
        let want: f64 = xv[r * cols..(r + 1) * cols].iter().map(|&v| v as f64).sum();
        if (got[r] as f64 - want).abs() > 1e-3 * (1.0 + want.abs()) {
            return Err(format!("row {r}: {} against {want}", got[r]).into());
        }
    }
    println!("row_sum {rows}x{cols} on {}: chose {chosen}", dev.name());
    if let Some(report) = tuner.report(&dev, &key) {
        println!("{report:?}");
    }
    Ok(())
}
