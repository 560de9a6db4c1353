//! Op-level conformance suite: every DSL op, on any [`Device`], against
//! plain-Rust host references.
//!
//! Each [`Case`] builds random inputs from the seed it is given, launches
//! its kernel(s) on the device over grids whose last program is masked
//! (sizes 1, 7, 100, 1000, 4097 with blocks of 64 to 1024, 2-D and 3-D
//! shapes that are not multiples of their blocks), reads the outputs back
//! and compares them with references computed on the host: f64 for floats
//! (then rounded to the dtype, correctly, where the op is exact), native
//! wrapping Rust arithmetic for integers. Outputs are poisoned before every
//! launch (a signaling-NaN payload for floats, the 0x5A byte pattern for
//! integers) and carry a pad past the valid elements, so an element that is
//! never written, or a masked-off lane that is written, is a failure.
//!
//! A case returns `Err` with the case, dtype, sizes, seed, first mismatching
//! index, got/want and the inputs of that element. Runners: `run_case`
//! (catches panics, so a panicking backend is a failed case, not an aborted
//! run) and `run_all`. The CPU runner is `tests/tests/conformance_cpu.rs`;
//! GPU backends reuse the same cases unchanged.
//!
//! Tolerances (see each case): bit-exact wherever the op is exact or
//! correctly rounded (integer ops, + - * / and casts, shape and memory
//! ops); transcendental functions within 4 ulp or 1e-6 relative for f32 and
//! 1 ulp of the correctly rounded reference for f16/bf16; `fma` 1 ulp;
//! sums and `dot` within an f32-accumulation bound. Backends whose
//! language relaxes IEEE (WGSL: sqrt within 2.5 ulp, fma possibly unfused,
//! subnormals possibly flushed) are held to that documented relaxation and
//! no further ([`util::FloatModel`]). Run-time faults (out-of-bounds
//! accesses, views outside their buffer, loop steps ≤ 0, integer division
//! by zero) have one semantics on every backend (`safety.rs`). A few cases
//! test behaviour only the CPU interpreter promises (once-rounded f64
//! reductions) and relax on other devices.

mod arith;
mod basic;
mod casts;
mod control;
pub mod fp8;
pub mod funcs;
pub mod fused;
pub mod reduce;
mod safety;
pub mod user;
pub mod util;

use ferrotile::Device;

/// One conformance case: `run(device, seed)` is `Ok` or a message naming the
/// first mismatch.
#[derive(Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    /// The DSL ops the case covers (for reports).
    pub ops: &'static str,
    pub run: fn(&Device, u64) -> Result<(), String>,
}

