// 2-D tiles with broadcasting, reductions along an axis and a masked tail.
use ferrotile::prelude::*;

#[kernel]
fn row_stats<const BR: i32, const BC: i32>(x: Ptr<f32>, sums: Ptr<f32>, maxes: Ptr<f32>, rows: i32, cols: i32) {
    let r = program_id(0) * BR + arange(0, BR);
    let c = arange(0, BC);
    let mask = (expand_dims(r, 1) < rows) & (expand_dims(c, 0) < cols);
    let t = load(x + expand_dims(r, 1) * cols + expand_dims(c, 0), mask, f32::NEG_INFINITY);
    let s = sum(select(mask, t, 0.0), 1);
    let m = t.max(axis = 1);
    store(sums + r, s, r < rows);
    store(maxes + r, m, r < rows);
}

fn main() {
    let (rows, cols) = (10usize, 5usize);
    let xs: Vec<f32> = (0..rows * cols).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
    let dev = Device::cpu();
    let x = dev.from_slice(&xs).unwrap();
    let mut sums = dev.full(rows, f32::NAN).unwrap();
    let mut maxes = dev.full(rows, f32::NAN).unwrap();
    row_stats::launch(&dev, 3, &x, &mut sums, &mut maxes, rows as i32, cols as i32, 4, 8).unwrap();
    let (s, m) = (sums.to_vec().unwrap(), maxes.to_vec().unwrap());
    for r in 0..rows {
        let row = &xs[r * cols..(r + 1) * cols];
        assert_eq!(s[r], row.iter().sum::<f32>());
        assert_eq!(m[r], row.iter().cloned().fold(f32::NEG_INFINITY, f32::max));
    }
}
