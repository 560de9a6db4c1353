//! The autotuner on the CPU interpreter: invalid configurations are pruned
//! with their reason, a winner is chosen and reused without re-tuning, and
//! the choice persists on disk for a new process (a new Autotuner).

use ferrotile::prelude::*;
use ferrotile::{Autotuner, TuneConfig};
use std::cell::Cell;

mod common;
use common::scale;

#[test]
fn autotuner_prunes_chooses_and_remembers() {
    let dir = std::env::temp_dir().join(format!("ferrotile-autotune-test-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let n = 10_000usize;
    let x = dev.from_slice(&(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let mut y = dev.zeros::<f32>(n).unwrap();
    let configs = vec![
        TuneConfig::new(4).with("BLOCK", 100), // not a power of two: pruned
        TuneConfig::new(4).with("BLOCK", 64),
        TuneConfig::new(4).with("BLOCK", 1024),
    ];
    let launches = Cell::new(0);
    let go = |t: &Autotuner, y: &mut ferrotile::Buffer<f32>| {
        t.run(&dev, &format!("n={n}"), |c| {
            launches.set(launches.get() + 1);
            let b = c.get("BLOCK")?;
            scale::launch(&dev, LaunchConfig::new([(n as u32).div_ceil(b as u32), 1, 1]).num_warps(c.num_warps), &x, y, n as i32, b as i32)
        })
        .unwrap()
    };
    let t = Autotuner::new("scale", configs.clone()).reps(3);
    let best = go(&t, &mut y);
    assert_ne!(best.get("BLOCK").unwrap(), 100);
    let rep = t.report(&dev, &format!("n={n}")).expect("tuned in this process");
    assert_eq!(rep.pruned.len(), 1);
    assert!(rep.pruned[0].1.contains("power of two"), "{}", rep.pruned[0].1);
    assert_eq!(rep.timings.len(), 2);
    let out = y.to_vec().unwrap();
    assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    // second call: no tuning, exactly one launch
    let before = launches.get();
    assert_eq!(go(&t, &mut y), best);
    assert_eq!(launches.get(), before + 1);
    // a fresh tuner (as in a new process) reads the choice from disk
    let t2 = Autotuner::new("scale", configs);
    let before = launches.get();
    assert_eq!(go(&t2, &mut y), best);
    assert_eq!(launches.get(), before + 1, "the disk cache should avoid re-tuning");
    assert!(t2.report(&dev, &format!("n={n}")).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Launch options out of range are `Launch` errors naming the option.
#[test]
fn bad_launch_options_are_errors() {
    let dev = Device::cpu();
    let x = dev.zeros::<f32>(64).unwrap();
    let mut y = dev.zeros::<f32>(64).unwrap();
    for (cfg, what) in [
        (LaunchConfig::new([1, 1, 1]).num_warps(3), "num_warps"),
        (LaunchConfig::new([1, 1, 1]).num_warps(64), "num_warps"),
        (LaunchConfig::new([1, 1, 1]).num_stages(0), "num_stages"),
        (LaunchConfig::new([1, 1, 1]).num_stages(17), "num_stages"),
        (LaunchConfig::new([3, 1, 1]).cluster(2), "cluster"),
        (LaunchConfig::new([4, 1, 1]).cluster(4), "cluster"),
        (LaunchConfig::new([4, 1, 1]).cluster(0), "cluster"),
    ] {
        match scale::launch(&dev, cfg, &x, &mut y, 64, 64) {
            Err(ferrotile::Error::Launch { msg, .. }) => assert!(msg.contains(what), "{msg}"),
            other => panic!("{cfg:?}: expected a launch error about {what}, got {other:?}"),
        }
    }
    scale::launch(&dev, LaunchConfig::new([1, 1, 1]).num_stages(1), &x, &mut y, 64, 64).unwrap();
    // clusters are a hint: any backend runs a clustered launch
    scale::launch(&dev, LaunchConfig::new([2, 1, 1]).cluster(2), &x, &mut y, 64, 64).unwrap();
}

/// An autotuner without configurations is an error value, not a panic.
#[test]
fn an_empty_autotuner_is_an_error() {
    let dev = Device::cpu();
    let t = Autotuner::new("empty", vec![]);
    match t.run(&dev, "k", |_| Ok(())) {
        Err(ferrotile::Error::Launch { msg, .. }) => assert!(msg.contains("no configurations"), "{msg}"),
        other => panic!("expected a launch error, got {other:?}"),
    }
}

/// A tuned call costs one lookup, not work per candidate: with 2000
/// candidates it is as cheap as with 2 (it used to hash every candidate's
/// text on every call — ~1 µs per candidate, more than a decode kernel).
#[test]
fn a_tuned_call_does_not_grow_with_the_candidates() {
    let dir = std::env::temp_dir().join(format!("ferrotile-autotune-cost-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let per_call = |n: usize| -> f64 {
        let t = Autotuner::new("cost", (0..n).map(|i| TuneConfig::new(4).with("BLOCK", i as i64)).collect()).reps(1);
        let key = format!("n={n}");
        t.run(&dev, &key, |_| Ok(())).unwrap();
        // (best of five batches: robust to a busy machine)
        (0..5)
            .map(|_| {
                let s = std::time::Instant::now();
                for _ in 0..2000 {
                    t.run(&dev, &key, |_| Ok(())).unwrap();
                }
                s.elapsed().as_secs_f64() / 2000.0
            })
            .fold(f64::INFINITY, f64::min)
    };
    let (few, many) = (per_call(2), per_call(2000));
    assert!(many < 10.0 * few + 2e-6, "a tuned call: {:.2} µs with 2000 candidates, {:.2} µs with 2", many * 1e6, few * 1e6);
    let _ = std::fs::remove_dir_all(&dir);
}