/// Every case of the suite, in a stable order.
pub fn cases() -> Vec<Case> {
    macro_rules! case {
        ($name:literal, $ops:literal, $f:path) => {
            Case { name: $name, ops: $ops, run: $f }
        };
    }
    vec![
        case!("grid_ids", "program_id, num_programs (1-D, 2-D, 3-D grids)", basic::grid_ids),
        case!("constructors", "arange (constexpr start), zeros, full, zeros_like (f32/f16/bf16)", basic::constructors),
        case!("constructors_int", "zeros, full (run-time scalar and literal) of i8/u8/i32/u32/i64", basic::constructors_int),
        case!("load_store_masked", "load with mask (+ other), store with mask, all dtypes", basic::load_store_masked),
        case!(
            "out_of_bounds",
            "unmasked out-of-bounds load/store/atomic_add (tiles, scalars, negative offsets): `other`/0 and no write; Error::Fault when checked",
            safety::out_of_bounds
        ),
        case!("views_outside", "a view outside its buffer is empty (also feeding a tensor-core dot); Error::Fault when checked", safety::views_outside),
        case!(
            "loop_steps",
            "for loops run their trip count (no overflow of iv + step); step <= 0 runs zero times; Error::Fault when checked",
            safety::loop_steps
        ),
        case!("shape_ops", "expand_dims, broadcast_to, implicit broadcasting, trans, reshape", basic::shape_ops),
        case!(
            "repeated_loads",
            "loads repeating an address along a dimension (masks constant or not over the run), vectors along a non-last dimension, small ints to floats",
            basic::repeated_loads
        ),
        case!("trans3d", "trans with a permutation on 3-D tiles, 3-D reshape", basic::trans3d),
        case!("views", "view, load_block, store_block (out-of-bounds zero / not written), transposed view", basic::views),
        case!("views_1d_3d", "1-D strided and 3-D views", basic::views_1d3d),
        case!("atomic_add", "atomic_add f32/i32/u32, contended and scalar", basic::atomics),
        case!("atomic_add_old", "atomic_add's old values: tickets from contended bins (i32, f32, masked lanes), a scalar broadcast to the tile", basic::atomics_old),
        case!("last_program", "atomic_add with AcqRel: the last program to arrive sums the others' partials, twice (WGSL: a clear error)", basic::last_program),
        case!("int_ops", "+ - * / % & | ^ << >> maximum minimum - ! abs, compound assignment, comparisons; i8/u8/i32/u32/i64", arith::int_ops),
        case!("int_div_by_zero", "integer x / 0 = x, x % 0 = 0, MIN / -1 = MIN (i32, i64, u8)", safety::int_div_by_zero),
        case!("const_fold", "constant folding of literal casts/arithmetic/comparisons matches run time", arith::const_fold),
        case!("logical", "&& || ! ^ & | == != < select on bool tiles", arith::logical),
        case!("float_ops", "+ - * / maximum minimum (NaN) - abs floor ceil fma select where, weak literals, comparisons; f32/f16/bf16", arith::float_ops),
        case!("math", "exp exp2 log log2 sqrt rsqrt sigmoid tanh erf sin cos; f32/f16/bf16", arith::math),
        case!("casts", "casts between every pair of bool/i8/u8/i32/u32/i64/f16/bf16/f32", casts::casts),
        case!("generic_cast", "`x as U` in kernels with two dtype parameters", casts::generic_cast),
        case!("bitcast", "bitcast between f32, i32 and u32 (tiles and scalars), the exponent trick", casts::bitcast),
        case!("reduce_float", "sum max min argmax argmin along axes 0 and 1; f32/f16/bf16", reduce::reduce_float),
        case!("arg_nan", "max with argmax of the same row (reduced once) and argmin over rows with NaNs, ties, all-NaN rows, masked lanes", reduce::arg_nan),
        case!("row_stats", "multi-row programs: row statistics broadcast back into their rows; carried row vectors", reduce::row_stats),
        case!("sum_order", "sum combines partials in a tree (a large value plus many small ones)", reduce::sum_order),
        case!(
            "partial_sums",
            "loop-carried accumulators summed along one axis after the loop (fma, e + acc, a 1-D row), next to one also reduced with max",
            reduce::partial_sums
        ),
        case!("reduce_int", "sum (i8/u8 -> i32) max min argmax argmin along axes 0 and 1; integers", reduce::reduce_int),
        case!("cumsum", "cumsum along axes 0 and 1; floats and integers (i8 -> i32)", reduce::cumsum),
        case!("ring_gemm_late", "GEMMs on pointer-loaded rings feeding wgmma in flight, at tiles where the copies follow the MMA (CUDA)", reduce::ring_gemm_late),
        case!("dot", "dot f32/f16/bf16 -> f32 with accumulator, K loop with masked tails", reduce::dot_float),
        case!("dot_tf32", "dot_tf32 (inputs rounded to tf32) and two-argument dot", reduce::dot_tf32),
        case!("tf32_modes", "dot_tf32 rounds, dot_tf32_trunc truncates (wgmma rings on Hopper), round_tf32 exact", reduce::tf32_modes),
        case!("dot_i8", "dot i8 -> i32 with accumulator", reduce::dot_i8),
        case!("fp8", "f8e4m3/f8e5m2: casts from f32 (ties, saturation, NaN), loads, arithmetic, int → fp8, dot in wgmma tiles", fp8::fp8),
        case!(
            "dot_i8_tiles",
            "dot i8 -> i32 in wgmma-sized tiles: B row-major, through trans of [N, K], column-major view; A by block or pointer loads",
            reduce::dot_i8_tiles
        ),
        case!(
            "dot_chain",
            "a two-dot chain: the first dot's result cast into the second's A, a loop-carried accumulator, masked tails in m, K and n",
            fused::dot_chain
        ),
        case!(
            "norm_matmul",
            "RMSNorm fused into a GEMM: a row statistic from one loop scales the next loop's computed A operand; a gain vector only broadcast, addressed by offsets the tiles share",
            fused::norm_matmul
        ),
        case!(
            "decode_t",
            "the decode form of a small-M product: a weight tile scaled in registers as the dot's A, the tokens loaded along K as a narrow B; tails in every dimension",
            fused::decode_t
        ),
        case!(
            "attention",
            "a user's fused attention loop: two dots, the first's result reduced, exponentiated and cast into the second's A; transposed view; causal loop bound from program_id",
            fused::attention
        ),
        case!(
            "segment_sum",
            "packed segments through views at loaded offsets and lengths (a varlen batch): rows past a segment's end read as zeros, unmasked",
            fused::segment_sum
        ),
        case!("conv3x3", "a user's 3×3 convolution: a 2-D tile loaded nine times at shifted, partly negative offsets, scalar weights (f32, bf16)", user::conv3x3),
        case!(
            "cross_entropy",
            "a user's cross-entropy over a long vocabulary: online log-sum-exp in chunks, the target logit gathered by a loaded index, an ignored label",
            user::cross_entropy
        ),
        case!(
            "moe_expert",
            "a user's mixture-of-experts step: token rows gathered through loaded indices into a dot, a per-token gate, atomic_add scatter",
            user::moe_expert
        ),
        case!("causal_conv1d", "a user's causal depthwise convolution along the sequence with SiLU (Mamba's short convolution)", user::causal_conv1d),
        case!("transpose", "a user's tiled transpose: trans of a loaded tile and of its mask", user::transpose),
        case!(
            "colmajor",
            "a user's affine map over a column-major matrix (every access along dimension 0: read in columns), column sums and row maxima (f32, bf16)",
            user::colmajor
        ),
        case!(
            "colmajor_matmul",
            "a user's product of two column-major matrices through pointers (both tiles read along dimension 0; Hopper: B into a K-major slot in pieces), odd sizes (bf16, f16)",
            user::colmajor_matmul
        ),
        case!(
            "func_gemm",
            "#[func]s in another module: a GEMM's tile pointers and masks (a tuple), bias + activation (functions calling functions), a dtype-generic cast, a store",
            funcs::gemm
        ),
        case!("func_lse", "a long-row log-sum-exp whose online update is a #[func] returning a tuple", funcs::lse),
        case!("func_rowdot", "a #[func] holding a loop over a constant block size; one written below its kernel", funcs::rowdot),
        case!("func_library", "the kernel library's public #[func]s (activation, GELU) called by path from another crate", funcs::library),
        case!(
            "func_segment_view",
            "a #[func] returning a view built at a loaded offset, with the segment's length; another taking the view into a dot loop",
            funcs::segment_view
        ),
        case!(
            "func_segment_mean",
            "a #[func]'s view at a loaded offset reduced over its rows in blocks (no dot): per-segment means of a packed batch, odd widths",
            funcs::segment_mean
        ),
        case!(
            "invariant_operands",
            "dot operands loaded once before a loop (B, and C read through trans) and a loop tile read by two dots",
            fused::invariant_operands
        ),
        case!(
            "control_flow",
            "for (3 range forms, nested, loop-carried tiles/scalars), if/else if on run-time scalars, if on constexpr, static_assert, cdiv",
            control::control_flow
        ),
        case!("cdiv", "cdiv on tiles", control::cdiv_tiles),
        case!("print", "print runs", control::print_runs),
        case!("generic_softmax", "<T: Float> kernel computing in f32 (f32/f16/bf16)", control::generic_softmax),
    ]
}

