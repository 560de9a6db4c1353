//! `Autotuner::sample_ms` on the CPU (its own process: the test sets
//! `FERROTILE_CACHE_DIR`): a launch shorter than the sample time is timed
//! as a batch of launches queued back to back behind one untimed launch,
//! in the first pass and in the finalists' second look; with a sample time
//! of 0 every launch is timed alone. The launches here queue no kernel
//! (the closure only counts), so each takes far less than any sample time:
//! the batch is the largest, exactly.

use ferrotile::runtime::autotune::MAX_BATCH;
use ferrotile::{Autotuner, Device, TuneConfig};
use std::cell::RefCell;
use std::collections::HashMap;

#[test]
fn short_launches_are_timed_in_batches() {
    let dir = std::env::temp_dir().join(format!("ferrotile-autotune-batch-{}", std::process::id()));
    std::env::set_var("FERROTILE_CACHE_DIR", &dir);
    let dev = Device::cpu();
    let configs: Vec<TuneConfig> = [1, 2, 3].iter().map(|&v| TuneConfig::new(4).with("V", v)).collect();
    let reps = 2;
    for (sample_ms, batch) in [(1e9, MAX_BATCH), (0.0, 1)] {
        let calls = RefCell::new(HashMap::<i64, usize>::new());
        let t = Autotuner::new("batch", configs.clone()).reps(reps).sample_ms(sample_ms);
        let best = t
            .run(&dev, &format!("sample={sample_ms}"), |c| {
                *calls.borrow_mut().entry(c.get("V")?).or_default() += 1;
                Ok(())
            })
            .unwrap();
        // per configuration: the validating launch, the one timed alone
        // that sizes the batch, `reps` samples in the first pass and
        // `2 · reps` as one of the three finalists — each sample `batch`
        // launches, behind an untimed one when there are several; and the
        // winner once more, launched by `run`
        let per_sample = batch + (batch > 1) as usize;
        let want = 2 + 3 * reps * per_sample;
        for (v, &n) in calls.borrow().iter() {
            let extra = (*v == best.get("V").unwrap()) as usize;
            assert_eq!(n, want + extra, "sample_ms {sample_ms}: V = {v} launched {n} times, want {} (batch {batch})", want + extra);
        }
        assert_eq!(calls.borrow().len(), 3);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
