use ferrotile::prelude::*;

#[func]
fn twice<U: Float>(x: Tile) -> Tile
where
    U: Float,
{
    x + x
}

fn main() {}
