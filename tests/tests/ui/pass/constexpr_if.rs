// A constexpr `bool` selects code at specialization time.
use ferrotile::prelude::*;

#[kernel]
fn bias_act<const BLOCK: i32, const RELU: bool>(x: Ptr<f32>, y: Ptr<f32>, bias: f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let mut v = load(x + offs, mask, 0.0) + bias;
    if RELU {
        v = maximum(v, 0.0);
    }
    store(y + offs, v, mask);
}

fn main() {
    let dev = Device::cpu();
    let xs: Vec<f32> = (0..37).map(|i| i as f32 - 20.0).collect();
    let x = dev.from_slice(&xs).unwrap();

    let mut y = dev.full(xs.len(), f32::NAN).unwrap();
    bias_act::launch(&dev, 3, &x, &mut y, 1.5, xs.len() as i32, 16, true).unwrap();
    let want: Vec<f32> = xs.iter().map(|v| (v + 1.5).max(0.0)).collect();
    assert_eq!(y.to_vec().unwrap(), want);

    let mut y = dev.full(xs.len(), f32::NAN).unwrap();
    bias_act::launch(&dev, 3, &x, &mut y, 1.5, xs.len() as i32, 16, false).unwrap();
    let want: Vec<f32> = xs.iter().map(|v| v + 1.5).collect();
    assert_eq!(y.to_vec().unwrap(), want);
}
