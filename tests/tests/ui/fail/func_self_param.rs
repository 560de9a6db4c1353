use ferrotile::prelude::*;

struct Tiles;

impl Tiles {
    #[func]
    fn twice(self, x: Tile) -> Tile {
        x + x
    }
}

fn main() {}
