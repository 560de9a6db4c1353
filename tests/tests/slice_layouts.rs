//! Slice layouts ([`ferrotile_backends::plan::slices`]): row statistics of
//! multi-row programs stay in the registers their reduction leaves them in
//! and broadcast back into their rows without shared memory. The results
//! are checked on every device by the conformance case `row_stats`; here,
//! the code: fewer barriers than with every value in its shape's default
//! layout, and ptxas accepts it.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::conformance::reduce::k_row_stats;

fn bars(text: &str) -> usize {
    text.matches("bar.sync").count()
}

#[test]
fn row_statistics_broadcast_back_without_shared_memory() {
    let k = k_row_stats::ir();
    let px = ptxas::find_or_skip();
    for (r, b, c, warps) in [(8, 256, 64, 4), (4, 1024, 256, 8), (16, 64, 32, 2)] {
        let spec = specialize(k, &[r, b, c], &[]).unwrap();
        let mut counts = vec![];
        for slices in [false, true] {
            let opts = PtxOptions { arg_div16: vec![true; guarded_params(k)], slice_layouts: slices, ..PtxOptions::new(90, warps, k.params.len()) };
            let p = emit(&spec, &opts).unwrap();
            counts.push(bars(&p.text));
            if let Some(px) = &px {
                if let Err(log) = ptxas::assemble(px, &p.text, 90) {
                    panic!("ptxas R={r} B={b} slices={slices}: {log}");
                }
            }
        }
        println!("R={r} B={b} C={c} warps={warps}: bar.sync {} → {}", counts[0], counts[1]);
        let _ = DType::F32;
        assert!(counts[1] < counts[0], "R={r} B={b}: slices should save barriers: {counts:?}");
    }
}
