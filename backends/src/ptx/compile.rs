//! The PTX backend's driver: checks the options, runs the IR passes of the
//! PTX target (`ferrotile_ir::passes`: guards, view lowering except the
//! block loads a TMA copy serves, then software pipelining), computes the plans every
//! emitter file reads — the layout of each tile shape (`assign`), the axis
//! facts (`axis`), the operand rings (`async_copy`), the tensor-map views
//! (`tma`), warp specialization (`warp_spec`) — and hands them to the
//! printer (`emit`). Decisions are made here and in those analyses; `emit`
//! only writes them out.

use super::emit::{self, Plans};
use super::{assign, async_copy, tma, warp_spec};
use super::{PtxKernel, PtxOptions};
use crate::plan::axis;
use crate::EmitError;
use ferrotile_ir::passes;
use ferrotile_ir::*;
use std::collections::{HashMap, HashSet};

/// Specialized IR → one PTX `.entry` (see `emit` for what the text
/// guarantees).
pub fn emit(k: &Kernel, o: &PtxOptions) -> Result<PtxKernel, EmitError> {
    let err = |msg: String| EmitError { kernel: k.name.clone(), line: 0, msg };
    if !k.specialized {
        return Err(err("the PTX backend needs a specialized kernel".into()));
    }
    if !(o.num_warps.is_power_of_two() && (1..=32).contains(&o.num_warps)) {
        return Err(err(format!("num_warps must be a power of two in 1..=32, got {}", o.num_warps)));
    }
    if o.sm != 80 && o.sm != 90 {
        return Err(err(format!("unsupported target sm_{}; ferrotile emits sm_80 and sm_90", o.sm)));
    }
    let has_views = k.values.iter().any(|v| matches!(v.ty, Type::View { .. }));
    let view_axis = if has_views { axis::analyze(k, &o.arg_div, &o.arg_one) } else { HashMap::new() };
    let tma_views = if has_views && o.tma && o.mma && o.wgmma && o.sm >= 90 { tma::views(k, &view_axis, o.tma_terms, o.tma_dynamic) } else { HashMap::new() };
    // (strides the launch proves to be 1: transposed views load in storage order)
    let unit = |v: V| view_axis.get(&v).is_some_and(|i| i.unit);
    // The IR passes of the PTX target: views lowered to pointer accesses
    // except the block loads a TMA copy serves, then pipelining. (They
    // keep every `view(..)` op and the values it reads, so `tma_views` stays valid.)
    // (the layout plan of the kernel as written: which dots run on
    // `wgmma`, for the TMA choice and the chained-dot rotation)
    let pre_layouts = (o.rotate_chains || !tma_views.is_empty()).then(|| {
        assign::plan(
            k,
            o.num_warps,
            o.mma,
            o.wgmma && o.sm >= 90,
            &async_copy::kmajor_b_sources(k, &tma_views, &|_| false),
            o.mma_i8,
            o.register_operands,
            o.operand_layouts,
        )
    });
    let kept = pre_layouts.as_ref().map_or_else(HashSet::new, |layouts| tma_block_loads(k, o, &tma_views, layouts));
    // (the views those loads read are checked on the host, against the
    // tensor maps built per launch, instead of in the kernel — except
    // dynamic ones, whose bounds the kernel computes: guarded there)
    let mut host_checked: HashSet<V> = HashSet::new();
    k.walk(&mut |op| {
        if let OpKind::LoadBlock { view, .. } = &op.kind {
            if kept.contains(&op.results[0]) && !tma_views.get(view).is_some_and(|t| t.dynamic) {
                host_checked.insert(*view);
            }
        }
    });
    // (chained dots rotated only where they run on `wgmma`: an `mma.sync`
    // is synchronous, and its register-A path wants the chained dot's
    // operand from the same iteration — measured: a rotated `mma.sync`
    // dQ loop of the attention backward ran 1.7× slower)
    let on_wgmma = |s: &[u32]| pre_layouts.as_ref().is_some_and(|p| p.mma(s).is_some_and(|g| g.wgmma));
    let rotate: Option<passes::rotate_chains::Accept> = o.rotate_chains.then_some(&on_wgmma);
    let rotated = rotate.map_or(0, |a| passes::rotate_chains::count(k, a));
    let k = &*passes::run(
        k,
        &passes::PassOptions::ptx(o.safety, &|v| host_checked.contains(&v), &|r| kept.contains(&r), o.pipeline)
            .every_loop(o.pipeline_every_loop)
            .split_masks(o.split_masks)
            .branch_masks(o.branch_masks)
            .rotate_chains(rotate)
            .private_index(o.slice_layouts && o.broadcast_slices)
            .remat_widened(o.remat_widened.then_some(o.num_warps * 32))
            .proven_masks(&o.proven_masks)
            .unit(&unit),
    );
    let facts = axis::analyze_all(k, &o.arg_div, &o.arg_one);
    let vec = vector_elems(k, &facts);
    // (with `operand_layouts`, a B loaded through pointers that run along
    // K counts as arriving K-major: the decode form `outᵀ = Wᵀ·xᵀ` of a
    // small-M product, whose narrow `xᵀ` then takes `wgmma` — its
    // elements copied one by one into a K-major slot — so that the
    // computed weight tile can be its register A)
    let along_k = |p: V| o.operand_layouts && facts.get(&p).is_some_and(|f| f.dims.len() == 2 && f.dim(0).contig > 1 && f.dim(1).contig == 1);
    let plan = assign::plan(
        k,
        o.num_warps,
        o.mma,
        o.wgmma && o.sm >= 90,
        &async_copy::kmajor_b_sources(k, &tma_views, &along_k),
        o.mma_i8,
        o.register_operands,
        o.operand_layouts,
    )
    .with_load_runs(k, &facts);
    let plan = if o.column_layouts { plan.with_load_columns(k, &facts) } else { plan };
    let axis: HashMap<V, axis::Info> = facts.iter().map(|(v, f)| (*v, f.last())).collect();
    let mut ring_plan =
        async_copy::plan(k, &plan, &tma_views, o.invariant_slots && !o.warp_specialize && o.cluster == 1, o.cp_invariant_slots, o.invariant_a_regs);
    if !o.warp_specialize && o.cluster == 1 && o.inflight_register_a {
        async_copy::register_a_inflight(k, &plan, &mut ring_plan);
    }
    if !o.warp_specialize && o.cluster == 1 && o.late_prefetch {
        async_copy::late_prefetch(k, &mut ring_plan, o.num_warps);
    }
    // (the producer is a 33rd warp at most; TMA rings feed wgmma, whose
    // warpgroups need num_warps % 4 == 0)
    // (a whole producer warpgroup: at most 32 warps in all)
    // (clusters: the plan also says which copies are uniform across a
    // cluster — kept as the stream structure only with `warp_specialize`)
    // (a dynamic view's copies: the producer computes the view too)
    let dynamic: HashSet<V> = tma_views.iter().filter(|(_, t)| t.dynamic).map(|(v, _)| *v).collect();
    let ws = if (o.warp_specialize || o.cluster == 2) && o.num_warps.is_multiple_of(4) && o.num_warps <= 16 {
        warp_spec::plan(k, &ring_plan, &dynamic)
    } else {
        None
    };
    let values =
        if o.slice_layouts { crate::plan::slices::assign(k, &mut |s| plan.layout(s, o.num_warps, vec), o.broadcast_slices) } else { Default::default() };
    // (how many values the backward rule placed: 0 where it changed nothing)
    let broadcast_values = if o.slice_layouts && o.broadcast_slices {
        let forward = crate::plan::slices::assign(k, &mut |s| plan.layout(s, o.num_warps, vec), false);
        values.iter().filter(|(v, l)| forward.get(v) != Some(l)).count() as u32
    } else {
        0
    };
    // (accumulators that another plan holds elsewhere stay as they are)
    let partial = if o.partial_accumulators {
        crate::plan::partial::assign(k, &mut |s| plan.layout(s, o.num_warps, vec), &|v| values.contains_key(&v) || ring_plan.class_of(v).is_some())
    } else {
        Default::default()
    };
    let mut p = emit::write(Plans { kernel: k, vec, layouts: plan, axis, facts, rings: ring_plan, tma_views, warp_spec: ws, values, partial }, o)?;
    p.broadcast_slices = broadcast_values;
    p.rotated_loops = rotated;
    Ok(p)
}

