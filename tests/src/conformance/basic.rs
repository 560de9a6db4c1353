//! Grid queries, tile constructors, masked memory access, shape ops, views
//! and atomics.

use super::util::*;
use ferrotile::prelude::*;

// ------------------------------------------------------------ grid ids

/// Every program writes its coordinates and the grid size at its linear index.
#[kernel]
pub fn k_grid_ids(ids: Ptr<i32>, nums: Ptr<i32>) {
    let x = program_id(0);
    let y = program_id(1);
    let z = program_id(2);
    let lin = (z * num_programs(1) + y) * num_programs(0) + x;
    store(ids + lin, x + 1000 * y + 1000000 * z);
    let i = arange(0, 4);
    let v = select(i == 0, num_programs(0), select(i == 1, num_programs(1), select(i == 2, num_programs(2), -1)));
    store(nums + lin * 4 + i, v);
}

pub fn grid_ids(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let mut grids = vec![[7u32, 1, 1], [3, 5, 1], [2, 3, 4], [1, 1, 6], [1, 9, 1]];
    grids.push([1 + rng.below(5) as u32, 1 + rng.below(5) as u32, 1 + rng.below(5) as u32]);
    for g in grids {
        let c = Ctx::new("grid_ids", seed, format!("grid {g:?}"));
        let total = (g[0] * g[1] * g[2]) as usize;
        let mut ids = poisoned::<i32>(dev, total + PAD)?;
        let mut nums = poisoned::<i32>(dev, total * 4 + PAD)?;
        c.launch(k_grid_ids::launch(dev, g, &mut ids, &mut nums))?;
        let mut want_ids = vec![];
        let mut want_nums = vec![];
        for z in 0..g[2] {
            for y in 0..g[1] {
                for x in 0..g[0] {
                    want_ids.push((x + 1000 * y + 1000000 * z) as i32);
                    want_nums.extend([g[0] as i32, g[1] as i32, g[2] as i32, -1]);
                }
            }
        }
        check_eq(&c, "ids", &download(&ids)?, &want_ids, &no_inputs)?;
        check_eq(&c, "nums", &download(&nums)?, &want_nums, &no_inputs)?;
    }
    Ok(())
}

// ------------------------------------------------- arange, zeros, full

/// arange with a constexpr start, zeros/full/zeros_like of a dtype parameter,
/// and a 2-D `full` reduced back to 1-D.
#[kernel]
pub fn k_constructors<T: Float, const B: i32, const S: i32>(x: Ptr<T>, ar: Ptr<i32>, zs: Ptr<T>, fl: Ptr<T>, zl: Ptr<T>, f2: Ptr<f32>, v: T, n: i32) {
    let pid = program_id(0);
    let offs = pid * B + arange(0, B);
    let m = offs < n;
    store(ar + offs, arange(S, S + B) + pid * B, m);
    store(zs + offs, zeros([B], T), m);
    store(fl + offs, full([B], v, T), m);
    let xt = load(x + offs, m, 1.0);
    store(zl + offs, zeros_like(xt), m);
    let two = full([B, 2], 1.5, f32);
    store(f2 + offs, sum(two, 1) + (v as f32), m);
}

fn constructors_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let s = rng.int(-50, 50) as i32;
        let v: T = rand_float(&mut rng, false);
        let c = Ctx::new("constructors", seed, format!("{} n={n} B={b} S={s} v={v:?}", T::NAME));
        let xs: Vec<T> = (0..n).map(|_| rand_float(&mut rng, true)).collect();
        let x = upload(dev, &xs)?;
        let mut ar = poisoned::<i32>(dev, n + PAD)?;
        let mut zs = poisoned::<T>(dev, n + PAD)?;
        let mut fl = poisoned::<T>(dev, n + PAD)?;
        let mut zl = poisoned::<T>(dev, n + PAD)?;
        let mut f2 = poisoned::<f32>(dev, n + PAD)?;
        let grid = cdiv(n, b as usize) as u32;
        c.launch(k_constructors::launch(dev, grid, &x, &mut ar, &mut zs, &mut fl, &mut zl, &mut f2, v, n as i32, b, s))?;
        let want_ar: Vec<i32> = (0..n as i32).map(|i| s + i).collect();
        check_eq(&c, "arange", &download(&ar)?, &want_ar, &no_inputs)?;
        check_float_exact(&c, "zeros", &download(&zs)?, &vec![0.0; n], &no_inputs)?;
        check_float_exact(&c, "full", &download(&fl)?, &vec![v.to_f64(); n], &no_inputs)?;
        check_float_exact(&c, "zeros_like", &download(&zl)?, &vec![0.0; n], &no_inputs)?;
        let w2 = (3.0f32 + v.to_f64() as f32) as f64;
        check_float_exact(&c, "sum(full([B,2],1.5))+v", &download(&f2)?, &vec![w2; n], &no_inputs)?;
    }
    Ok(())
}

pub fn constructors(dev: &Device, seed: u64) -> R {
    constructors_t::<f32>(dev, seed)?;
    constructors_t::<f16>(dev, seed ^ 1)?;
    constructors_t::<bf16>(dev, seed ^ 2)
}

macro_rules! int_constructors {
    ($k:ident, $t:ident) => {
        /// zeros/full of an integer dtype from a run-time scalar and a literal.
        #[kernel]
        pub fn $k<const B: i32>(zs: Ptr<$t>, fl: Ptr<$t>, fl7: Ptr<$t>, v: $t, n: i32) {
            let offs = program_id(0) * B + arange(0, B);
            let m = offs < n;
            store(zs + offs, zeros([B], $t), m);
            store(fl + offs, full([B], v, $t), m);
            store(fl7 + offs, full([B], 7, $t), m);
        }
    };
}
int_constructors!(k_ctor_i8, i8);
int_constructors!(k_ctor_u8, u8);
int_constructors!(k_ctor_i32, i32);
int_constructors!(k_ctor_u32, u32);
int_constructors!(k_ctor_i64, i64);

