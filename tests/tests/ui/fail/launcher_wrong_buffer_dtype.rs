use ferrotile::prelude::*;

#[kernel]
fn copy<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(y + offs, load(x + offs, offs < n, 0.0), offs < n);
}

fn main() {
    let dev = Device::cpu();
    let x = dev.from_slice(&[f16::from_f32(1.0); 4]).unwrap();
    let mut y = dev.zeros::<f32>(4).unwrap();
    copy::launch(&dev, 1, &x, &mut y, 4, 16).unwrap();
}
