//! Ping-pong: the two consumer warpgroups of a warp-specialized kernel take
//! turns at the tensor cores ([`PtxOptions::pingpong`]).
//!
//! Takes the consumer stream of a kernel whose copies a producer warpgroup
//! issues (`warp_spec`) and whose consumers are two warpgroups (8 warps).
//! Every loop with a `dot` at the top level of its body runs a token
//! protocol on two named barriers, one per warpgroup (ids
//! [`PP_BARRIER`] and the next): a warpgroup *opens a turn* before the
//! first `wgmma` it issues in an iteration (`bar.sync` on its own barrier:
//! it waits for the token) and *closes it* — passes the token
//! (`bar.arrive` on the other's barrier) — before it next waits for an MMA,
//! meets a barrier, enters a nested region or reaches the end of the body.
//! So the MMAs a warpgroup issues back to back (attention's `Q·K_jᵀ` and
//! the previous block's `P·V`) go to the tensor cores as one batch, and
//! the other warpgroup issues its batch while this one runs the work that
//! reads the results (the softmax): one warpgroup's exponentials overlap
//! the other's MMAs instead of both warpgroups' softmaxes contending for
//! the same units while the tensor cores idle (FlashAttention-3's
//! inter-warpgroup schedule).
//!
//! Guarantees: the protocol is balanced — warpgroup 1 arrives once on
//! warpgroup 0's barrier before the loop, warpgroup 0 waits once on it
//! after the loop, and in between every turn is a wait on the own barrier
//! and an arrival on the other's — so each barrier phase pairs one wait of
//! one warpgroup with one arrival of the other, whatever the trip count
//! (zero included), and at most one arrival is outstanding per barrier.
//! Both warpgroups run the same instruction stream with the same uniform
//! trip counts, hence the same turns. A turn never spans a wait that
//! needs the other warpgroup (the consumers' `bar.sync 1`, a nested loop's
//! own protocol): it is closed first. The producer's mbarrier handshakes
//! are not affected — a slot a turn waits for was released by both
//! warpgroups' previous turns.
//!
//! Why a launch option rather than always: it only pays where each
//! warpgroup has independent MMAs to batch and enough work between waits
//! to hide the other's; otherwise it serializes the warpgroups' issue for
//! nothing.

use super::*;

/// The first of the two named barriers of the protocol (0 is the CTA's
/// barrier, 1 the consumers').
pub(super) const PP_BARRIER: u32 = 2;

/// Threads that meet at one of the protocol's barriers: both warpgroups.
const PP_THREADS: u32 = 256;

impl<'k> PtxWriter<'k> {
    /// Before a loop of the consumer stream: start the protocol if the loop
    /// body has a `dot` at its top level (warpgroup 1 hands the first turn
    /// to warpgroup 0). Returns whether it did.
    pub(super) fn pp_enter_loop(&mut self, body: &Block) -> bool {
        let Some(wg1) = self.pp.clone() else { return false };
        if self.role != Role::Consumer || !body.ops.iter().any(|o| matches!(o.kind, OpKind::Dot { .. })) {
            return false;
        }
        // (not `.aligned`: only warpgroup 1 executes it)
        self.line(format!("@{wg1} barrier.arrive {PP_BARRIER}, {PP_THREADS};"));
        true
    }

    /// After such a loop: warpgroup 0 takes the arrival the last turn of
    /// warpgroup 1 left on its barrier.
    pub(super) fn pp_leave_loop(&mut self) {
        let wg1 = self.pp.clone().expect("ping-pong");
        self.line(format!("@!{wg1} barrier.sync {PP_BARRIER}, {PP_THREADS};"));
    }

    /// Before a `wgmma` is issued: open a turn if this is the body of a
    /// loop that runs the protocol and no turn is open.
    // (immediate barrier ids under the warpgroup's predicate, hence the
    // non-`.aligned` forms: each warpgroup executes its own instruction)
    pub(super) fn pp_open(&mut self) {
        let Some(wg1) = self.pp.clone() else { return };
        if !self.pp_open && self.pp_depths.last() == Some(&self.depth) {
            self.line(format!("@!{wg1} barrier.sync {PP_BARRIER}, {PP_THREADS};"));
            self.line(format!("@{wg1} barrier.sync {}, {PP_THREADS};", PP_BARRIER + 1));
            self.pp_open = true;
        }
    }

    /// Close the open turn, if any: the other warpgroup may issue.
    pub(super) fn pp_close(&mut self) {
        if self.pp_open {
            let wg1 = self.pp.clone().expect("a turn opens only with ping-pong");
            self.line(format!("@!{wg1} barrier.arrive {}, {PP_THREADS};", PP_BARRIER + 1));
            self.line(format!("@{wg1} barrier.arrive {PP_BARRIER}, {PP_THREADS};"));
            self.pp_open = false;
        }
    }
}
