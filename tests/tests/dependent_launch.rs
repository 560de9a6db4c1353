//! Programmatic dependent launch (`PtxOptions::dependent_launch`, on in the
//! CUDA runtime for sm_90 and newer; `FERROTILE_PDL=0` turns it off).
//!
//! Offline: with the option, an sm_90 kernel's first instructions — before
//! the prologue and every global access — are `griddepcontrol.wait` (the
//! grids it depends on have completed, their writes visible) and then
//! `griddepcontrol.launch_dependents`; without it, or for sm_80, neither
//! appears, and ptxas assembles the sm_90 text. On CUDA (skipped without a
//! driver): chains of kernels each reading what the one before wrote — a
//! long producer and two wide consumers — are exact launched one after
//! another and replayed as a captured graph, where a consumer scheduled
//! early that did not wait would read the producer's input. (The library's
//! split-K products and their reductions are such chains too: its tests on
//! CUDA run with the option.)

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::specialize;
use ferrotile::prelude::*;
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::kernels::spin;

/// `y = 3·x + 1`, one 256-element block per program.
#[kernel]
fn affine3(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = program_id(0) * 256 + arange(0, 256);
    let mask = offs < n;
    store(y + offs, load(x + offs, mask, 0.0) * 3.0 + 1.0, mask);
}

#[test]
fn the_wait_comes_first_and_only_where_asked() {
    let k = affine3::ir();
    let spec = specialize(k, &[], &[]).unwrap();
    let base = |sm| PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(sm, 4, k.params.len()) };
    let on = emit(&spec, &PtxOptions { dependent_launch: true, ..base(90) }).unwrap();
    assert!(on.dependent_launch);
    let lines: Vec<&str> = on.text.lines().map(str::trim).collect();
    let wait = lines.iter().position(|l| *l == "griddepcontrol.wait;").expect("the wait");
    assert_eq!(lines[wait + 1], "griddepcontrol.launch_dependents;");
    // nothing but declarations before it: no instruction, no global access
    let body = lines.iter().position(|l| *l == "{").unwrap();
    assert!(lines[body + 1..wait].iter().all(|l| l.starts_with(".reg")), "{:?}", &lines[body + 1..wait]);
    assert!(lines[wait..].iter().any(|l| l.contains("ld.global")));
    // the other side alone: the trigger first, no wait
    let trig = emit(&spec, &PtxOptions { launch_dependents: true, ..base(90) }).unwrap();
    assert!(!trig.dependent_launch && !trig.text.contains("griddepcontrol.wait"));
    let tl: Vec<&str> = trig.text.lines().map(str::trim).collect();
    let at = tl.iter().position(|l| *l == "griddepcontrol.launch_dependents;").expect("the trigger");
    assert!(tl[tl.iter().position(|l| *l == "{").unwrap() + 1..at].iter().all(|l| l.starts_with(".reg")));
    for (sm, dl) in [(90, false), (80, true), (80, false)] {
        let p = emit(&spec, &PtxOptions { dependent_launch: dl, launch_dependents: dl, ..base(sm) }).unwrap();
        assert!(!p.dependent_launch && !p.text.contains("griddepcontrol"), "sm_{sm}, option {dl}");
    }
    if let Some(px) = ptxas::find_or_skip() {
        ptxas::assemble(&px, &on.text, 90).unwrap();
        ptxas::assemble(&px, &trig.text, 90).unwrap();
    }
}

#[test]
fn chained_kernels_read_what_the_one_before_wrote_on_cuda() {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => return println!("skipped: {e}"),
    };
    let n = 256 * 264 + 7;
    let mut x = dev.full(n, 0.0f32).unwrap();
    let mut y = dev.full(n, f32::NAN).unwrap();
    let mut z = dev.full(n, f32::NAN).unwrap();
    // each round: x settles to 2k (long), y = 3x + 1, z = 3y + 1 — the
    // consumers dependent launches, wide enough to be scheduled while the
    // producer runs (`FERROTILE_PDL_ALL=1`: the producer too)
    let round = |k: f32, x: &mut Buffer<f32>, y: &mut Buffer<f32>, z: &mut Buffer<f32>| -> ferrotile::Result<()> {
        spin::launch(&dev, n.div_ceil(128) as u32, x, n as i32, k, 4000)?;
        let dep = LaunchConfig::new([n.div_ceil(256) as u32, 1, 1]).dependent_launch(true);
        affine3::launch(&dev, dep, x, y, n as i32)?;
        affine3::launch(&dev, dep, y, z, n as i32)
    };
    let want = |k: f32| 3.0 * (3.0 * 2.0 * k + 1.0) + 1.0;
    for k in [1.0f32, 5.0, -2.0] {
        round(k, &mut x, &mut y, &mut z).unwrap();
        let got = z.to_vec().unwrap();
        assert!(got.iter().all(|&v| (v - want(k)).abs() < 1e-3), "k = {k}: {:?}", &got[..4]);
    }
    // the same chain as a graph, replayed: x starts from 2·(−2) each time
    // and settles to 2·7
    let g = dev.capture(|| round(7.0, &mut x, &mut y, &mut z)).unwrap();
    for _ in 0..3 {
        x.copy_from_slice(&vec![-4.0f32; n]).unwrap();
        g.replay().unwrap();
        let got = z.to_vec().unwrap();
        assert!(got.iter().all(|&v| (v - want(7.0)).abs() < 1e-3), "graph: {:?}", &got[..4]);
    }
}