macro_rules! int_ctor_case {
    ($f:ident, $k:ident, $t:ident) => {
        fn $f(dev: &Device, seed: u64) -> R {
            let mut rng = Rng::new(seed);
            for &(n, b) in SIZES_1D {
                let v: $t = rand_int(&mut rng);
                let c = Ctx::new("constructors_int", seed, format!("{} n={n} B={b} v={v}", stringify!($t)));
                let mut zs = poisoned::<$t>(dev, n + PAD)?;
                let mut fl = poisoned::<$t>(dev, n + PAD)?;
                let mut fl7 = poisoned::<$t>(dev, n + PAD)?;
                c.launch($k::launch(dev, cdiv(n, b as usize) as u32, &mut zs, &mut fl, &mut fl7, v, n as i32, b))?;
                check_eq(&c, "zeros", &download(&zs)?, &vec![0 as $t; n], &no_inputs)?;
                check_eq(&c, "full(v)", &download(&fl)?, &vec![v; n], &no_inputs)?;
                check_eq(&c, "full(7)", &download(&fl7)?, &vec![7 as $t; n], &no_inputs)?;
            }
            Ok(())
        }
    };
}
int_ctor_case!(ctor_i8, k_ctor_i8, i8);
int_ctor_case!(ctor_u8, k_ctor_u8, u8);
int_ctor_case!(ctor_i32, k_ctor_i32, i32);
int_ctor_case!(ctor_u32, k_ctor_u32, u32);
int_ctor_case!(ctor_i64, k_ctor_i64, i64);

pub fn constructors_int(dev: &Device, seed: u64) -> R {
    ctor_i8(dev, seed)?;
    ctor_u8(dev, seed ^ 1)?;
    ctor_i32(dev, seed ^ 2)?;
    ctor_u32(dev, seed ^ 3)?;
    ctor_i64(dev, seed ^ 4)
}

// ------------------------------------------- load/store, mask and other

/// `x` has exactly `n` elements: any masked-off lane that were read would be
/// an out-of-bounds error. The loaded tile is stored `extra` lanes past `n`
/// (inside the output's pad) so `other` becomes visible there.
#[kernel]
pub fn k_masked<T: Float, const B: i32>(x: Ptr<T>, o_other: Ptr<T>, o_zero: Ptr<T>, o_lit: Ptr<T>, other: T, n: i32, extra: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let wide = offs < n + extra;
    store(o_other + offs, load(x + offs, m, other), wide);
    store(o_zero + offs, load(x + offs, m), wide);
    store(o_lit + offs, load(x + offs, m, -7.5), wide);
}

fn masked_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let extra = rng.int(0, PAD as i64 - 1) as usize;
        let other: T = rand_float(&mut rng, false);
        let c = Ctx::new("load_store_masked", seed, format!("{} n={n} B={b} extra={extra} other={other:?}", T::NAME));
        let xs: Vec<T> = (0..n).map(|_| rand_float(&mut rng, true)).collect();
        let x = upload(dev, &xs)?;
        let mut oo = poisoned::<T>(dev, n + PAD)?;
        let mut oz = poisoned::<T>(dev, n + PAD)?;
        let mut ol = poisoned::<T>(dev, n + PAD)?;
        // Lanes past n + extra that are still inside the grid are masked off.
        let grid = cdiv(n + extra, b as usize) as u32;
        c.launch(k_masked::launch(dev, grid, &x, &mut oo, &mut oz, &mut ol, other, n as i32, extra as i32, b))?;
        let tail = |fill: f64| -> Vec<f64> {
            let mut w: Vec<f64> = xs.iter().map(|v| v.to_f64()).collect();
            w.extend(std::iter::repeat_n(fill, extra));
            w
        };
        let inp = |i: usize| if i < n { format!("x[{i}]={:?}", xs[i]) } else { "masked lane".into() };
        check_float_exact(&c, "load(x, m, other)", &download(&oo)?, &tail(other.to_f64()), &inp)?;
        check_float_exact(&c, "load(x, m)", &download(&oz)?, &tail(0.0), &inp)?;
        check_float_exact(&c, "load(x, m, -7.5)", &download(&ol)?, &tail(-7.5), &inp)?;
    }
    Ok(())
}

macro_rules! int_masked {
    ($k:ident, $f:ident, $t:ident) => {
        #[kernel]
        pub fn $k<const B: i32>(x: Ptr<$t>, o_other: Ptr<$t>, o_zero: Ptr<$t>, other: $t, n: i32, extra: i32) {
            let offs = program_id(0) * B + arange(0, B);
            let m = offs < n;
            let wide = offs < n + extra;
            store(o_other + offs, load(x + offs, m, other), wide);
            store(o_zero + offs, load(x + offs, m), wide);
        }
        fn $f(dev: &Device, seed: u64) -> R {
            let mut rng = Rng::new(seed);
            for &(n, b) in SIZES_1D {
                let extra = rng.int(0, PAD as i64 - 1) as usize;
                let other: $t = rand_int(&mut rng);
                let c = Ctx::new("load_store_masked", seed, format!("{} n={n} B={b} extra={extra} other={other}", stringify!($t)));
                let xs: Vec<$t> = (0..n).map(|_| rand_int(&mut rng)).collect();
                let x = upload(dev, &xs)?;
                let mut oo = poisoned::<$t>(dev, n + PAD)?;
                let mut oz = poisoned::<$t>(dev, n + PAD)?;
                let grid = cdiv(n + extra, b as usize) as u32;
                c.launch($k::launch(dev, grid, &x, &mut oo, &mut oz, other, n as i32, extra as i32, b))?;
                let mut w1 = xs.clone();
                w1.extend(std::iter::repeat_n(other, extra));
                let mut w0 = xs.clone();
                w0.extend(std::iter::repeat_n(0 as $t, extra));
                check_eq(&c, "load(x, m, other)", &download(&oo)?, &w1, &no_inputs)?;
                check_eq(&c, "load(x, m)", &download(&oz)?, &w0, &no_inputs)?;
            }
            Ok(())
        }
    };
}
int_masked!(k_masked_i8, masked_i8, i8);
int_masked!(k_masked_u8, masked_u8, u8);
int_masked!(k_masked_i32, masked_i32, i32);
int_masked!(k_masked_u32, masked_u32, u32);
int_masked!(k_masked_i64, masked_i64, i64);

