// The spellings the compile-time trap errors point to, computing what was
// meant: ReLU as `maximum`, reductions with `axis = N`, masked loads with
// the reduction's identity as `other`, and a row statistic broadcast back
// with `expand_dims`.
use ferrotile::prelude::*;

#[kernel]
fn spelled_out<const B: i32>(x: Ptr<f32>, relu: Ptr<f32>, rmax: Ptr<f32>, centered: Ptr<f32>, n: i32) {
    let r = arange(0, B);
    let c = arange(0, B);
    let mask = (expand_dims(r, 1) < n) & (expand_dims(c, 0) < n);
    let offs = expand_dims(r, 1) * n + expand_dims(c, 0);
    let t = load(x + offs, mask, f32::NEG_INFINITY);
    store(relu + offs, maximum(t, 0.0), mask);
    store(rmax + r, max(t, axis = 1), r < n);
    let mean = sum(select(mask, t, 0.0), axis = 1) / (n as f32);
    store(centered + offs, t - expand_dims(mean, 1), mask);
}

fn main() {
    let n = 5usize;
    let xs: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 11) as f32 - 6.0).collect();
    let dev = Device::cpu();
    let x = dev.from_slice(&xs).unwrap();
    let mut relu = dev.full(n * n, f32::NAN).unwrap();
    let mut rmax = dev.full(n, f32::NAN).unwrap();
    let mut centered = dev.full(n * n, f32::NAN).unwrap();
    spelled_out::launch(&dev, 1, &x, &mut relu, &mut rmax, &mut centered, n as i32, 8).unwrap();
    let (a, m, c) = (relu.to_vec().unwrap(), rmax.to_vec().unwrap(), centered.to_vec().unwrap());
    for i in 0..n {
        let row = &xs[i * n..(i + 1) * n];
        let mean = row.iter().sum::<f32>() / n as f32;
        assert_eq!(m[i], row.iter().cloned().fold(f32::NEG_INFINITY, f32::max));
        for j in 0..n {
            assert_eq!(a[i * n + j], row[j].max(0.0));
            assert_eq!(c[i * n + j], row[j] - mean);
        }
    }
}