/// Run one case, turning a panic into an `Err`.
pub fn run_case(case: &Case, dev: &Device, seed: u64) -> Result<(), String> {
    let run = case.run;
    util::set_float_model(util::FloatModel::of(dev));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(dev, seed))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(format!("case `{}` seed {seed}: PANICKED: {msg}", case.name))
        }
    }
}

/// Run one case on a separate thread and give up after `limit`: a hanging
/// kernel (or reference) is a failed case instead of a stuck run. The
/// abandoned thread keeps running until the process exits.
pub fn run_case_with_timeout(case: &Case, dev: &Device, seed: u64, limit: std::time::Duration) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (c, d) = (*case, dev.clone());
    std::thread::Builder::new()
        .name(format!("conformance-{}", case.name))
        .spawn(move || {
            let _ = tx.send(run_case(&c, &d, seed));
        })
        .map_err(|e| format!("case `{}`: cannot spawn its thread: {e}", case.name))?;
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => Err(format!("case `{}` seed {seed}: did not finish within {:?} (hang?)", case.name, limit)),
    }
}

/// Outcome of one case.
pub struct Outcome {
    pub name: &'static str,
    pub result: Result<(), String>,
    pub seconds: f64,
}

/// Run every case (each with a seed derived from `seed` and its name) and
/// return the outcomes in order.
pub fn run_all(dev: &Device, seed: u64) -> Vec<Outcome> {
    cases()
        .iter()
        .map(|c| {
            let t = std::time::Instant::now();
            let result = run_case_with_timeout(c, dev, case_seed(seed, c.name), std::time::Duration::from_secs(120));
            Outcome { name: c.name, result, seconds: t.elapsed().as_secs_f64() }
        })
        .collect()
}