pub fn load_store_masked(dev: &Device, seed: u64) -> R {
    masked_t::<f32>(dev, seed)?;
    masked_t::<f16>(dev, seed ^ 1)?;
    masked_t::<bf16>(dev, seed ^ 2)?;
    masked_i8(dev, seed ^ 3)?;
    masked_u8(dev, seed ^ 4)?;
    masked_i32(dev, seed ^ 5)?;
    masked_u32(dev, seed ^ 6)?;
    masked_i64(dev, seed ^ 7)
}

// ------------------------------------------------------------ shape ops

/// One [BM, BN] tile of an m×n i32 matrix per program. Checks implicit
/// broadcasting (column vector ⊕ row vector), expand_dims, broadcast_to,
/// trans and reshape (all stores below are exact copies or integer sums).
#[kernel]
pub fn k_shape_ops<const BM: i32, const BN: i32>(
    x: Ptr<i32>,
    colv: Ptr<i32>,
    rowv: Ptr<i32>,
    o_t: Ptr<i32>,
    o_b: Ptr<i32>,
    o_bt: Ptr<i32>,
    o_r: Ptr<i32>,
    o_r1: Ptr<i32>,
    m: i32,
    n: i32,
) {
    let pm = program_id(0);
    let pn = program_id(1);
    let rm = pm * BM + arange(0, BM);
    let rn = pn * BN + arange(0, BN);
    let mask = expand_dims(rm < m, 1) & expand_dims(rn < n, 0);
    let offs = expand_dims(rm, 1) * n + rn.expand_dims(0);
    let t = load(x + offs, mask);
    // transpose: x^T is n×m
    let offs_t = expand_dims(rn, 1) * m + expand_dims(rm, 0);
    store(o_t + offs_t, trans(t), trans(mask));
    // column vector + row vector -> [BM, BN]
    let cv = load(colv + rm, rm < m);
    let rv = load(rowv + rn, rn < n);
    let outer = expand_dims(cv, 1) * 1000 + expand_dims(rv, 0);
    store(o_b + offs, outer + t, mask);
    // broadcast_to of a row, of a column and of a scalar
    let brow = broadcast_to(expand_dims(rv, 0), [BM, BN]);
    let bcol = broadcast_to(cv.expand_dims(1), [BM, BN]);
    let bsc = broadcast_to(pm * 7 + pn, [BM, BN]);
    store(o_bt + offs, brow * 3 - bcol + bsc, mask);
    // reshape: row-major reinterpretation, stored per program as a flat block
    let blk = (pn * num_programs(0) + pm) * (BM * BN);
    let r = reshape(t, [BN, BM]);
    let roffs = blk + expand_dims(arange(0, BN), 1) * BM + expand_dims(arange(0, BM), 0);
    store(o_r + roffs, r);
    let r1 = t.reshape([BM * BN]);
    store(o_r1 + blk + arange(0, BM * BN), r1 * 2);
}

pub fn shape_ops(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let shapes: &[(usize, usize, i32, i32)] = &[(1, 1, 16, 16), (7, 5, 16, 32), (33, 70, 32, 16), (100, 3, 64, 4), (64, 64, 32, 32), (5, 129, 2, 64)];
    for &(m, n, bm, bn) in shapes {
        let c = Ctx::new("shape_ops", seed, format!("i32 {m}x{n} BM={bm} BN={bn}"));
        let xs: Vec<i32> = (0..m * n).map(|_| rng.int(-100000, 100000) as i32).collect();
        let cvs: Vec<i32> = (0..m).map(|_| rng.int(-1000, 1000) as i32).collect();
        let rvs: Vec<i32> = (0..n).map(|_| rng.int(-1000, 1000) as i32).collect();
        let (x, cv, rv) = (upload(dev, &xs)?, upload(dev, &cvs)?, upload(dev, &rvs)?);
        let (gm, gn) = (cdiv(m, bm as usize), cdiv(n, bn as usize));
        let blk = (bm * bn) as usize;
        let mut o_t = poisoned::<i32>(dev, m * n + PAD)?;
        let mut o_b = poisoned::<i32>(dev, m * n + PAD)?;
        let mut o_bt = poisoned::<i32>(dev, m * n + PAD)?;
        let mut o_r = poisoned::<i32>(dev, gm * gn * blk + PAD)?;
        let mut o_r1 = poisoned::<i32>(dev, gm * gn * blk + PAD)?;
        c.launch(k_shape_ops::launch(
            dev,
            (gm as u32, gn as u32),
            &x,
            &cv,
            &rv,
            &mut o_t,
            &mut o_b,
            &mut o_bt,
            &mut o_r,
            &mut o_r1,
            m as i32,
            n as i32,
            bm,
            bn,
        ))?;
        let mut w_t = vec![0; m * n];
        let mut w_b = vec![0; m * n];
        let mut w_bt = vec![0; m * n];
        for i in 0..m {
            for j in 0..n {
                w_t[j * m + i] = xs[i * n + j];
                w_b[i * n + j] = cvs[i] * 1000 + rvs[j] + xs[i * n + j];
                let (pm, pn) = ((i / bm as usize) as i32, (j / bn as usize) as i32);
                w_bt[i * n + j] = rvs[j] * 3 - cvs[i] + pm * 7 + pn;
            }
        }
        let mut w_r = vec![0; gm * gn * blk];
        for pm in 0..gm {
            for pn in 0..gn {
                let base = (pn * gm + pm) * blk;
                for a in 0..bm as usize {
                    for b in 0..bn as usize {
                        let (i, j) = (pm * bm as usize + a, pn * bn as usize + b);
                        let v = if i < m && j < n { xs[i * n + j] } else { 0 };
                        w_r[base + a * bn as usize + b] = v;
                    }
                }
            }
        }
        let w_r1: Vec<i32> = w_r.iter().map(|v| v * 2).collect();
        let at = |i: usize| format!("row {}, col {}", i / n.max(1), i % n.max(1));
        check_eq(&c, "trans", &download(&o_t)?, &w_t, &|i| format!("x^T row {}, col {}", i / m, i % m))?;
        check_eq(&c, "col+row broadcast", &download(&o_b)?, &w_b, &at)?;
        check_eq(&c, "broadcast_to", &download(&o_bt)?, &w_bt, &at)?;
        check_eq(&c, "reshape [BN,BM]", &download(&o_r)?, &w_r, &|i| format!("block {}, flat {}", i / blk, i % blk))?;
        check_eq(&c, "reshape [BM*BN]", &download(&o_r1)?, &w_r1, &|i| format!("block {}, flat {}", i / blk, i % blk))?;
    }
    Ok(())
}

