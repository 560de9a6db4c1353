use ferrotile::prelude::*;

#[func]
fn exp(x: Tile) -> Tile {
    exp2(x * 1.4426950408889634)
}

fn main() {}
