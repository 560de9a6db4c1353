//! Streams and cudarc interop: two independent pieces of work on two
//! streams, ordered by an event where one needs the other's result; then,
//! on a CUDA device, a cudarc slice and stream used by ferrotile without a
//! copy, and a ferrotile buffer lent back to cudarc. On the CPU interpreter
//! and wgpu a stream is the device's one queue (same results, no overlap)
//! and the cudarc part is skipped with a note.
//!
//! `cargo run --release -p ferrotile-kernels --example streams`

use ferrotile::prelude::*;

/// `y = x · x`.
#[kernel]
pub fn square<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let i = program_id(0) * BLOCK + arange(0, BLOCK);
    let ok = i < n;
    let v = load(x + i, ok, 0.0);
    store(y + i, v * v, ok);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    println!("device: {}", dev.name());
    let (rows, cols) = (256, 1024);
    let n = rows * cols;
    let x = dev.from_slice(&(0..n).map(|i| ((i % 13) as f32 - 6.0) * 0.25).collect::<Vec<_>>())?;
    let (mut sq, mut sm, mut out) = (dev.zeros::<f32>(n)?, dev.zeros::<f32>(n)?, dev.zeros::<f32>(n)?);
    let grid = n.div_ceil(1024) as u32;

    // two streams: the square on one, a softmax on the other (independent)
    let (a, b) = (dev.new_stream()?, dev.new_stream()?);
    a.scope(|| square::launch(&dev, grid, &x, &mut sq, n as i32, 1024))?;
    b.scope(|| ferrotile_kernels::softmax(&dev, &x, &mut sm, rows, cols))?;
    // the second softmax reads `sq`: stream b waits for a's work so far
    let done_a = a.record()?;
    b.wait(&done_a)?;
    b.scope(|| ferrotile_kernels::softmax(&dev, &sq, &mut out, rows, cols))?;
    b.synchronize()?;
    // (reading back waits for every stream anyway)
    let (sqv, outv) = (sq.to_vec()?, out.to_vec()?);
    let row_sum: f32 = outv[..cols].iter().sum();
    let ok = sqv.iter().zip(x.to_vec()?).all(|(s, v)| *s == v * v) && (row_sum - 1.0).abs() < 1e-4;
    println!("two streams, one event: square + softmax(square) {}", if ok { "ok" } else { "WRONG" });
    if !ok {
        return Err("wrong result".into());
    }

    if dev.kind() != ferrotile::DeviceKind::Cuda {
        println!("(cudarc interop needs a CUDA device: skipped on {})", dev.name());
        return Ok(());
    }
    cudarc_interop(&dev)
}

fn cudarc_interop(dev: &Device) -> Result<(), Box<dyn std::error::Error>> {
    // cudarc's context is ferrotile's (the device's primary context)
    let ctx = dev.cudarc_context()?;
    let stream = ctx.new_stream()?;
    let host: Vec<f32> = (0..4096).map(|i| i as f32 * 0.5).collect();
    // a cudarc slice becomes a ferrotile buffer (no copy) ...
    let x = ferrotile::Buffer::from_cudarc(dev, stream.clone_htod(&host)?)?;
    let mut y = ferrotile::Buffer::from_cudarc(dev, stream.alloc_zeros::<f32>(4096)?)?;
    // ... ferrotile's kernel runs on the cudarc stream ...
    ferrotile::Stream::from_cudarc(dev, &stream)?.scope(|| square::launch(dev, 4, &x, &mut y, 4096, 1024))?;
    // ... and the result goes back as a cudarc slice
    let y = y.into_cudarc()?;
    let got = stream.clone_dtoh(&y)?;
    let ok = got.iter().zip(&host).all(|(g, h)| *g == h * h);
    println!("cudarc slice → ferrotile kernel on a cudarc stream → cudarc slice: {}", if ok { "ok" } else { "WRONG" });
    // a ferrotile buffer lent to cudarc for the length of a borrow
    let mut z = dev.from_slice(&host)?;
    let seen = stream.clone_dtoh(&*z.as_cudarc(&stream)?)?;
    println!("ferrotile buffer lent to cudarc: {}", if seen == host { "ok" } else { "WRONG" });
    if !ok || seen != host {
        return Err("wrong result".into());
    }
    Ok(())
}