/// A [A, B, C] tile of a p×q×r array, permuted by [2, 0, 1] and stored as
/// the r×p×q array `y[k][i][j] = x[i][j][k]`; also reshaped to [A*B, C].
#[kernel]
pub fn k_trans3d<T: Float, const A: i32, const B: i32, const C: i32>(x: Ptr<T>, y: Ptr<T>, z: Ptr<T>, p: i32, q: i32, r: i32) {
    let i = expand_dims(expand_dims(arange(0, A), 1), 2);
    let j = expand_dims(expand_dims(arange(0, B), 0), 2);
    let k = expand_dims(expand_dims(arange(0, C), 0), 1);
    let mask = (i < p) & (j < q) & (k < r);
    let t = load(x + (i * q + j) * r + k, mask);
    let tt = trans(t, [2, 0, 1]);
    let ti = trans(i, [2, 0, 1]);
    let tj = trans(j, [2, 0, 1]);
    let tk = trans(k, [2, 0, 1]);
    store(y + (tk * p + ti) * q + tj, tt, trans(mask, [2, 0, 1]));
    // [A, B, C] -> [A*B, C]: row (i*B + j), column k
    let t2 = reshape(t, [A * B, C]);
    let rows = expand_dims(arange(0, A * B), 1);
    let cols = expand_dims(arange(0, C), 0);
    store(z + rows * C + cols, t2);
}

fn trans3d_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(p, q, r, a, b, cc) in &[(1usize, 1usize, 1usize, 1i32, 1i32, 1i32), (3, 5, 7, 4, 8, 8), (4, 4, 4, 4, 4, 4), (2, 9, 3, 2, 16, 4), (5, 1, 6, 8, 2, 8)] {
        let c = Ctx::new("trans3d", seed, format!("{} {p}x{q}x{r} tile [{a},{b},{cc}]", T::NAME));
        let xs: Vec<T> = (0..p * q * r).map(|_| rand_float(&mut rng, true)).collect();
        let x = upload(dev, &xs)?;
        let mut y = poisoned::<T>(dev, p * q * r + PAD)?;
        let blk = (a * b * cc) as usize;
        let mut z = poisoned::<T>(dev, blk + PAD)?;
        c.launch(k_trans3d::launch(dev, 1, &x, &mut y, &mut z, p as i32, q as i32, r as i32, a, b, cc))?;
        let mut wy = vec![0.0; p * q * r];
        for i in 0..p {
            for j in 0..q {
                for k in 0..r {
                    wy[(k * p + i) * q + j] = xs[(i * q + j) * r + k].to_f64();
                }
            }
        }
        check_float_exact(&c, "trans [2,0,1]", &download(&y)?, &wy, &no_inputs)?;
        let (a, b, cc) = (a as usize, b as usize, cc as usize);
        let mut wz = vec![0.0; blk];
        for i in 0..a {
            for j in 0..b {
                for k in 0..cc {
                    if i < p && j < q && k < r {
                        wz[(i * b + j) * cc + k] = xs[(i * q + j) * r + k].to_f64();
                    }
                }
            }
        }
        check_float_exact(&c, "reshape [A*B, C]", &download(&z)?, &wz, &no_inputs)?;
    }
    Ok(())
}

pub fn trans3d(dev: &Device, seed: u64) -> R {
    trans3d_t::<f32>(dev, seed)?;
    trans3d_t::<f16>(dev, seed ^ 1)?;
    trans3d_t::<bf16>(dev, seed ^ 2)
}

// ---------------------------------------------------------------- views

/// Block views: `y = 2x + 1` block-wise through views of strided matrices;
/// every loaded block is also dumped whole (out-of-bounds parts must read 0),
/// and a transposed view (strides [1, ldx]) is read the same way. `shift`
/// moves the load window up-left (negative offsets are out of bounds too).
#[kernel]
pub fn k_views<T: Float, const BM: i32, const BN: i32>(x: Ptr<T>, y: Ptr<T>, dump: Ptr<T>, dump_t: Ptr<T>, m: i32, n: i32, ldx: i32, ldy: i32, shift: i32) {
    let vx = view(x, [m, n], [ldx, 1]);
    let vy = view(y, [m, n], [ldy as i64, 1]);
    let pm = program_id(0) * BM;
    let pn = program_id(1) * BN;
    let t = load_block(vx, [pm, pn], [BM, BN]);
    store_block(vy, [pm, pn], t * 2.0 + 1.0);
    let blk = (program_id(1) * num_programs(0) + program_id(0)) * (BM * BN);
    let lofs = expand_dims(arange(0, BM), 1) * BN + expand_dims(arange(0, BN), 0);
    let s = load_block(vx, [pm - shift, pn - shift], [BM, BN]);
    store(dump + blk + lofs, s);
    let vt = view(x, [n, m], [1, ldx]);
    let tt = load_block(vt, [pn - shift, pm - shift], [BN, BM]);
    let tofs = expand_dims(arange(0, BN), 1) * BM + expand_dims(arange(0, BM), 0);
    store(dump_t + blk + tofs, tt);
}

