//! The autotuner's disk cache recovers: a remembered choice that no longer
//! launches is tuned again (and the new choice remembered), and a cache
//! file that is not UTF-8 is set aside and rebuilt. Its own test binary,
//! one test: it points `FERROTILE_CACHE_DIR` (process-wide) at a directory
//! of its own.

use ferrotile::prelude::*;
use ferrotile::{Autotuner, TuneConfig};
use std::cell::Cell;

mod common;
use common::scale;

fn a_failing_cached_choice_is_retuned() {
    let dir = std::env::temp_dir().join(format!("ferrotile-retune-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let n = 4096usize;
    let x = dev.from_slice(&(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let mut y = dev.zeros::<f32>(n).unwrap();
    let configs = vec![TuneConfig::new(4).with("BLOCK", 64), TuneConfig::new(4).with("BLOCK", 256), TuneConfig::new(4).with("BLOCK", 1024)];
    // `refuse`: the block size this "process" cannot launch (standing in
    // for a configuration a newer compiler or another device rejects)
    let launches = Cell::new(0);
    let run = |refuse: i64, y: &mut ferrotile::Buffer<f32>| -> ferrotile::Result<i64> {
        let t = Autotuner::new("scale_retune", configs.clone()).reps(2);
        let c = t.run(&dev, "n=4096", |c| {
            launches.set(launches.get() + 1);
            let b = c.get("BLOCK")?;
            if b == refuse {
                return Err(ferrotile::Error::Backend { kernel: "scale".into(), msg: format!("BLOCK={b} refused") });
            }
            scale::launch(&dev, LaunchConfig::new([(n as u32).div_ceil(b as u32), 1, 1]), &x, y, n as i32, b as i32)
        })?;
        c.get("BLOCK")
    };
    // first process: tunes and remembers some choice
    let first = run(0, &mut y).unwrap();
    // second process: that choice now fails — re-tuned, not an error
    let second = run(first, &mut y).unwrap();
    assert_ne!(second, first);
    assert!(y.to_vec().unwrap().iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    // third process: the new choice was remembered — read from disk and
    // launched once, no tuning
    launches.set(0);
    let third = run(first, &mut y).unwrap();
    assert_eq!(third, second);
    assert_eq!(launches.get(), 1, "the re-tuned choice should come from the disk cache");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cache file that is not UTF-8 text is set aside (reported once) and a
/// new one is built, instead of the cache being silently off.
fn an_unreadable_cache_file_is_replaced() {
    let dir = std::env::temp_dir().join(format!("ferrotile-retune-test-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dev = Device::cpu();
    let n = 1024usize;
    let x = dev.from_slice(&vec![1.0f32; n]).unwrap();
    let mut y = dev.zeros::<f32>(n).unwrap();
    let configs = vec![TuneConfig::new(4).with("BLOCK", 128), TuneConfig::new(4).with("BLOCK", 512)];
    let launches = Cell::new(0);
    let run = |y: &mut ferrotile::Buffer<f32>| {
        let t = Autotuner::new("scale_utf8", configs.clone()).reps(2);
        t.run(&dev, "n=1024", |c| {
            launches.set(launches.get() + 1);
            let b = c.get("BLOCK")?;
            scale::launch(&dev, LaunchConfig::new([(n as u32).div_ceil(b as u32), 1, 1]), &x, y, n as i32, b as i32)
        })
        .unwrap()
    };
    std::fs::write(dir.join("autotune.tsv"), [0xff, 0xfe, b'\n']).unwrap();
    let best = run(&mut y);
    assert!(std::fs::read(dir.join("autotune.tsv")).is_ok_and(|b| String::from_utf8(b).is_ok()), "a new, readable cache");
    launches.set(0);
    assert_eq!(run(&mut y), best);
    assert_eq!(launches.get(), 1, "the new cache file should hold the choice");
}

/// A choice cached for one candidate list is not reused for another: a
/// tuner that gained a configuration tunes again (and the new choice is
/// then read from disk).
fn new_candidates_are_tuned_again() {
    let dir = std::env::temp_dir().join(format!("ferrotile-retune-test-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let n = 1024usize;
    let x = dev.from_slice(&vec![1.0f32; n]).unwrap();
    let mut y = dev.zeros::<f32>(n).unwrap();
    let launches = Cell::new(0);
    let run = |configs: &[TuneConfig], y: &mut ferrotile::Buffer<f32>| {
        let t = Autotuner::new("scale_grow", configs.to_vec()).reps(2);
        t.run(&dev, "n=1024", |c| {
            launches.set(launches.get() + 1);
            let b = c.get("BLOCK")?;
            scale::launch(&dev, LaunchConfig::new([(n as u32).div_ceil(b as u32), 1, 1]), &x, y, n as i32, b as i32)
        })
        .unwrap()
    };
    let old = vec![TuneConfig::new(4).with("BLOCK", 128), TuneConfig::new(4).with("BLOCK", 512)];
    let mut grown = old.clone();
    grown.push(TuneConfig::new(4).with("BLOCK", 256));
    run(&old, &mut y);
    launches.set(0);
    run(&old, &mut y);
    assert_eq!(launches.get(), 1, "same candidates: the cached choice");
    launches.set(0);
    run(&grown, &mut y);
    assert!(launches.get() > grown.len(), "a grown candidate list is tuned again ({} launches)", launches.get());
    launches.set(0);
    run(&grown, &mut y);
    assert_eq!(launches.get(), 1, "and its choice is cached in turn");
}

#[test]
fn the_disk_cache_recovers() {
    a_failing_cached_choice_is_retuned();
    an_unreadable_cache_file_is_replaced();
    new_candidates_are_tuned_again();
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("ferrotile-retune-test-{}", std::process::id())));
}
