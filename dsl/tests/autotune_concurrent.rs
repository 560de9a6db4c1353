//! Two threads making their first call on one autotuner key at once: one
//! tunes, the other waits and takes its choice (both launch the same
//! configuration; the second launches once, untimed). Before, each tuned
//! on its own — timing each other's launches — and the later choice
//! replaced the earlier: calls on the same inputs could run different
//! tiles (a `deterministic` attention backward gave other bits on its
//! next call, on the H200). Its own test binary: it points
//! `FERROTILE_CACHE_DIR` (process-wide) at a directory of its own.

use ferrotile::prelude::*;
use ferrotile::{Autotuner, TuneConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

mod common;
use common::scale;

#[test]
fn concurrent_first_calls_tune_once() {
    let dir = std::env::temp_dir().join(format!("ferrotile-concurrent-tune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let n = 2048usize;
    let x = dev.from_slice(&(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let configs = vec![TuneConfig::new(4).with("BLOCK", 64), TuneConfig::new(4).with("BLOCK", 256), TuneConfig::new(4).with("BLOCK", 1024)];
    let t = Autotuner::new("scale_concurrent", configs).reps(2);
    let start = Barrier::new(2);
    let launches = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let picks: Vec<i64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let (t, dev, x, start, launches) = (&t, &dev, &x, &start, &launches);
                s.spawn(move || {
                    let mut y = dev.zeros::<f32>(n).unwrap();
                    start.wait();
                    let c = t
                        .run(dev, "n=2048", |c| {
                            launches[i].fetch_add(1, Ordering::SeqCst);
                            // (a wide window for the other thread to arrive in)
                            std::thread::sleep(std::time::Duration::from_millis(5));
                            let b = c.get("BLOCK")?;
                            scale::launch(dev, LaunchConfig::new([(n as u32).div_ceil(b as u32), 1, 1]), x, &mut y, n as i32, b as i32)
                        })
                        .unwrap();
                    assert!(y.to_vec().unwrap().iter().enumerate().all(|(j, &v)| v == 2.0 * j as f32));
                    c.get("BLOCK").unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(picks[0], picks[1], "both calls launch the one choice");
    let mut counts = [launches[0].load(Ordering::SeqCst), launches[1].load(Ordering::SeqCst)];
    counts.sort();
    assert_eq!(counts[0], 1, "the waiting call launches the choice once: {counts:?}");
    assert!(counts[1] > 3, "the other tunes (every candidate, then the finalists): {counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
