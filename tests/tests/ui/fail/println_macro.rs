use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs);
    println!("{:?}", v);
}

fn main() {}
