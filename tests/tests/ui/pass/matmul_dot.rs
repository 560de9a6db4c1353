// A tiled matmul: loop-carried f32 accumulator fed by `dot`, masked edges.
use ferrotile::prelude::*;

#[kernel]
fn matmul<const BM: i32, const BN: i32, const BK: i32>(a: Ptr<f32>, b: Ptr<f32>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let ka = k0 + rk;
        let a_mask = (expand_dims(rm, 1) < m) & (expand_dims(ka, 0) < k);
        let b_mask = (expand_dims(ka, 1) < k) & (expand_dims(rn, 0) < n);
        let ta = load(a + expand_dims(rm, 1) * k + expand_dims(ka, 0), a_mask, 0.0);
        let tb = load(b + expand_dims(ka, 1) * n + expand_dims(rn, 0), b_mask, 0.0);
        acc = dot(ta, tb, acc);
    }
    let c_mask = (expand_dims(rm, 1) < m) & (expand_dims(rn, 0) < n);
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, c_mask);
}

fn main() {
    let (m, n, k) = (40usize, 24usize, 40usize);
    let av: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let bv: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 13) as f32 - 6.0).collect();
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|p| av[i * k + p] * bv[p * n + j]).sum();
        }
    }
    let dev = Device::cpu();
    let a = dev.from_slice(&av).unwrap();
    let b = dev.from_slice(&bv).unwrap();
    let mut c = dev.full(m * n, f32::NAN).unwrap();
    let grid = ((m as u32).div_ceil(16), (n as u32).div_ceil(16));
    matmul::launch(&dev, grid, &a, &b, &mut c, m as i32, n as i32, k as i32, 16, 16, 16).unwrap();
    // Small integers: every product and partial sum is exact in f32.
    assert_eq!(c.to_vec().unwrap(), want);
}
