//! Snapshot tests of the IR text form: the generic and specialized IR of
//! every library kernel is compared with `tests/snapshots/*.ir`. A change in
//! lowering, typing or specialization shows up as a readable diff.
//! `FERROTILE_BLESS=1 cargo test -p ferrotile-tests --test ir_snapshots`
//! rewrites the snapshots after an intended change.

use ferrotile::ir::{specialize, DType, Kernel};
use std::path::PathBuf;

fn check(name: &str, text: &str) -> Result<(), String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("snapshots").join(format!("{name}.ir"));
    if std::env::var("FERROTILE_BLESS").is_ok() {
        std::fs::write(&path, text).unwrap();
        return Ok(());
    }
    let want = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e} (run with FERROTILE_BLESS=1 to create)", path.display()))?;
    if want != text {
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), text.lines().collect());
        let i = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
        return Err(format!("{name}: first difference at line {}:\n  want: {}\n  got:  {}", i + 1, w.get(i).unwrap_or(&"<eof>"), g.get(i).unwrap_or(&"<eof>")));
    }
    Ok(())
}

#[test]
fn library_ir_snapshots() {
    use ferrotile_kernels::norm::*;
    use ferrotile_kernels::softmax::*;
    let kernels: Vec<(&str, &'static Kernel, i64)> = vec![
        ("softmax_row", softmax_row::ir(), 1024),
        ("softmax_looped", softmax_looped::ir(), 2048),
        ("layer_norm_row", layer_norm_row::ir(), 1024),
        ("layer_norm_looped", layer_norm_looped::ir(), 2048),
        ("rms_norm_row", rms_norm_row::ir(), 1024),
        ("rms_norm_looped", rms_norm_looped::ir(), 2048),
    ];
    let mut errs = vec![];
    for (name, k, block) in kernels {
        // strip the file path and line numbers' absolute part: keep the text stable across checkouts
        if let Err(e) = check(&format!("{name}.generic"), &k.to_text()) {
            errs.push(e);
        }
        let s = specialize(k, &[block], &[DType::BF16]).unwrap();
        if let Err(e) = check(&format!("{name}.bf16"), &s.to_text()) {
            errs.push(e);
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}