/// The seed a case gets from the run's seed: reproduce one case with
/// `(case.run)(dev, case_seed(seed, name))`.
pub fn case_seed(seed: u64, name: &str) -> u64 {
    name.bytes().fold(seed, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// A table of outcomes (case, result, time) for printing.
pub fn report(outcomes: &[Outcome]) -> String {
    let mut s = format!("{:<20} {:<6} {:>8}\n", "case", "result", "seconds");
    for o in outcomes {
        s += &format!("{:<20} {:<6} {:>8.3}\n", o.name, if o.result.is_ok() { "ok" } else { "FAIL" }, o.seconds);
    }
    for o in outcomes {
        if let Err(e) = &o.result {
            s += &format!("\nFAILED {}: {e}\n", o.name);
        }
    }
    s
}

/// Run the whole suite (or `FERROTILE_CASE=name[,name..]`) on `dev` with the seed
/// from `FERROTILE_SEED` or the clock (printed, so a run can be
/// reproduced), print the report, and panic naming every failed case.
/// `limit`: run each case on its own thread and fail it after that long
/// (a hang becomes a failure); `None` runs cases on the calling thread.
pub fn run_suite(dev: &Device, limit: Option<std::time::Duration>) {
    let seed = std::env::var("FERROTILE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed));
    let only = std::env::var("FERROTILE_CASE").ok();
    let name = dev.name();
    println!("conformance on {name} with seed {seed} (FERROTILE_SEED={seed} reproduces it)");
    let all = cases();
    assert!(all.len() >= 20, "the suite lost cases: {}", all.len());
    let mut outcomes = vec![];
    for c in all.iter().filter(|c| only.as_deref().is_none_or(|o| o.split(',').any(|n| n == c.name))) {
        let t = std::time::Instant::now();
        let s = case_seed(seed, c.name);
        let result = match limit {
            Some(l) => run_case_with_timeout(c, dev, s, l),
            None => run_case(c, dev, s),
        };
        outcomes.push(Outcome { name: c.name, result, seconds: t.elapsed().as_secs_f64() });
    }
    assert!(!outcomes.is_empty(), "no case matches FERROTILE_CASE={only:?}");
    println!("{}", report(&outcomes));
    let failed: Vec<&str> = outcomes.iter().filter(|o| o.result.is_err()).map(|o| o.name).collect();
    assert!(failed.is_empty(), "{} conformance case(s) failed on {name} with seed {seed}: {failed:?}", failed.len());
}
