//! WGSL: a written 16-bit buffer is a plain `array<u32>` written a word at
//! a time exactly when every store into it provably writes whole aligned
//! words (`backends/src/wgsl/emit/memory.rs::mark_word_buffers`); any
//! store that may write half a word keeps the buffer atomic (its stores
//! are compare-exchanges of their word). Loads of provable pairs read one
//! word per pair (`word_pairs`) instead of extracting each element. Correctness of both paths is the
//! conformance suite's and the library tests' on wgpu; this pins which
//! path a launch gets.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::wgsl::{self, WgslOptions};
use ferrotile_kernels::softmax::softmax_row;

/// The declaration of `softmax_row`'s output buffer (binding 1) for a
/// launch whose integer arguments are divisible by `div`.
fn out_decl(dt: DType, div: u32, word_stores: bool) -> (String, String) {
    let k = softmax_row::ir();
    let spec = specialize(k, &[1024], &[dt]).unwrap();
    let o = WgslOptions { arg_div: vec![div; guarded_params(k)], word_stores, ..WgslOptions::default() };
    let text = wgsl::emit(&spec, &o).unwrap().text;
    let decl = text.lines().find(|l| l.contains("@binding(1)")).unwrap().to_string();
    (decl, text)
}

#[test]
fn aligned_rows_store_whole_words() {
    for dt in [DType::BF16, DType::F16] {
        let (decl, text) = out_decl(dt, 16, true);
        assert!(decl.contains("array<u32>"), "{dt}: {decl}");
        assert!(!text.contains("atomic"), "{dt}: no atomic access is left");
        assert!(text.contains("b1[") && text.contains(" << 16u);"), "{dt}: pairs stored as one word");
        assert!(!text.contains("extractBits"), "{dt}: pairs loaded as one word, no element extracted alone");
    }
}

#[test]
fn rows_that_may_start_mid_word_stay_atomic() {
    // an odd row stride: a row may start in the second half of a word
    // that the previous row's program also writes
    let (decl, text) = out_decl(DType::BF16, 1, true);
    assert!(decl.contains("array<atomic<u32>>"), "{decl}");
    assert!(text.contains("atomicCompareExchangeWeak"), "half-word stores by compare-exchange");
    assert!(text.contains("extractBits"), "and elements loaded one at a time");
}

#[test]
fn the_option_restores_the_atomic_path() {
    let (decl, _) = out_decl(DType::BF16, 16, false);
    assert!(decl.contains("array<atomic<u32>>"), "{decl}");
    // f32 buffers were never atomic
    let (decl, _) = out_decl(DType::F32, 16, true);
    assert!(decl.contains("array<f32>") || decl.contains("array<vec4<f32>>"), "{decl}");
}
