use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<bf16>, y: Ptr<bf16>) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs) as f32;
    let e = exp(v);
    store(y + offs, e);
}

fn main() {}
