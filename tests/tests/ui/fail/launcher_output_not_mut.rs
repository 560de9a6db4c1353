use ferrotile::prelude::*;

#[kernel]
fn copy<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(y + offs, load(x + offs, offs < n, 0.0), offs < n);
}

fn main() {
    let dev = Device::cpu();
    let x = dev.from_slice(&[1.0f32; 4]).unwrap();
    let y = dev.zeros::<f32>(4).unwrap();
    copy::launch(&dev, 1, &x, &y, 4, 16).unwrap();
}
