use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<bf16>, y: Ptr<i32>) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs);
    store(y + offs, bitcast(v, i32));
}

fn main() {}