/// The `load_block`s a TMA copy serves, which view lowering keeps: of a
/// view a tensor map describes (`tma_views`), read by `dot`s that the
/// layout plan puts on `wgmma`, in a slot shape the bulk copy can fill
/// (`async_copy` decides) — used once, or (16-bit tiles) by several such
/// dots, directly or through a `trans`, from one slot laid out as the view
/// stores the tile (`AsyncPlan::flipped`; 8-bit tiles only once, as a B
/// through a `trans`: stored along K).
fn tma_block_loads(k: &Kernel, o: &PtxOptions, tma_views: &HashMap<V, tma::TmaView>, layouts: &assign::Plan) -> HashSet<V> {
    if tma_views.is_empty() {
        return HashSet::new();
    }
    let shape = |v: V| -> Vec<u32> { k.ty(v).shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect() };
    let mut view_of: HashMap<V, V> = HashMap::new();
    let mut uses: HashMap<V, usize> = HashMap::new();
    let mut tma_slot: HashSet<V> = HashSet::new();
    // (8-bit tiles — i8, fp8 — read through `trans` as the B of dots: the
    // readings an 8-bit shared slot may have; `wgmma` reads them K-major
    // only)
    let (mut dot_b, mut readers): (HashSet<V>, HashMap<V, Vec<Option<V>>>) = Default::default();
    k.walk(&mut |op| {
        if let OpKind::LoadBlock { view, .. } = &op.kind {
            view_of.insert(op.results[0], *view);
        }
        if let OpKind::Dot { b, .. } = &op.kind {
            dot_b.insert(*b);
        }
        for x in op.kind.operands() {
            readers.entry(x).or_default().push(matches!(op.kind, OpKind::Trans { .. }).then(|| op.results[0]));
        }
        if let OpKind::Dot { a, b, .. } = &op.kind {
            if layouts.mma(&shape(op.results[0])).is_some_and(|g| g.wgmma) {
                for (x, is_b) in [(*a, false), (*b, true)] {
                    let es = k.ty(x).elem().map_or(2, |e| e.dtype().size_bytes() as u32);
                    let Some(inner) = view_of.get(&x).and_then(|v| tma_views.get(v)).map(|t| t.inner) else { continue };
                    let lay = async_copy::wgmma_slot(es, is_b, Some(inner), &shape(x));
                    if async_copy::tma_slot(lay, &shape(x), inner) {
                        tma_slot.insert(x);
                    }
                }
            }
        }
        for x in op.kind.operands() {
            *uses.entry(x).or_default() += 1;
        }
    });
    // (a tile with several readings, or read through a `trans`: one slot
    // laid out as the view stores it, as `async_copy` makes it)
    let shared = async_copy::shared_slot_sources(k, layouts);
    let shared_ok = |r: V| {
        let Some(i) = view_of.get(&r).and_then(|v| tma_views.get(v)).map(|t| t.inner) else { return false };
        let es = k.ty(r).elem().map_or(0, |e| e.dtype().size_bytes() as u32);
        let byte_ok =
            es == 1 && i != 0 && readers.get(&r).is_some_and(|u| u.len() == 1 && u[0].is_some_and(|t| dot_b.contains(&t) && uses.get(&t) == Some(&1)));
        let lay = async_copy::SlotLayout::Swizzled { es, transposed: i == 0 };
        shared.contains(&r) && (es == 2 || byte_ok) && async_copy::tma_slot(lay, &shape(r), i)
    };
    // (loop-invariant A tiles that stay in registers get no slot: lowered,
    // they load in vectors)
    let register_a = if o.lower_register_a && o.invariant_slots && !o.warp_specialize && o.cluster == 1 {
        async_copy::register_a_invariants(k, layouts, tma_views, o.invariant_a_regs)
    } else {
        HashSet::new()
    };
    view_of
        .iter()
        .filter(|(r, v)| tma_views.contains_key(v) && !register_a.contains(r) && ((uses.get(r) == Some(&1) && tma_slot.contains(r)) || shared_ok(**r)))
        .map(|(r, _)| *r)
        .collect()
}