fn views_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, bm, bn) in &[(1usize, 1usize, 16i32, 16i32), (7, 5, 4, 4), (33, 70, 16, 32), (64, 64, 32, 32), (100, 17, 64, 8)] {
        let ldx = n + rng.below(4) as usize;
        let ldy = n + 1 + rng.below(4) as usize;
        let shift = rng.int(0, 3) as i32;
        let c = Ctx::new("views", seed, format!("{} {m}x{n} ldx={ldx} ldy={ldy} BM={bm} BN={bn} shift={shift}", T::NAME));
        let xs: Vec<T> = (0..m * ldx).map(|_| rand_float(&mut rng, false)).collect();
        let x = upload(dev, &xs)?;
        let ylen = (m - 1) * ldy + n;
        let mut y = poisoned::<T>(dev, ylen + PAD)?;
        let (gm, gn) = (cdiv(m, bm as usize), cdiv(n, bn as usize));
        let blk = (bm * bn) as usize;
        let mut dump = poisoned::<T>(dev, gm * gn * blk + PAD)?;
        let mut dump_t = poisoned::<T>(dev, gm * gn * blk + PAD)?;
        c.launch(k_views::launch(dev, (gm as u32, gn as u32), &x, &mut y, &mut dump, &mut dump_t, m as i32, n as i32, ldx as i32, ldy as i32, shift, bm, bn))?;
        // y: rows of n written, the ldy-n gap elements keep the sentinel
        let got_y = download(&y)?;
        for i in 0..ylen {
            let (r, col) = (i / ldy, i % ldy);
            let g = got_y[i];
            if col >= n {
                if !g.is_sentinel() {
                    return Err(c.err(format!("store_block wrote {g:?} at row {r}, column {col} of y, outside the view (n={n})")));
                }
                continue;
            }
            let xv = xs[r * ldx + col];
            let w = T::round(T::round(xv.to_f64() * 2.0).to_f64() + 1.0);
            if !same_float(g.to_f64(), w.to_f64()) {
                return Err(c.err(format!("y[{r}][{col}] = {g:?}, want {w:?} (2*x+1, x={xv:?})")));
            }
        }
        check_pad(&c, "y", &got_y, ylen)?;
        let mut wd = vec![0.0; gm * gn * blk];
        let mut wdt = vec![0.0; gm * gn * blk];
        let xat = |i: i64, j: i64| -> f64 {
            if i >= 0 && j >= 0 && (i as usize) < m && (j as usize) < n {
                xs[i as usize * ldx + j as usize].to_f64()
            } else {
                0.0
            }
        };
        for pm in 0..gm {
            for pn in 0..gn {
                let base = (pn * gm + pm) * blk;
                for a in 0..bm as usize {
                    for b in 0..bn as usize {
                        let i = (pm * bm as usize + a) as i64 - shift as i64;
                        let j = (pn * bn as usize + b) as i64 - shift as i64;
                        wd[base + a * bn as usize + b] = xat(i, j);
                    }
                }
                for b in 0..bn as usize {
                    for a in 0..bm as usize {
                        let j = (pn * bn as usize + b) as i64 - shift as i64;
                        let i = (pm * bm as usize + a) as i64 - shift as i64;
                        wdt[base + b * bm as usize + a] = xat(i, j);
                    }
                }
            }
        }
        check_float_exact(&c, "load_block dump", &download(&dump)?, &wd, &|i| format!("block {}, flat {}", i / blk, i % blk))?;
        check_float_exact(&c, "transposed-view load_block dump", &download(&dump_t)?, &wdt, &|i| format!("block {}, flat {}", i / blk, i % blk))?;
    }
    Ok(())
}

pub fn views(dev: &Device, seed: u64) -> R {
    views_t::<f32>(dev, seed)?;
    views_t::<f16>(dev, seed ^ 1)?;
    views_t::<bf16>(dev, seed ^ 2)
}

/// A 1-D view with stride 2 (every other element) and a 3-D view.
#[kernel]
pub fn k_views_1d3d<const B: i32>(x: Ptr<i32>, y: Ptr<i32>, z: Ptr<i32>, n: i32, d0: i32, d1: i32, d2: i32) {
    let v1 = view(x, [n], [2]);
    let t = load_block(v1, [program_id(0) * B], [B]);
    let vy = view(y, [n], [1]);
    store_block(vy, [program_id(0) * B], t + 1);
    let v3 = view(x, [d0, d1, d2], [d1 * d2, d2, 1]);
    let t3 = load_block(v3, [0, 0, 0], [4, 4, 8]);
    let vz = view(z, [d2, d0, d1], [d0 * d1, d1, 1]);
    store_block(vz, [0, 0, 0], trans(t3, [2, 0, 1]));
}

pub fn views_1d3d(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b, d0, d1, d2) in &[(1usize, 16i32, 1usize, 1usize, 1usize), (50, 16, 3, 4, 5), (200, 64, 4, 4, 8), (33, 32, 2, 3, 8)] {
        let c = Ctx::new("views_1d_3d", seed, format!("i32 n={n} B={b} 3-D {d0}x{d1}x{d2}"));
        let xs: Vec<i32> = (0..(2 * n).max(d0 * d1 * d2)).map(|_| rng.int(-1 << 30, 1 << 30) as i32).collect();
        let x = upload(dev, &xs)?;
        let mut y = poisoned::<i32>(dev, n + PAD)?;
        let mut z = poisoned::<i32>(dev, d0 * d1 * d2 + PAD)?;
        c.launch(k_views_1d3d::launch(dev, cdiv(n, b as usize) as u32, &x, &mut y, &mut z, n as i32, d0 as i32, d1 as i32, d2 as i32, b))?;
        let wy: Vec<i32> = (0..n).map(|i| xs[2 * i] + 1).collect();
        check_eq(&c, "1-D strided view", &download(&y)?, &wy, &no_inputs)?;
        let mut wz = vec![0; d0 * d1 * d2];
        for i in 0..d0 {
            for j in 0..d1 {
                for k in 0..d2 {
                    wz[(k * d0 + i) * d1 + j] = xs[(i * d1 + j) * d2 + k];
                }
            }
        }
        check_eq(&c, "3-D view, trans [2,0,1]", &download(&z)?, &wz, &no_inputs)?;
    }
    Ok(())
}

