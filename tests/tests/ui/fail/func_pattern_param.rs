use ferrotile::prelude::*;

#[func]
fn first((a, b): Tile) -> Tile {
    a + b
}

fn main() {}
