//! A kernel of your own: the SwiGLU gate of a transformer MLP,
//! `out = silu(x) · g` over `[rows, cols]` bf16 tensors, one program per
//! row chunk, written as block-level Rust (the activation a tile function,
//! `#[func]`, inlined where it is called) and launched on the best device
//! there is (a CUDA GPU, a wgpu adapter with the `wgpu` feature, else the
//! CPU interpreter). The result is checked against f64.
//!
//! `cargo run --release -p ferrotile-kernels --example custom_kernel`
//! (`FERROTILE_DEVICE=cpu|cuda|wgpu` picks the device).

use ferrotile::prelude::*;

/// SiLU, `x·sigmoid(x)`: a tile function, for tiles of any shape and dtype.
#[func]
fn silu(x: Tile) -> Tile {
    x * sigmoid(x)
}

/// `out[r, c] = silu(x) · g` for `BLOCK` columns of row `program_id(0)`
/// per program along axis 1; masked at the row's end.
#[kernel]
pub fn swiglu<T: Float, const BLOCK: i32>(x: Ptr<T>, g: Ptr<T>, out: Ptr<T>, cols: i32) {
    let row = program_id(0) as i64;
    let c = program_id(1) * BLOCK + arange(0, BLOCK);
    let ok = c < cols;
    let off = row * (cols as i64) + (c as i64);
    let xv = load(x + off, ok, 0.0) as f32;
    let gv = load(g + off, ok, 0.0) as f32;
    store(out + off, (silu(xv) * gv) as T, ok);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    let (rows, cols) = (64usize, 3000usize);
    let xs: Vec<bf16> = (0..rows * cols).map(|i| bf16::from_f32(((i * 37 % 101) as f32 - 50.0) / 10.0)).collect();
    let gs: Vec<bf16> = (0..rows * cols).map(|i| bf16::from_f32(((i * 11 % 29) as f32 - 14.0) / 7.0)).collect();
    let (x, g) = (dev.from_slice(&xs)?, dev.from_slice(&gs)?);
    let mut out = dev.zeros::<bf16>(rows * cols)?;
    const BLOCK: usize = 1024;
    let grid = LaunchConfig::new([rows as u32, cols.div_ceil(BLOCK) as u32, 1]).num_warps(4);
    // (the first launch compiles the kernel for this device: time the second)
    swiglu::launch(&dev, grid, &x, &g, &mut out, cols as i32, BLOCK as i32)?;
    let ms = dev.time_ms(|| swiglu::launch(&dev, grid, &x, &g, &mut out, cols as i32, BLOCK as i32))?;
    let got = out.to_vec()?;
    let mut worst = 0.0f64;
    for i in 0..rows * cols {
        let (xv, gv) = (xs[i].to_f64(), gs[i].to_f64());
        let want = xv / (1.0 + (-xv).exp()) * gv;
        worst = worst.max((got[i].to_f64() - want).abs() / (want.abs() + 1e-2));
    }
    println!("swiglu {rows}x{cols} bf16 on {}: {ms:.3} ms, max relative error {worst:.1e}", dev.name());
    if worst > 1e-2 {
        return Err(format!("error {worst:.1e} above bf16's rounding").into());
    }
    Ok(())
}
