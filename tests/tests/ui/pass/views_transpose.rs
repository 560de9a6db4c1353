// Block views: bounds-checked 2-D loads and stores, here a tiled transpose.
use ferrotile::prelude::*;

#[kernel]
fn transpose<const B: i32>(x: Ptr<f32>, y: Ptr<f32>, rows: i32, cols: i32) {
    let vx = view(x, [rows, cols], [cols, 1]);
    let vy = view(y, [cols, rows], [rows, 1]);
    let r0 = program_id(0) * B;
    let c0 = program_id(1) * B;
    let t = load_block(vx, [r0, c0], [B, B]);
    store_block(vy, [c0, r0], trans(t));
}

fn main() {
    let (rows, cols) = (20usize, 12usize);
    let xs: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let dev = Device::cpu();
    let x = dev.from_slice(&xs).unwrap();
    let mut y = dev.full(rows * cols, f32::NAN).unwrap();
    let grid = ((rows as u32).div_ceil(8), (cols as u32).div_ceil(8));
    transpose::launch(&dev, grid, &x, &mut y, rows as i32, cols as i32, 8).unwrap();
    let got = y.to_vec().unwrap();
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(got[c * rows + r], xs[r * cols + c], "at ({r}, {c})");
        }
    }
}
