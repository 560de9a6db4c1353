use ferrotile::prelude::*;

#[func]
fn ping(x: Tile) -> Tile {
    pong(x - 1.0)
}

#[func]
fn pong(x: Tile) -> Tile {
    ping(x * 0.5)
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    store(y + arange(0, 64), ping(v));
}

fn main() {}
