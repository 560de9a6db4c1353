//! `FERROTILE_AUTOTUNE_SUSTAIN_MS` on the CPU (its own process: the test
//! sets it and `FERROTILE_CACHE_DIR`): with a sample time of 0, which
//! alone would time every launch by itself, every sample — first pass and
//! finalists — batches at least the sustained time of launches behind an
//! untimed one; here launches that queue no kernel, so the largest batch,
//! exactly.

use ferrotile::runtime::autotune::MAX_BATCH;
use ferrotile::{Autotuner, Device, TuneConfig};
use std::cell::RefCell;
use std::collections::HashMap;

#[test]
fn finalists_are_timed_under_sustained_load() {
    let dir = std::env::temp_dir().join(format!("ferrotile-autotune-sustain-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    std::env::set_var("FERROTILE_AUTOTUNE_SUSTAIN_MS", "5");
    let dev = Device::cpu();
    let configs: Vec<TuneConfig> = [1, 2, 3].iter().map(|&v| TuneConfig::new(4).with("V", v)).collect();
    let reps = 2;
    let calls = RefCell::new(HashMap::<i64, usize>::new());
    let t = Autotuner::new("sustain", configs).reps(reps).sample_ms(0.0);
    let best = t
        .run(&dev, "sustain", |c| {
            *calls.borrow_mut().entry(c.get("V")?).or_default() += 1;
            Ok(())
        })
        .unwrap();
    // per configuration: the validating launch, the one timed alone, `reps`
    // samples in the first pass and `2 · reps` as a finalist, each of
    // MAX_BATCH launches behind an untimed one; the winner once more
    let want = 2 + 3 * reps * (MAX_BATCH + 1);
    for (v, &n) in calls.borrow().iter() {
        let extra = (*v == best.get("V").unwrap()) as usize;
        assert_eq!(n, want + extra, "V = {v} launched {n} times, want {}", want + extra);
    }
    assert_eq!(calls.borrow().len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}
