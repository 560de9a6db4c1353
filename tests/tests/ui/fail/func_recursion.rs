use ferrotile::prelude::*;

#[func]
fn halve(x: Tile) -> Tile {
    halve(x * 0.5)
}

fn main() {}
