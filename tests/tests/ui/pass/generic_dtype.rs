// A dtype-generic kernel: one definition, launched on f32 and f16 buffers.
use ferrotile::prelude::*;

#[kernel]
fn axpy<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, out: Ptr<T>, a: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let xv = load(x + offs, mask, 0.0) as f32;
    let yv = load(y + offs, mask, 0.0) as f32;
    store(out + offs, (a * xv + yv) as T, mask);
}

fn main() {
    let dev = Device::cpu();
    let n = 100usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..n).map(|i| 1.0 - i as f32 * 0.25).collect();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| 2.0 * x + y).collect();
    let grid = (n as u32).div_ceil(32);

    let x = dev.from_slice(&xs).unwrap();
    let y = dev.from_slice(&ys).unwrap();
    let mut out = dev.full(n, f32::NAN).unwrap();
    axpy::launch(&dev, grid, &x, &y, &mut out, 2.0, n as i32, 32).unwrap();
    assert_eq!(out.to_vec().unwrap(), want);

    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let x = dev.from_slice(&h(&xs)).unwrap();
    let y = dev.from_slice(&h(&ys)).unwrap();
    let mut out = dev.full(n, f16::NAN).unwrap();
    axpy::launch(&dev, grid, &x, &y, &mut out, 2.0, n as i32, 32).unwrap();
    for (got, w) in out.to_vec().unwrap().iter().zip(&want) {
        assert!((got.to_f32() - w).abs() <= 1e-3 * w.abs().max(1.0), "{got} vs {w}");
    }
}
