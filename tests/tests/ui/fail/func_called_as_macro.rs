use ferrotile::prelude::*;

#[func]
fn double(x: Tile) -> Tile {
    x * 2.0
}

fn main() {
    let _ = double!(1.0);
}
