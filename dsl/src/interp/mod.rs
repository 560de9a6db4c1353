//! The CPU interpreter: the reference semantics of specialized IR.
//!
//! Takes a specialized, verified kernel, a grid and the launch arguments.
//! Runs every program of the grid (in parallel over host threads; programs
//! are independent except through atomics and memory they race on, exactly
//! as on a GPU) executing each op on whole tiles. Guarantees: every memory
//! access is bounds-checked against its buffer — launches normally arrive
//! guarded (`ferrotile_ir::passes::guard`: out-of-bounds lanes are masked
//! off, or counted in a checked launch), and an access that still falls
//! outside (an unguarded launch) is an [`Error::Runtime`] naming the
//! kernel, line, program and offset — never UB; masked-off lanes are
//! neither read nor written; a loop whose step is ≤ 0 runs zero times;
//! `load` without `other` yields 0 in masked lanes; reductions of f32/f16/
//! bf16 accumulate in f64 and round once; `dot` accumulates in f32 (i32 for
//! i8) with optional tf32 rounding of the inputs. Elementwise semantics are
//! documented in `tile.rs`.

pub mod tile;

use crate::element::Scalar;
use crate::error::{Error, Result};
use ferrotile_ir::*;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tile::{Data, Tile, ViewVal};

/// The interpreter's value of a scalar argument.
fn scalar_data(s: Scalar) -> Data {
    match s {
        Scalar::F(v, d) => match d {
            DType::F32 => Data::F32(vec![v as f32]),
            DType::F16 => Data::F16(vec![tile::f16_from_f64(v)]),
            DType::BF16 => Data::BF16(vec![tile::bf16_from_f64(v)]),
            d => Data::from_f64(vec![v], d),
        },
        Scalar::I(v, d) => Data::from_i64(vec![v], d),
    }
}

/// Host memory behind a CPU buffer. Kernel programs running on several
/// threads take the lock per memory op (a whole tile), so concurrent stores
/// from different programs are serialized, never a data race.
#[derive(Debug)]
pub struct HostMem {
    pub(crate) data: RwLock<Vec<u8>>,
    pub(crate) dtype: DType,
}

impl HostMem {
    pub(crate) fn new(data: Vec<u8>, dtype: DType) -> Self {
        HostMem { data: RwLock::new(data), dtype }
    }
}

/// One argument of an interpreted launch: a buffer in host memory (`len`
/// elements of `dtype`) or a scalar.
pub enum InterpArg<'a> {
    /// A buffer argument.
    Buffer {
        /// Its memory.
        mem: &'a HostMem,
        /// Its length in elements.
        len: usize,
        /// Its element type.
        dtype: DType,
    },
    /// A scalar argument.
    Scalar(Scalar),
}

struct BufArg<'a> {
    mem: &'a HostMem,
    len: usize,
    dtype: DType,
}

type RtErr = (Loc, String);
type RR<T> = std::result::Result<T, RtErr>;

