//! The compile-fail suite: every mistake a kernel author is likely to make
//! must be rejected at compile time with one error on the offending token
//! (`tests/ui/fail`), and a few well-formed kernels must compile, launch on
//! the CPU interpreter and produce the right results (`tests/ui/pass`).
//!
//! Regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p ferrotile-tests --test compile_fail`
//! and read every changed `.stderr` before committing it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
