//! CUDA graphs: capture a sequence of launches once, then replay it with
//! no per-launch host overhead (what a decode loop does). The work runs
//! only at replay, on the buffers it was captured with. Run the kernels
//! once before capturing (compilation and the autotuner's first run wait
//! for the device, which a capture refuses). Elsewhere than CUDA,
//! `capture` is an error value: this example says so and exits cleanly.
//!
//! `cargo run --release -p ferrotile-kernels --example graphs`

use ferrotile::prelude::*;

/// `y = a·x + y`.
#[kernel]
pub fn axpy<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, a: f32, n: i32) {
    let i = program_id(0) * BLOCK + arange(0, BLOCK);
    let ok = i < n;
    store(y + i, a * load(x + i, ok, 0.0) + load(y + i, ok, 0.0), ok);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    let n = 1 << 20;
    let x = dev.from_slice(&vec![1.0f32; n])?;
    let mut y = dev.zeros::<f32>(n)?;
    const BLOCK: usize = 1024;
    let grid = n.div_ceil(BLOCK) as u32;
    // (warm-up: compiles the kernel)
    axpy::launch(&dev, grid, &x, &mut y, 1.0, n as i32, BLOCK as i32)?;
    let graph = match dev.capture(|| (0..10).try_for_each(|_| axpy::launch(&dev, grid, &x, &mut y, 0.5, n as i32, BLOCK as i32))) {
        Ok(g) => g,
        Err(e) => {
            println!("no graphs on {}: {e}", dev.name());
            return Ok(());
        }
    };
    let ms = dev.time_ms(|| graph.replay())?;
    dev.synchronize()?;
    // 1 (warm-up) + 10 × 0.5 per replay; one replay here
    let got = y.to_vec()?;
    if got.iter().any(|&v| v != 6.0) {
        return Err(format!("y[0] = {} after one replay, 6 expected", got[0]).into());
    }
    println!("10 launches replayed from a graph on {} in {ms:.3} ms", dev.name());
    Ok(())
}