// -------------------------------------------------------------- atomics

/// Every lane adds its value into bin `offs % nbins`: many programs hit
/// the same few elements. A scalar atomic counts the programs.
#[kernel]
pub fn k_atomic_f32<const B: i32>(x: Ptr<f32>, bins: Ptr<f32>, count: Ptr<f32>, n: i32, nbins: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    atomic_add(bins + offs % nbins, load(x + offs, m), m);
    atomic_add(count, 1.0);
}

#[kernel]
pub fn k_atomic_i32<const B: i32>(x: Ptr<i32>, bins: Ptr<i32>, count: Ptr<i32>, n: i32, nbins: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    atomic_add(bins + offs % nbins, load(x + offs, m), m);
    atomic_add(count, 1);
}

#[kernel]
pub fn k_atomic_u32<const B: i32>(x: Ptr<u32>, bins: Ptr<u32>, n: i32, nbins: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    atomic_add(bins + offs % nbins, load(x + offs, m), m);
}

pub fn atomics(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let nbins = 1 + rng.below(5) as usize;
        let c = Ctx::new("atomic_add", seed, format!("n={n} B={b} bins={nbins}"));
        let grid = cdiv(n, b as usize);
        // f32: small integers, so every summation order is exact.
        let xf: Vec<f32> = (0..n).map(|_| rng.int(-8, 8) as f32).collect();
        let init_f: Vec<f32> = (0..nbins).map(|_| rng.int(-3, 3) as f32).collect();
        let x = upload(dev, &xf)?;
        let mut bins_init = init_f.clone();
        bins_init.extend(std::iter::repeat_n(f32::sentinel(), PAD));
        let mut bins = upload(dev, &bins_init)?;
        let mut count = upload(dev, &[0.5f32, f32::sentinel()])?;
        c.launch(k_atomic_f32::launch(dev, grid as u32, &x, &mut bins, &mut count, n as i32, nbins as i32, b))?;
        let mut w = init_f.iter().map(|&v| v as f64).collect::<Vec<_>>();
        for (i, v) in xf.iter().enumerate() {
            w[i % nbins] += *v as f64;
        }
        check_float_exact(&c, "f32 bins", &download(&bins)?, &w, &no_inputs)?;
        check_float_exact(&c, "f32 program counter", &download(&count)?, &[grid as f64 + 0.5], &no_inputs)?;
        // i32: full-range values, wrapping sums.
        let xi: Vec<i32> = (0..n).map(|_| rand_int(&mut rng)).collect();
        let x = upload(dev, &xi)?;
        let mut bins_init: Vec<i32> = (0..nbins).map(|_| rand_int(&mut rng)).collect();
        let mut w: Vec<i32> = bins_init.clone();
        for (i, v) in xi.iter().enumerate() {
            w[i % nbins] = w[i % nbins].wrapping_add(*v);
        }
        bins_init.extend(std::iter::repeat_n(i32::sentinel(), PAD));
        let mut bins = upload(dev, &bins_init)?;
        let mut count = upload(dev, &[3i32, i32::sentinel()])?;
        c.launch(k_atomic_i32::launch(dev, grid as u32, &x, &mut bins, &mut count, n as i32, nbins as i32, b))?;
        check_eq(&c, "i32 bins", &download(&bins)?, &w, &no_inputs)?;
        check_eq(&c, "i32 program counter", &download(&count)?, &[grid as i32 + 3], &no_inputs)?;
        // u32
        let xu: Vec<u32> = (0..n).map(|_| rand_int(&mut rng)).collect();
        let x = upload(dev, &xu)?;
        let mut w = vec![0u32; nbins];
        for (i, v) in xu.iter().enumerate() {
            w[i % nbins] = w[i % nbins].wrapping_add(*v);
        }
        let mut bins_init = vec![0u32; nbins];
        bins_init.extend(std::iter::repeat_n(u32::sentinel(), PAD));
        let mut bins = upload(dev, &bins_init)?;
        c.launch(k_atomic_u32::launch(dev, grid as u32, &x, &mut bins, n as i32, nbins as i32, b))?;
        check_eq(&c, "u32 bins", &download(&bins)?, &w, &no_inputs)?;
    }
    Ok(())
}

/// `atomic_add`'s old values: every even lane takes a ticket from bin
/// `offs % nbins` (odd lanes are masked off and get 0); the tickets of
/// one bin are its start value plus 0, 1, 2, … in some order. A scalar
/// ticket per program, broadcast to the whole tile, numbers the programs.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_atomic_old<const B: i32>(tickets: Ptr<i32>, ftickets: Ptr<f32>, out: Ptr<i32>, fout: Ptr<f32>, order: Ptr<i32>, seen: Ptr<i32>, n: i32, nbins: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let take = m & ((offs & 1) == 0);
    let t = atomic_add(tickets + offs % nbins, 1, take);
    store(out + offs, t, m);
    let f = atomic_add(ftickets + offs % nbins, 1.0, take);
    store(fout + offs, f, m);
    let me = atomic_add(order, 1);
    store(seen + offs, me + zeros([B], i32), m);
}

