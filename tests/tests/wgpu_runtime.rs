//! The wgpu runtime's timing: `Device::time_ms` on a wgpu adapter measures
//! dispatches and copies with GPU timestamps where the adapter has them
//! (lavapipe does), returns positive finite times, and recovers after a
//! timed closure fails. Without an adapter: "skipped: no wgpu adapter".

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_timing() {
    use ferrotile::Device;
    use ferrotile_kernels::softmax::{softmax_with, SoftmaxConfig};
    let dev = match Device::wgpu() {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no wgpu adapter ({e})");
            return;
        }
    };
    let method = dev.timing_method();
    println!("{}: timing by {method}", dev.name());
    let (rows, cols) = (64, 1000);
    let x = dev.from_slice(&(0..rows * cols).map(|i| (i % 17) as f32 * 0.25).collect::<Vec<f32>>()).unwrap();
    let mut y = dev.zeros::<f32>(rows * cols).unwrap();
    let cfg = SoftmaxConfig::for_cols(cols, 4);
    // warm-up compiles the pipeline outside the timed region
    softmax_with(&dev, &x, &mut y, rows, cols, cols, cols, cfg).unwrap();
    let t = dev.time_ms(|| softmax_with(&dev, &x, &mut y, rows, cols, cols, cols, cfg).map_err(|e| ferrotile::Error::Buffer(e.to_string()))).unwrap();
    assert!(t.is_finite() && t > 0.0, "kernel time {t} ms");
    let src = dev.zeros::<u8>(1 << 22).unwrap();
    let mut dst = dev.zeros::<u8>(1 << 22).unwrap();
    let c = dev.time_ms(|| src.copy_to(&mut dst)).unwrap();
    assert!(c.is_finite() && c > 0.0, "copy time {c} ms");
    // a failing closure is reported and leaves timing usable
    let err = dev.time_ms(|| Err(ferrotile::Error::Buffer("deliberate".into())));
    assert!(err.is_err());
    let again = dev.time_ms(|| src.copy_to(&mut dst)).unwrap();
    assert!(again.is_finite() && again > 0.0);
    let bw = dev.copy_bandwidth_gbs(1 << 22, 3).unwrap();
    assert!(bw.is_finite() && bw > 0.0);
    println!("softmax {rows}x{cols}: {t:.4} ms; copy 4 MiB: {c:.4} ms; copy bandwidth {bw:.1} GB/s");
}