/// Run `k` over `grid` on up to `threads` host threads.
pub fn run(k: &Kernel, threads: usize, grid: [u32; 3], args: &[InterpArg<'_>]) -> Result<()> {
    // (launches through the runtime are checked against the signature
    // already; this entry point is public, so check the kernel and `args`
    // too: the interpreter then meets only what it can run)
    let lerr = |msg: String| Error::Launch { kernel: k.name.clone(), msg };
    if !k.specialized {
        return Err(lerr("the interpreter runs specialized kernels (`ferrotile_ir::specialize`)".into()));
    }
    ferrotile_ir::verify::verify(k).map_err(|e| lerr(format!("the kernel fails verification at line {}: {}", e.loc.line, e.msg)))?;
    if args.len() != k.params.len() {
        return Err(lerr(format!("{} arguments for {} parameters", args.len(), k.params.len())));
    }
    for (i, (a, p)) in args.iter().zip(&k.params).enumerate() {
        match (a, &p.kind) {
            (InterpArg::Buffer { mem, len, dtype }, ferrotile_ir::ParamKind::Ptr(d)) => {
                if dtype != d || mem.dtype != *d {
                    return Err(lerr(format!("argument {i} (`{}`): a buffer of {dtype} (memory of {}) for a pointer to {d}", p.name, mem.dtype)));
                }
                let bytes = mem.data.read().map(|g| g.len()).unwrap_or_else(|g| g.into_inner().len());
                if len.checked_mul(d.size_bytes()).is_none_or(|b| b > bytes) {
                    return Err(lerr(format!("argument {i} (`{}`): {len} elements of {d} do not fit its {bytes} bytes", p.name)));
                }
            }
            (InterpArg::Scalar(s), ferrotile_ir::ParamKind::Scalar(d)) if s.dtype() == *d => {}
            _ => return Err(lerr(format!("argument {i} (`{}`) does not match the parameter's kind or dtype", p.name))),
        }
    }
    let mut params: Vec<Option<BufArg>> = vec![];
    let mut scalars: Vec<Option<Scalar>> = vec![];
    for a in args {
        match a {
            InterpArg::Buffer { mem, dtype, len } => {
                params.push(Some(BufArg { mem, len: *len, dtype: *dtype }));
                scalars.push(None);
            }
            InterpArg::Scalar(s) => {
                params.push(None);
                scalars.push(Some(*s));
            }
        }
    }
    let Some(total) = grid.iter().try_fold(1u64, |acc, &g| acc.checked_mul(g as u64)) else {
        return Err(lerr(format!("a grid of {grid:?} programs is more than 2^64")));
    };
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let first_err: Mutex<Option<(u64, Error)>> = Mutex::new(None);
    let threads = (threads as u64).min(total).max(1) as usize;
    let work = || {
        let mut prog = Prog { k, params: &params, scalars: &scalars, grid, pid: [0; 3], vals: vec![None; k.values.len()] };
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= total {
                break;
            }
            let gx = grid[0] as u64;
            let gy = grid[1] as u64;
            prog.pid = [(i % gx) as u32, ((i / gx) % gy) as u32, (i / (gx * gy)) as u32];
            if let Err((loc, msg)) = prog.block(&k.body) {
                let e = Error::Runtime { kernel: k.name.clone(), file: k.file.clone(), line: loc.line, program: prog.pid, msg };
                let mut g = first_err.lock().unwrap_or_else(|p| p.into_inner());
                // Report the lowest-numbered failing program: deterministic.
                if g.as_ref().is_none_or(|(j, _)| i < *j) {
                    *g = Some((i, e));
                }
                stop.store(true, Ordering::Relaxed);
                break;
            }
        }
    };
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(work);
            }
        });
    }
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

struct Prog<'a> {
    k: &'a Kernel,
    params: &'a [Option<BufArg<'a>>],
    scalars: &'a [Option<Scalar>],
    grid: [u32; 3],
    pid: [u32; 3],
    vals: Vec<Option<Rc<Tile>>>,
}

fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

fn dims(shape: &[Dim]) -> Vec<usize> {
    shape.iter().map(|d| d.known().expect("specialized dims are literal") as usize).collect()
}

/// Index map of a broadcast from `src` shape (same rank, 1s expand) to `dst`.
fn broadcast_index(src: &[usize], dst: &[usize]) -> Vec<usize> {
    let n: usize = dst.iter().product();
    let ss = strides_of(src);
    let ds = strides_of(dst);
    (0..n)
        .map(|i| {
            let mut off = 0;
            for a in 0..dst.len() {
                let c = (i / ds[a]) % dst[a];
                if src[a] != 1 {
                    off += c * ss[a];
                }
            }
            off
        })
        .collect()
}

use ferrotile_ir::numeric::{tf32_round as tf32, tf32_trunc};

impl<'a> Prog<'a> {
    fn get(&self, v: V) -> Rc<Tile> {
        self.vals[v.idx()].clone().expect("interpreter: value used before definition")
    }
    fn set(&mut self, v: V, t: Tile) {
        self.vals[v.idx()] = Some(Rc::new(t));
    }
    fn shape_of(&self, v: V) -> Vec<usize> {
        dims(self.k.ty(v).shape())
    }