pub fn atomics_old(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let nbins = 1 + rng.below(5) as usize;
        let c = Ctx::new("atomic_add_old", seed, format!("n={n} B={b} bins={nbins}"));
        let grid = cdiv(n, b as usize);
        let start: Vec<i32> = (0..nbins).map(|_| rng.int(-50, 50) as i32).collect();
        let mut t_init = start.clone();
        t_init.extend(std::iter::repeat_n(i32::sentinel(), PAD));
        let mut tickets = upload(dev, &t_init)?;
        let mut f_init: Vec<f32> = start.iter().map(|&v| v as f32).collect();
        f_init.extend(std::iter::repeat_n(f32::sentinel(), PAD));
        let mut ftickets = upload(dev, &f_init)?;
        let mut out = poisoned::<i32>(dev, n)?;
        let mut fout = poisoned::<f32>(dev, n)?;
        let mut order = upload(dev, &[7i32, i32::sentinel()])?;
        let mut seen = poisoned::<i32>(dev, n)?;
        c.launch(k_atomic_old::launch(dev, grid as u32, &mut tickets, &mut ftickets, &mut out, &mut fout, &mut order, &mut seen, n as i32, nbins as i32, b))?;
        let (got, fgot, seen) = (download(&out)?, download(&fout)?, download(&seen)?);
        // per bin: the old values taken are start, start + 1, …
        let mut want_end = start.clone();
        let mut per_bin: Vec<Vec<i32>> = vec![vec![]; nbins];
        let mut fper_bin: Vec<Vec<f32>> = vec![vec![]; nbins];
        for i in 0..n {
            if i % 2 == 0 {
                want_end[i % nbins] += 1;
                per_bin[i % nbins].push(got[i]);
                fper_bin[i % nbins].push(fgot[i]);
            } else if got[i] != 0 || fgot[i].to_bits() != 0 {
                return Err(c.err(format!("masked-off lane {i} got old values {} / {}, want 0", got[i], fgot[i])));
            }
        }
        for (bin, (ts, fs)) in per_bin.iter_mut().zip(fper_bin.iter_mut()).enumerate() {
            ts.sort_unstable();
            let want: Vec<i32> = (0..ts.len() as i32).map(|j| start[bin] + j).collect();
            if *ts != want {
                return Err(c.err(format!("bin {bin}: i32 old values {ts:?}, want {want:?}")));
            }
            let mut fs: Vec<i32> = fs.iter().map(|&v| v as i32).collect();
            fs.sort_unstable();
            if fs != want {
                return Err(c.err(format!("bin {bin}: f32 old values {fs:?}, want {want:?}")));
            }
        }
        check_eq(&c, "i32 tickets after", &download(&tickets)?, &want_end, &no_inputs)?;
        let want_f: Vec<f64> = want_end.iter().map(|&v| v as f64).collect();
        check_float_exact(&c, "f32 tickets after", &download(&ftickets)?, &want_f, &no_inputs)?;
        check_eq(&c, "program counter after", &download(&order)?, &[7 + grid as i32], &no_inputs)?;
        // each program's scalar ticket reached all of its lanes; the
        // programs' tickets are 7, 8, … in some order
        let mut tickets_seen = vec![];
        for p in 0..grid {
            let lanes = &seen[p * b as usize..n.min((p + 1) * b as usize)];
            if lanes.iter().any(|&v| v != lanes[0]) {
                return Err(c.err(format!("program {p}: the scalar ticket differs between lanes: {lanes:?}")));
            }
            tickets_seen.push(lanes[0]);
        }
        tickets_seen.sort_unstable();
        let want: Vec<i32> = (0..grid as i32).map(|j| 7 + j).collect();
        if tickets_seen != want {
            return Err(c.err(format!("program tickets {tickets_seen:?}, want {want:?}")));
        }
    }
    Ok(())
}

/// The last program to arrive combines everyone's partial results: each
/// program writes the sum of its block to `part[pid]`, counts itself in
/// with an `AcqRel` atomic, and the one that sees `programs − 1` adds the
/// partials up in program order (so the result does not depend on who
/// came last), writes the total and sets the counter back to 0 for the
/// next launch.
#[kernel]
pub fn k_last_program<const B: i32>(x: Ptr<f32>, part: Ptr<f32>, counter: Ptr<i32>, total: Ptr<f32>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    store(part + program_id(0), sum(load(x + offs, offs < n, 0.0), 0));
    let arrived = atomic_add(counter, 1, None, AcqRel);
    if arrived == num_programs(0) - 1 {
        let mut acc = zeros([B], f32);
        for p0 in (0..num_programs(0)).step_by(B) {
            let p = p0 + arange(0, B);
            acc += load(part + p, p < num_programs(0), 0.0);
        }
        store(total, sum(acc, 0));
        store(counter, 0);
    }
}

