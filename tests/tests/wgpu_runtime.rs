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

/// Timing is per calling thread: while one thread times its own launches,
/// others launch on the same device; every launch succeeds and every
/// timing is a positive finite number (a device-wide timing slot lost
/// launches to "buffer still mapped" and counted other threads' kernels).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_timing_is_per_thread() {
    use ferrotile::Device;
    use ferrotile_kernels::softmax::{softmax_with, SoftmaxConfig};
    let dev = match Device::wgpu() {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no wgpu adapter ({e})");
            return;
        }
    };
    let (rows, cols) = (16, 256);
    let cfg = SoftmaxConfig::for_cols(cols, 4);
    std::thread::scope(|s| {
        let mut hs = vec![];
        for t in 0..3 {
            let dev = dev.clone();
            hs.push(s.spawn(move || {
                let x = dev.from_slice(&(0..rows * cols).map(|i| (i % 13) as f32 * 0.5).collect::<Vec<f32>>()).unwrap();
                let mut y = dev.zeros::<f32>(rows * cols).unwrap();
                for _ in 0..40 {
                    if t == 0 {
                        let ms = dev
                            .time_ms(|| softmax_with(&dev, &x, &mut y, rows, cols, cols, cols, cfg).map_err(|e| ferrotile::Error::Buffer(e.to_string())))
                            .unwrap();
                        assert!(ms.is_finite() && ms > 0.0, "thread {t}: {ms} ms");
                    } else {
                        softmax_with(&dev, &x, &mut y, rows, cols, cols, cols, cfg).unwrap();
                    }
                }
                dev.synchronize().unwrap();
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
    });
}