/// How many consecutive elements a thread owns along the last dimension of
/// the canonical layouts: the widest access any tile load or store of the
/// kernel can make — 16 bytes of its element, within what its pointer's
/// contiguity and alignment and its mask's constancy prove
/// ([`axis::Info::access_width`], as each access is sized) — capped by the widest
/// 16-byte vector of the narrowest memory element. Where no access can be
/// wider than one element (rows of odd length or stride: `x + row · 777`),
/// each thread holds one element per repetition and a warp's scalar
/// accesses cover consecutive addresses; a thread owning eight consecutive
/// 2-byte elements, loaded one by one, made each warp instruction touch 16
/// sectors 16 bytes apart (H200, session 21: bf16 softmax over 777 columns
/// took longer than f32).
fn vector_elems(k: &Kernel, facts: &HashMap<V, axis::Facts>) -> u32 {
    let (mut min_es, mut widest, mut any) = (4u64, 1u64, false);
    k.walk(&mut |op| {
        let (OpKind::Load { ptr, mask, .. } | OpKind::Store { ptr, mask, .. }) = &op.kind else { return };
        let Some(e) = k.ty(*ptr).elem() else { return };
        let es = e.dtype().size_bytes().max(1) as u64;
        min_es = min_es.min(es);
        if k.ty(*ptr).rank() == 0 {
            return;
        }
        any = true;
        let Some(i) = facts.get(ptr).map(|f| f.last()) else { return };
        let k = mask.map_or(u64::MAX, |m| facts.get(&m).map_or(1, |f| f.last().constancy));
        widest = widest.max(i.access_width(es, k));
    });
    // (both powers of two)
    let cap = (16 / min_es.max(2)).min(8);
    if any {
        widest.min(cap) as u32
    } else {
        cap as u32
    }
}