pub fn last_program(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("last_program", seed, format!("n={n} B={b}"));
        let grid = cdiv(n, b as usize);
        // small integers: every order of summation is exact
        let xs: Vec<f32> = (0..n).map(|_| rng.int(-8, 8) as f32).collect();
        let x = upload(dev, &xs)?;
        let mut part = poisoned::<f32>(dev, grid)?;
        let mut counter = upload(dev, &[0i32, i32::sentinel()])?;
        let mut total = upload(dev, &[f32::sentinel(), f32::sentinel()])?;
        let want: f64 = xs.iter().map(|&v| v as f64).sum();
        for round in 0..2 {
            let r = k_last_program::launch(dev, grid as u32, &x, &mut part, &mut counter, &mut total, n as i32, b);
            if dev.kind() == ferrotile::DeviceKind::Wgpu {
                // (WGSL cannot order memory between workgroups)
                match r {
                    Err(e) if e.to_string().contains("AcqRel ordering") => return Ok(()),
                    other => return Err(c.err(format!("WGSL: want the error for AcqRel ordering, got {:?}", other.map_err(|e| e.to_string())))),
                }
            }
            c.launch(r)?;
            check_float_exact(&c, &format!("total (launch {round})"), &download(&total)?, &[want], &no_inputs)?;
            check_eq(&c, &format!("counter reset (launch {round})"), &download(&counter)?, &[0], &no_inputs)?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------ repeated loads

/// Loads whose addresses repeat along a dimension — a packed word per 8
/// rows (`r >> 3`), a column vector broadcast along N (contiguous along
/// dim 0), a row vector broadcast down the tile — with masks constant over
/// each run and a mask that changes inside one (rows < `mrow`: the run's
/// other rows must read `other`); and small integers converted to floats
/// (`& 15`: [0, 15] → f32; a difference of two: [−15, 15] → bf16). The PTX
/// backend loads such addresses once per run and vectorizes along the
/// non-last dimension (`assign::load_runs`, `load_once_per_run`); the
/// conversions take the exponent trick (`small_int_to_float`).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_repeated_loads<const BM: i32, const BN: i32>(
    w: Ptr<i32>,
    col: Ptr<bf16>,
    row: Ptr<f32>,
    o_words: Ptr<i32>,
    o_masked: Ptr<i32>,
    o_col: Ptr<f32>,
    o_row: Ptr<f32>,
    o_q: Ptr<f32>,
    o_d: Ptr<bf16>,
    m: i32,
    n: i32,
    mrow: i32,
) {
    let r = program_id(0) * BM + arange(0, BM);
    let c = program_id(1) * BN + arange(0, BN);
    let ok = expand_dims(r < m, 1) & expand_dims(c < n, 0);
    let out = expand_dims(r * n, 1) + expand_dims(c, 0);
    let wp = w + expand_dims((r >> 3) * n, 1) + expand_dims(c, 0);
    let words = load(wp, ok, -1);
    store(o_words + out, words, ok);
    store(o_masked + out, load(wp, expand_dims(r < mrow, 1) & ok, 7), ok);
    store(o_col + out, load(broadcast_to(expand_dims(col + r, 1), [BM, BN]), ok, 0.0) as f32, ok);
    store(o_row + out, load(broadcast_to(expand_dims(row + c, 0), [BM, BN]), ok, 0.0), ok);
    let q = (words >> expand_dims((r & 7) * 4, 1)) & 15;
    store(o_q + out, q as f32, ok);
    store(o_d + out, (q - ((words >> 28) & 15)) as bf16, ok);
}

pub fn repeated_loads(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, bm, bn) in &[(40usize, 33usize, 16i32, 32i32), (17, 64, 32, 64), (64, 128, 64, 128), (9, 200, 16, 128)] {
        let mrow = rng.int(0, m as i64) as usize;
        let c = Ctx::new("repeated_loads", seed, format!("{m}x{n} BM={bm} BN={bn} mrow={mrow}"));
        let ws: Vec<i32> = (0..m.div_ceil(8) * n).map(|_| rand_int::<i32>(&mut rng)).collect();
        let cols: Vec<bf16> = (0..m).map(|_| rand_float::<bf16>(&mut rng, false)).collect();
        let rows: Vec<f32> = (0..n).map(|_| rand_float::<f32>(&mut rng, false)).collect();
        let (w, colb, rowb) = (upload(dev, &ws)?, upload(dev, &cols)?, upload(dev, &rows)?);
        let mut ow = poisoned::<i32>(dev, m * n + PAD)?;
        let mut om = poisoned::<i32>(dev, m * n + PAD)?;
        let mut oc = poisoned::<f32>(dev, m * n + PAD)?;
        let mut or = poisoned::<f32>(dev, m * n + PAD)?;
        let mut oq = poisoned::<f32>(dev, m * n + PAD)?;
        let mut od = poisoned::<bf16>(dev, m * n + PAD)?;
        let grid = (cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32);
        c.launch(k_repeated_loads::launch(
            dev,
            grid,
            &w,
            &colb,
            &rowb,
            &mut ow,
            &mut om,
            &mut oc,
            &mut or,
            &mut oq,
            &mut od,
            m as i32,
            n as i32,
            mrow as i32,
            bm,
            bn,
        ))?;
        let word = |i: usize, j: usize| ws[(i >> 3) * n + j];
        let at = |f: &dyn Fn(usize, usize) -> f64| -> Vec<f64> { (0..m * n).map(|x| f(x / n, x % n)).collect() };
        let q = |i: usize, j: usize| ((word(i, j) >> ((i & 7) * 4)) & 15) as i64;
        let inputs = |x: usize| format!("row {}, col {}, word {:#x}", x / n, x % n, word(x / n, x % n));
        let got_w = download(&ow)?;
        check_eq(&c, "load(w + (r >> 3)·n + c)", &got_w[..m * n], &(0..m * n).map(|x| word(x / n, x % n)).collect::<Vec<_>>(), &inputs)?;
        check_pad(&c, "words", &got_w, m * n)?;
        let got_m = download(&om)?;
        check_eq(
            &c,
            "load(.., r < mrow, 7)",
            &got_m[..m * n],
            &(0..m * n).map(|x| if x / n < mrow { word(x / n, x % n) } else { 7 }).collect::<Vec<_>>(),
            &inputs,
        )?;
        check_float_exact(&c, "column broadcast along N", &download(&oc)?[..m * n], &at(&|i, _| cols[i].to_f64()), &inputs)?;
        check_float_exact(&c, "row broadcast along M", &download(&or)?[..m * n], &at(&|_, j| rows[j] as f64), &inputs)?;
        check_float_exact(&c, "((w >> s) & 15) as f32", &download(&oq)?[..m * n], &at(&|i, j| q(i, j) as f64), &inputs)?;
        check_float_exact(
            &c,
            "(q − (w >> 28 & 15)) as bf16",
            &download(&od)?[..m * n],
            &at(&|i, j| (q(i, j) - ((word(i, j) >> 28) & 15) as i64) as f64),
            &inputs,
        )?;
    }
    Ok(())
}
