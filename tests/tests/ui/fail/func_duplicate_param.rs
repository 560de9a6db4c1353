use ferrotile::prelude::*;

#[func]
fn add(x: Tile, x: Tile) -> Tile {
    x + x
}

fn main() {}
