use ferrotile::prelude::*;

#[func]
fn scale(x: Tile, s: f32) -> Tile {
    x * s
}

fn main() {}