    fn block(&mut self, b: &Block) -> RR<()> {
        for op in &b.ops {
            self.op(op).map_err(|m| (op.loc, m))?;
        }
        Ok(())
    }

    fn yields(&self, b: &Block) -> Vec<Rc<Tile>> {
        match b.ops.last().map(|o| &o.kind) {
            Some(OpKind::Yield(vs)) => vs.iter().map(|v| self.get(*v)).collect(),
            _ => vec![],
        }
    }

    fn scalar_i64(&self, v: V) -> i64 {
        self.get(v).data.as_i64()[0]
    }

    fn op(&mut self, op: &Op) -> std::result::Result<(), String> {
        let k = self.k;
        let r0 = op.results.first().copied();
        let out_shape = r0.map(|r| self.shape_of(r)).unwrap_or_default();
        let out_dtype = r0.and_then(|r| k.ty(r).elem()).map(|e| e.dtype());
        let t = |data: Data| Tile { shape: out_shape.clone(), data };
        let tile: Option<Tile> = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                match (&self.params[i], &self.scalars[i]) {
                    (Some(_), _) => Some(t(Data::Ptr(vec![(i as u32, 0)]))),
                    (None, Some(s)) => Some(t(scalar_data(*s))),
                    _ => unreachable!(),
                }
            }
            OpKind::Constexpr(_) => unreachable!("constexpr after specialization"),
            OpKind::Const(l) => {
                let d = out_dtype.unwrap();
                Some(t(match l {
                    Lit::Int(v) => Data::from_i64(vec![*v], d),
                    Lit::Bool(b) => Data::from_i64(vec![*b as i64], d),
                    Lit::Float(f) => match d {
                        DType::F32 => Data::F32(vec![*f as f32]),
                        DType::F16 => Data::F16(vec![tile::f16_from_f64(*f)]),
                        DType::BF16 => Data::BF16(vec![tile::bf16_from_f64(*f)]),
                        DType::F8E4M3 | DType::F8E5M2 => Data::from_f64(vec![*f], d),
                        _ => Data::from_i64(vec![*f as i64], d),
                    },
                }))
            }
            OpKind::ProgramId(a) => Some(t(Data::I32(vec![self.pid[*a as usize] as i32]))),
            OpKind::NumPrograms(a) => Some(t(Data::I32(vec![self.grid[*a as usize] as i32]))),
            OpKind::Arange { start, .. } => {
                let s = start.known().unwrap() as i32;
                Some(t(Data::I32((0..out_shape[0] as i32).map(|i| s + i).collect())))
            }
            OpKind::Splat { x, .. } => {
                let n = out_shape.iter().product();
                Some(t(self.get(*x).data.splat(n)))
            }
            OpKind::Broadcast { x, .. } => {
                let src = self.get(*x);
                let idx = broadcast_index(&src.shape, &out_shape);
                Some(t(src.data.gather(&idx)))
            }
            OpKind::ExpandDims { x, .. } | OpKind::Reshape { x, .. } => Some(t(self.get(*x).data.clone())),
            OpKind::Trans { x, perm } => {
                let src = self.get(*x);
                let ss = strides_of(&src.shape);
                let ds = strides_of(&out_shape);
                let n: usize = out_shape.iter().product();
                let idx: Vec<usize> = (0..n).map(|i| (0..out_shape.len()).map(|a| ((i / ds[a]) % out_shape[a]) * ss[perm[a] as usize]).sum()).collect();
                Some(t(src.data.gather(&idx)))
            }
            OpKind::Binary { op: o, a, b } => {
                let (a, b) = (self.get(*a), self.get(*b));
                Some(t(tile::binary(*o, &a.data, &b.data)?))
            }
            OpKind::Cmp { op: o, a, b } => {
                let (a, b) = (self.get(*a), self.get(*b));
                Some(t(tile::cmp(*o, &a.data, &b.data)))
            }
            OpKind::Unary { op: o, x } => Some(t(tile::unary(*o, &self.get(*x).data))),
            OpKind::Fma { a, b, c } => {
                let d = out_dtype.unwrap();
                let (a, b, c) = (self.get(*a), self.get(*b), self.get(*c));
                let (x, y, z) = (a.data.as_f32(), b.data.as_f32(), c.data.as_f32());
                let r: Vec<f32> = x.iter().zip(y.iter()).zip(z.iter()).map(|((&p, &q), &s)| p.mul_add(q, s)).collect();
                Some(t(Data::from_f32(r, d)))
            }
            OpKind::Select { cond, a, b } => {
                let (c, a, b) = (self.get(*cond), self.get(*a), self.get(*b));
                Some(t(Data::select(c.data.as_bool(), &a.data, &b.data)))
            }
            OpKind::Cast { x, to } => Some(t(self.get(*x).data.cast(*to))),
            OpKind::Bitcast { x, to } => Some(t(self.get(*x).data.bitcast(*to))),
            OpKind::AddPtr { ptr, offset } => {
                let (p, o) = (self.get(*ptr), self.get(*offset));
                let Data::Ptr(pv) = &p.data else { unreachable!() };
                let ov = o.data.as_i64();
                Some(t(Data::Ptr(pv.iter().zip(ov.iter()).map(|(&(b, off), &d)| (b, off.wrapping_add(d))).collect())))
            }
            OpKind::Load { ptr, mask, other } => {
                let p = self.get(*ptr);
                let m = mask.map(|m| self.get(m));
                let Data::Ptr(pv) = &p.data else { unreachable!() };
                let mut data = self.gather_mem(pv, m.as_ref().map(|m| m.data.as_bool()), out_dtype.unwrap(), "load")?;
                if let (Some(o), Some(m)) = (other, &m) {
                    let o = self.get(*o);
                    data = Data::select(m.data.as_bool(), &data, &o.data);
                }
                Some(t(data))
            }
            // (each op holds its buffers' write locks throughout, and
            // programs run in order or on threads that share them: every
            // op is atomic and sequentially consistent, which every
            // `MemSem` allows)
            OpKind::Store { ptr, value, mask } | OpKind::AtomicAdd { ptr, value, mask, .. } => {
                let p = self.get(*ptr);
                let v = self.get(*value);
                let m = mask.map(|m| self.get(m));
                let Data::Ptr(pv) = &p.data else { unreachable!() };
                let atomic = matches!(op.kind, OpKind::AtomicAdd { .. });
                let old = self.scatter_mem(pv, m.as_ref().map(|m| m.data.as_bool()), &v.data, atomic)?;
                if op.results.is_empty() {
                    None
                } else {
                    Some(t(old))
                }
            }
            OpKind::MakeView { base, shape, strides } => {
                let b = self.get(*base);
                let Data::Ptr(pv) = &b.data else { unreachable!() };
                let (param, off) = pv[0];
                let shape: Vec<i64> = shape.iter().map(|v| self.scalar_i64(*v)).collect();
                let strides: Vec<i64> = strides.iter().map(|v| self.scalar_i64(*v)).collect();
                if let Some(d) = shape.iter().find(|&&d| d < 0) {
                    return Err(format!("view dimension {d} is negative"));
                }
                Some(t(Data::View(Box::new(ViewVal { param, base: off, shape, strides }))))
            }
            OpKind::LoadBlock { view, offsets, .. } | OpKind::StoreBlock { view, offsets, .. } => {
                let vt = self.get(*view);
                let Data::View(vv) = &vt.data else { unreachable!() };
                let offs: Vec<i64> = offsets.iter().map(|v| self.scalar_i64(*v)).collect();
                let bshape = match &op.kind {
                    OpKind::StoreBlock { value, .. } => self.shape_of(*value),
                    _ => out_shape.clone(),
                };
                let n: usize = bshape.iter().product();
                let bs = strides_of(&bshape);
                let mut ptrs = Vec::with_capacity(n);
                let mut inb = Vec::with_capacity(n);
                for i in 0..n {
                    let mut addr = vv.base;
                    let mut ok = true;
                    for a in 0..bshape.len() {
                        let c = offs[a] + ((i / bs[a]) % bshape[a]) as i64;
                        ok &= c >= 0 && c < vv.shape[a];
                        addr = addr.wrapping_add(c.wrapping_mul(vv.strides[a]));
                    }
                    ptrs.push((vv.param, addr));
                    inb.push(ok);
                }
                match &op.kind {
                    OpKind::StoreBlock { value, .. } => {
                        let v = self.get(*value);
                        self.scatter_mem(&ptrs, Some(&inb), &v.data, false)?;
                        None
                    }
                    _ => Some(t(self.gather_mem(&ptrs, Some(&inb), out_dtype.unwrap(), "block load")?)),
                }
            }
            OpKind::Reduce { op: o, x, axis } => Some(t(self.reduce(*o, &self.get(*x), *axis as usize, out_dtype.unwrap()))),
            OpKind::Scan { x, axis, .. } => {
                let x = self.get(*x);
                let d = out_dtype.unwrap();
                let (outer, n, inner) = split(&x.shape, *axis as usize);
                if d.is_float() {
                    let f = x.data.as_f32();
                    let mut r = vec![0f64; f.len()];
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut acc = 0f64;
                            for j in 0..n {
                                let idx = (o * n + j) * inner + i;
                                acc += f[idx] as f64;
                                r[idx] = acc;
                            }
                        }
                    }
                    // each prefix rounded once from f64 to the dtype
                    Some(t(Data::from_f64(r, d)))
                } else {
                    let f = x.data.as_i64();
                    let mut r = vec![0i64; f.len()];
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut acc = 0i64;
                            for j in 0..n {
                                let idx = (o * n + j) * inner + i;
                                acc = acc.wrapping_add(f[idx]);
                                r[idx] = acc;
                            }
                        }
                    }
                    Some(t(Data::from_i64(r, d)))
                }
            }
            OpKind::Dot { a, b, acc, precision } => {
                let (a, b, c) = (self.get(*a), self.get(*b), self.get(*acc));
                let (m, kk, n) = (a.shape[0], a.shape[1], b.shape[1]);
                if out_dtype == Some(DType::I32) {
                    let (x, y) = (a.data.as_i64(), b.data.as_i64());
                    let mut r: Vec<i32> = c.data.as_i64().iter().map(|&v| v as i32).collect();
                    for i in 0..m {
                        for j in 0..n {
                            let mut s = r[i * n + j];
                            for l in 0..kk {
                                s = s.wrapping_add((x[i * kk + l] * y[l * n + j]) as i32);
                            }
                            r[i * n + j] = s;
                        }
                    }
                    Some(t(Data::I32(r)))
                } else {
                    let mut x = a.data.as_f32().into_owned();
                    let mut y = b.data.as_f32().into_owned();
                    match precision {
                        DotPrecision::Tf32 => {
                            x.iter_mut().for_each(|v| *v = tf32(*v));
                            y.iter_mut().for_each(|v| *v = tf32(*v));
                        }
                        DotPrecision::Tf32Trunc => {
                            x.iter_mut().for_each(|v| *v = tf32_trunc(*v));
                            y.iter_mut().for_each(|v| *v = tf32_trunc(*v));
                        }
                        DotPrecision::Ieee => {}
                    }
                    // transpose b for contiguous inner loops
                    let mut bt = vec![0f32; kk * n];
                    for l in 0..kk {
                        for j in 0..n {
                            bt[j * kk + l] = y[l * n + j];
                        }
                    }
                    let mut r = c.data.as_f32().into_owned();
                    for i in 0..m {
                        let row = &x[i * kk..(i + 1) * kk];
                        for j in 0..n {
                            let col = &bt[j * kk..(j + 1) * kk];
                            let mut s = r[i * n + j];
                            for l in 0..kk {
                                s = row[l].mul_add(col[l], s);
                            }
                            r[i * n + j] = s;
                        }
                    }
                    Some(t(Data::F32(r)))
                }
            }
            OpKind::For { lo, hi, step, inits, body } => {
                let (lo, hi, step) = (self.scalar_i64(*lo), self.scalar_i64(*hi), self.scalar_i64(*step));
                let ivd = k.ty(body.args[0]).dtype().unwrap();
                let mut carried: Vec<Rc<Tile>> = inits.iter().map(|v| self.get(*v)).collect();
                // (a step ≤ 0 runs zero iterations, as on every backend;
                // checked launches report it: `passes::guard`)
                let mut i = lo;
                while i < hi && step > 0 {
                    self.vals[body.args[0].idx()] = Some(Rc::new(Tile { shape: vec![], data: Data::from_i64(vec![i], ivd) }));
                    for (a, c) in body.args[1..].iter().zip(&carried) {
                        self.vals[a.idx()] = Some(c.clone());
                    }
                    self.block(body).map_err(|(_, m)| m)?;
                    carried = self.yields(body);
                    i = match i.checked_add(step) {
                        Some(n) => n,
                        None => break,
                    };
                }
                for (r, c) in op.results.iter().zip(carried) {
                    self.vals[r.idx()] = Some(c);
                }
                None
            }
            OpKind::If { cond, then_, else_ } => {
                let c = self.get(*cond).data.as_bool()[0];
                let blk = if c { then_ } else { else_ };
                self.block(blk).map_err(|(_, m)| m)?;
                for (r, y) in op.results.iter().zip(self.yields(blk)) {
                    self.vals[r.idx()] = Some(y);
                }
                None
            }
            OpKind::Yield(_) => None,
            OpKind::StaticAssert { .. } => unreachable!("static_assert after specialization"),
            OpKind::Print { prefix, args } => {
                let mut s = format!("pid ({}, {}, {}) {prefix}", self.pid[0], self.pid[1], self.pid[2]);
                for a in args {
                    let v = self.get(*a);
                    s.push_str(&format!(" {}", fmt_tile(&v)));
                }
                println!("{s}");
                None
            }
        };
        if let (Some(tile), Some(r)) = (tile, r0) {
            debug_assert_eq!(tile.data.len(), tile.shape.iter().product::<usize>().max(1), "{:?}", op.kind);
            self.set(r, tile);
        }
        Ok(())
    }

    fn buf(&self, p: u32) -> std::result::Result<&BufArg<'a>, String> {
        self.params[p as usize].as_ref().ok_or_else(|| "pointer does not refer to a buffer".to_string())
    }

    fn check(&self, p: u32, off: i64, what: &str) -> std::result::Result<usize, String> {
        let b = self.buf(p)?;
        if off < 0 || off as u64 >= b.len as u64 {
            let name = &self.k.params[p as usize].name;
            return Err(format!("out-of-bounds {what}: element {off} of `{name}`, which has {} elements (mask the access or fix the offsets)", b.len));
        }
        Ok(off as usize)
    }

    fn gather_mem(&self, ptrs: &[(u32, i64)], mask: Option<&[bool]>, d: DType, what: &str) -> std::result::Result<Data, String> {
        let n = ptrs.len();
        let mut locs: Vec<Option<(u32, usize)>> = Vec::with_capacity(n);
        for (i, &(p, off)) in ptrs.iter().enumerate() {
            if mask.is_some_and(|m| !m[i]) {
                locs.push(None);
            } else {
                locs.push(Some((p, self.check(p, off, what)?)));
            }
        }
        let mut guards: Vec<Option<RwLockReadGuard<Vec<u8>>>> = (0..self.params.len()).map(|_| None).collect();
        for l in locs.iter().flatten() {
            if guards[l.0 as usize].is_none() {
                let b = self.buf(l.0)?;
                debug_assert_eq!(b.dtype, d);
                debug_assert_eq!(b.mem.dtype, d);
                guards[l.0 as usize] = Some(b.mem.data.read().map_err(|_| "buffer lock poisoned".to_string())?);
            }
        }
        let sz = d.size_bytes();
        let bytes = |p: u32, i: usize| -> &[u8] { &guards[p as usize].as_ref().unwrap()[i * sz..(i + 1) * sz] };
        macro_rules! g {
            ($ty:ty, $var:ident, $conv:expr) => {
                Data::$var(
                    locs.iter()
                        .map(|l| match l {
                            None => <$ty>::default(),
                            Some((p, i)) => {
                                let b = bytes(*p, *i);
                                $conv(b)
                            }
                        })
                        .collect(),
                )
            };
        }
        Ok(match d {
            DType::F32 => g!(f32, F32, |b: &[u8]| f32::from_le_bytes(b.try_into().unwrap())),
            DType::F16 => g!(half::f16, F16, |b: &[u8]| half::f16::from_le_bytes(b.try_into().unwrap())),
            DType::BF16 => g!(half::bf16, BF16, |b: &[u8]| half::bf16::from_le_bytes(b.try_into().unwrap())),
            DType::I32 => g!(i32, I32, |b: &[u8]| i32::from_le_bytes(b.try_into().unwrap())),
            DType::U32 => g!(u32, U32, |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap())),
            DType::I64 => g!(i64, I64, |b: &[u8]| i64::from_le_bytes(b.try_into().unwrap())),
            DType::I8 => g!(i8, I8, |b: &[u8]| b[0] as i8),
            DType::U8 => g!(u8, U8, |b: &[u8]| b[0]),
            DType::Bool => g!(bool, B, |b: &[u8]| b[0] != 0),
            DType::F8E4M3 => g!(u8, F8E4M3, |b: &[u8]| b[0]),
            DType::F8E5M2 => g!(u8, F8E5M2, |b: &[u8]| b[0]),
            DType::Generic(_) => unreachable!(),
        })
    }

    /// Writes (or, `atomic`, adds) `value` through `ptrs` where `mask`
    /// holds; returns the elements' previous values (0 where masked off)
    /// for an atomic, an empty tile for a store.
    fn scatter_mem(&self, ptrs: &[(u32, i64)], mask: Option<&[bool]>, value: &Data, atomic: bool) -> std::result::Result<Data, String> {
        let what = if atomic { "atomic_add" } else { "store" };
        let mut locs: Vec<Option<(u32, usize)>> = Vec::with_capacity(ptrs.len());
        for (i, &(p, off)) in ptrs.iter().enumerate() {
            if mask.is_some_and(|m| !m[i]) {
                locs.push(None);
            } else {
                locs.push(Some((p, self.check(p, off, what)?)));
            }
        }
        let mut order: Vec<u32> = locs.iter().flatten().map(|l| l.0).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<Option<RwLockWriteGuard<Vec<u8>>>> = (0..self.params.len()).map(|_| None).collect();
        for p in order {
            let b = self.buf(p)?;
            guards[p as usize] = Some(b.mem.data.write().map_err(|_| "buffer lock poisoned".to_string())?);
        }
        let d = value.dtype();
        let sz = d.size_bytes();
        let mut prev = if atomic { Some(Data::zeros(d, locs.len())) } else { None };
        for (i, l) in locs.iter().enumerate() {
            let Some((p, off)) = l else { continue };
            let g = guards[*p as usize].as_mut().unwrap();
            let slot = &mut g[off * sz..(off + 1) * sz];
            macro_rules! put {
                ($v:expr, $var:ident, $ty:ty, |$old:ident, $new:ident| $add:expr) => {{
                    let $new: $ty = $v[i];
                    let w: $ty = if atomic {
                        let $old = <$ty>::from_le_bytes((&*slot).try_into().unwrap());
                        if let Some(Data::$var(pv)) = prev.as_mut() {
                            pv[i] = $old;
                        }
                        $add
                    } else {
                        $new
                    };
                    slot.copy_from_slice(&w.to_le_bytes());
                }};
            }
            match value {
                Data::F32(v) => put!(v, F32, f32, |o, n| o + n),
                Data::F16(v) => put!(v, F16, half::f16, |o, n| half::f16::from_f32(o.to_f32() + n.to_f32())),
                Data::BF16(v) => put!(v, BF16, half::bf16, |o, n| half::bf16::from_f32(o.to_f32() + n.to_f32())),
                Data::I32(v) => put!(v, I32, i32, |o, n| o.wrapping_add(n)),
                Data::U32(v) => put!(v, U32, u32, |o, n| o.wrapping_add(n)),
                Data::I64(v) => put!(v, I64, i64, |o, n| o.wrapping_add(n)),
                Data::I8(v) => put!(v, I8, i8, |o, n| o.wrapping_add(n)),
                Data::U8(v) => put!(v, U8, u8, |o, n| o.wrapping_add(n)),
                Data::B(v) => slot[0] = v[i] as u8,
                Data::F8E4M3(v) | Data::F8E5M2(v) if !atomic => slot[0] = v[i],
                Data::F8E4M3(_) | Data::F8E5M2(_) => return Err("atomic_add on fp8".into()),
                Data::Ptr(_) | Data::View(_) => return Err("cannot store pointers".into()),
            }
        }
        Ok(prev.unwrap_or_else(|| Data::zeros(d, 0)))
    }

    fn reduce(&self, op: ReduceOp, x: &Tile, axis: usize, d: DType) -> Data {
        let (outer, n, inner) = split(&x.shape, axis);
        let m = outer * inner;
        let idx = |o: usize, j: usize, i: usize| (o * n + j) * inner + i;
        match op {
            ReduceOp::Argmax | ReduceOp::Argmin => {
                let mut r = Vec::with_capacity(m);
                if x.data.dtype().is_float() {
                    let better = |a: f64, b: f64| if op == ReduceOp::Argmax { a > b } else { a < b };
                    let vals: Vec<f64> = x.data.as_f32().iter().map(|&v| v as f64).collect();
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut bi = 0usize;
                            let mut bv = vals[idx(o, 0, i)];
                            for j in 1..n {
                                let v = vals[idx(o, j, i)];
                                if better(v, bv) || (bv.is_nan() && !v.is_nan()) {
                                    bv = v;
                                    bi = j;
                                }
                            }
                            r.push(bi as i64);
                        }
                    }
                } else {
                    // integers compare exactly (i64 values do not fit in f64)
                    let vals = x.data.as_i64();
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut bi = 0usize;
                            for j in 1..n {
                                let (v, bv) = (vals[idx(o, j, i)], vals[idx(o, bi, i)]);
                                let better = if op == ReduceOp::Argmax { v > bv } else { v < bv };
                                if better {
                                    bi = j;
                                }
                            }
                            r.push(bi as i64);
                        }
                    }
                }
                Data::from_i64(r, DType::I32)
            }
            _ if x.data.dtype().is_float() => {
                let f = x.data.as_f32();
                let mut r = Vec::with_capacity(m);
                for o in 0..outer {
                    for i in 0..inner {
                        let v = match op {
                            // rounded once from f64 to the dtype (not via f32)
                            ReduceOp::Sum => (0..n).map(|j| f[idx(o, j, i)] as f64).sum::<f64>(),
                            ReduceOp::Max => (0..n).map(|j| f[idx(o, j, i)]).fold(f32::NEG_INFINITY, f32::max) as f64,
                            _ => (0..n).map(|j| f[idx(o, j, i)]).fold(f32::INFINITY, f32::min) as f64,
                        };
                        r.push(v);
                    }
                }
                Data::from_f64(r, d)
            }
            _ => {
                let f = x.data.as_i64();
                let mut r = Vec::with_capacity(m);
                for o in 0..outer {
                    for i in 0..inner {
                        let it = (0..n).map(|j| f[idx(o, j, i)]);
                        r.push(match op {
                            ReduceOp::Sum => it.fold(0i64, |a, b| a.wrapping_add(b)),
                            ReduceOp::Max => it.max().unwrap(),
                            _ => it.min().unwrap(),
                        });
                    }
                }
                Data::from_i64(r, d)
            }
        }
    }
}

fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

fn fmt_tile(t: &Tile) -> String {
    let vals: Vec<String> = match &t.data {
        Data::View(v) => return format!("{v:?}"),
        Data::Ptr(p) => p.iter().map(|(b, o)| format!("arg{b}+{o}")).collect(),
        d if d.dtype().is_float() => d.as_f32().iter().map(|v| format!("{v}")).collect(),
        d => d.as_i64().iter().map(|v| format!("{v}")).collect(),
    };
    if t.shape.is_empty() {
        vals[0].clone()
    } else {
        format!("{:?}[{}]", t.shape, vals.join(", "))
    }
}
