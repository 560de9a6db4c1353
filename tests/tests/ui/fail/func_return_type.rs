use ferrotile::prelude::*;

#[func]
fn norm(x: Tile) -> f32 {
    sum(x * x, axis = 0)
}

fn main() {}
