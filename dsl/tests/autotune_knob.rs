//! `Autotuner::finalist_knob` on the CPU interpreter (its own process: the
//! tests set `FERROTILE_CACHE_DIR`).

use ferrotile::prelude::*;
use ferrotile::{Autotuner, TuneConfig};
use std::cell::Cell;

mod common;
use common::scale;

/// `Autotuner::finalist_knob`: the first pass runs every configuration with
/// the knob's base value only; the finalists are re-timed with the other
/// values too, and a choice carrying one of them is kept (and read back
/// from disk by a fresh tuner without re-tuning).
#[test]
fn a_finalist_knob_is_tried_on_the_finalists_only() {
    let dir = std::env::temp_dir().join(format!("ferrotile-autotune-knob-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let n = 20_000usize;
    let x = dev.from_slice(&(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let mut y = dev.zeros::<f32>(n).unwrap();
    let configs: Vec<TuneConfig> = [64, 128, 256, 512, 1024].iter().map(|&b| TuneConfig::new(4).with("BLOCK", b)).collect();
    // `ONCE = 0` (the base) launches the kernel three times over, `1` once:
    // the knob's other value is faster for every configuration
    let (first_pass, with_knob) = (Cell::new(0), Cell::new(0));
    let go = |t: &Autotuner, y: &mut ferrotile::Buffer<f32>| {
        t.run(&dev, &format!("n={n}"), |c| {
            let once = c.get("ONCE")? == 1;
            if once {
                with_knob.set(with_knob.get() + 1);
            } else {
                first_pass.set(first_pass.get() + 1);
            }
            let b = c.get("BLOCK")?;
            for _ in 0..if once { 1 } else { 3 } {
                scale::launch(&dev, LaunchConfig::new([(n as u32).div_ceil(b as u32), 1, 1]), &x, y, n as i32, b as i32)?;
            }
            Ok(())
        })
        .unwrap()
    };
    let t = Autotuner::new("scale_knob", configs.clone()).reps(4).finalist_knob("ONCE", 0, &[1]);
    assert!(t.configs().iter().all(|c| c.get("ONCE").unwrap() == 0));
    let best = go(&t, &mut y);
    assert_eq!(best.get("ONCE").unwrap(), 1, "the faster value of the knob: {best}");
    let rep = t.report(&dev, &format!("n={n}")).unwrap();
    // every configuration once with the base value; the three finalists
    // also with the other one
    assert_eq!(rep.timings.len(), configs.len() + 3);
    assert_eq!(rep.timings.iter().filter(|(c, _)| c.get("ONCE").unwrap() == 1).count(), 3);
    assert!(first_pass.get() > 0 && with_knob.get() > 0);
    let out = y.to_vec().unwrap();
    assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    // a fresh tuner takes the remembered choice, knob value and all
    let t2 = Autotuner::new("scale_knob", configs.clone()).reps(4).finalist_knob("ONCE", 0, &[1]);
    let before = first_pass.get() + with_knob.get();
    assert_eq!(go(&t2, &mut y), best);
    assert_eq!(first_pass.get() + with_knob.get(), before + 1, "the disk cache should avoid re-tuning");
    // other knob values are another candidate list: tuned again
    let t3 = Autotuner::new("scale_knob", configs.clone()).reps(4).finalist_knob("ONCE", 0, &[1, 2]);
    let before = first_pass.get();
    go(&t3, &mut y);
    assert!(first_pass.get() >= before + configs.len(), "a new knob tunes again");
    let _ = std::fs::remove_dir_all(&dir);
}
