use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, mode: i32) {
    let v = load(x);
    let r = match mode {
        0 => v,
        _ => -v,
    };
    store(x, r);
}

fn main() {}
