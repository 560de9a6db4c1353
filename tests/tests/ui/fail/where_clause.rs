use ferrotile::prelude::*;

#[kernel]
fn k<T, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>)
where
    T: Float,
{
    let offs = arange(0, BLOCK);
    store(y + offs, load(x + offs));
}

fn main() {}
