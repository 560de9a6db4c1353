use ferrotile::prelude::*;

#[func]
fn first_block<const B: i32>(x: Tile) -> Tile {
    x + arange(0, B)
}

fn main() {}
