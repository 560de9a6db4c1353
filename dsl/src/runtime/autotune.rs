//! The autotuner: pick the fastest of several launch configurations of a
//! kernel, once per (kernel, key, device), and remember it.
//!
//! Takes a list of [`TuneConfig`]s (constexpr values such as block sizes,
//! `num_warps`, `num_stages`) declared next to a kernel, and a closure that
//! launches the kernel with one of them. On the first call for a key (shape
//! buckets, dtypes — whatever the caller says matters) every configuration is
//! run once (a failure — too much shared memory, a `static_assert` — prunes
//! it, with the reason kept) and timed (median of `reps` device-timed
//! samples); the three fastest are then timed again, interleaved, for
//! `2 · reps` samples each (the first pass runs each configuration at a
//! different moment — clocks, power and temperature drift between them — so
//! close calls are decided by a second look taken side by side). A sample
//! of a short launch is a *batch*: as many launches as fill about
//! [`Autotuner::sample_ms`] of device time (at most [`MAX_BATCH`]) queued
//! back to back behind one untimed launch, divided by their number — the
//! device time per launch as a decode loop or a CUDA graph sees it. (One
//! launch between two events also times the host's launch path, which the
//! device waits for: several µs, varying from call to call, on a 20 µs
//! kernel.) The winner is kept in
//! memory and in `$FERROTILE_CACHE_DIR/autotune.tsv`
//! (default `~/.cache/ferrotile`), and launched. Later calls launch the
//! winner directly. A cached choice stands for the candidate list it was
//! picked from (the cache key carries a fingerprint of it): when the list
//! changes, the key is tuned again. A progress line goes to stderr while tuning;
//! `FERROTILE_AUTOTUNE_PRINT=1` prints every choice (`=all`: with every
//! configuration's time and every pruning reason); `FERROTILE_AUTOTUNE=0`
//! disables tuning (the first configuration is used);
//! `FERROTILE_AUTOTUNE_SUSTAIN_MS=X` makes every sample (first pass and
//! finalists) a batch of at least X ms of launches (an experiment: long
//! launches compared under sustained load, as a graph replay runs them).
//!
//! Tuning runs the kernel several times: the launch closure must be
//! idempotent (outputs fully overwritten, no in-place accumulation), as with
//! Triton's autotuner.

use crate::error::{Error, Result};
use crate::runtime::Device;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

/// One candidate configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TuneConfig {
    /// Constexpr values by name (e.g. `BLOCK_M = 128`).
    pub values: BTreeMap<String, i64>,
    /// Warps per program ([`crate::LaunchConfig::num_warps`]).
    pub num_warps: u32,
    /// Pipelining depth ([`crate::LaunchConfig::num_stages`]).
    pub num_stages: u32,
}

impl TuneConfig {
    /// A configuration with `num_warps` warps, 2 stages and no constexprs.
    pub fn new(num_warps: u32) -> Self {
        TuneConfig { values: BTreeMap::new(), num_warps, num_stages: 2 }
    }
    /// With the constexpr `name` set to `v`.
    pub fn with(mut self, name: &str, v: i64) -> Self {
        self.values.insert(name.to_string(), v);
        self
    }
    /// With `s` stages.
    pub fn stages(mut self, s: u32) -> Self {
        self.num_stages = s;
        self
    }
    /// A constexpr value of this configuration; an error naming the missing key.
    pub fn get(&self, name: &str) -> Result<i64> {
        self.values.get(name).copied().ok_or_else(|| Error::Launch { kernel: String::new(), msg: format!("autotune config has no `{name}`") })
    }
    fn encode(&self) -> String {
        let mut s: Vec<String> = self.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push(format!("num_warps={}", self.num_warps));
        s.push(format!("num_stages={}", self.num_stages));
        s.join(",")
    }
    fn decode(s: &str) -> Option<TuneConfig> {
        let mut c = TuneConfig::new(4);
        for part in s.split(',') {
            let (k, v) = part.split_once('=')?;
            let v: i64 = v.parse().ok()?;
            match k {
                "num_warps" => c.num_warps = v as u32,
                "num_stages" => c.num_stages = v as u32,
                _ => {
                    c.values.insert(k.to_string(), v);
                }
            }
        }
        Some(c)
    }
}

impl std::fmt::Display for TuneConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.encode())
    }
}

/// What tuning found for one key.
#[derive(Clone, Debug)]
pub struct TuneReport {
    /// The configuration chosen.
    pub best: TuneConfig,
    /// (config, median ms) of every configuration that ran.
    pub timings: Vec<(TuneConfig, f64)>,
    /// (config, reason) of every configuration that was pruned.
    pub pruned: Vec<(TuneConfig, String)>,
}

impl std::fmt::Display for TuneReport {
    /// The timings, fastest first, then the pruned configurations.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut t = self.timings.clone();
        t.sort_by(|a, b| a.1.total_cmp(&b.1));
        for (c, ms) in &t {
            writeln!(f, "  {:>10.1} us  {c}", ms * 1e3)?;
        }
        for (c, why) in &self.pruned {
            writeln!(f, "  pruned  {c}: {why}")?;
        }
        Ok(())
    }
}

/// An autotuner for one kernel (see the module docs).
pub struct Autotuner {
    name: String,
    configs: Vec<TuneConfig>,
    /// FNV-1a of the candidates' canonical text: part of the disk cache's
    /// key, computed once (hashing ~50 candidates' text on every call cost
    /// ~1 µs per candidate of host time).
    configs_hash: u32,
    reps: usize,
    /// Device time a sample's batch of launches aims at, ms.
    sample_ms: f64,
    /// The choices of this process, by device id and key: found without
    /// building the full key, so a tuned call costs one lookup.
    chosen: Mutex<HashMap<usize, HashMap<String, TuneConfig>>>,
    /// One lock per (device, key), held while a key is being chosen: two
    /// threads making their first call on one key do not tune it twice
    /// (timing each other's launches, and picking two configurations —
    /// so that calls on the same inputs ran different tiles, and a
    /// `deterministic` attention backward gave other bits on the next
    /// call: seen on the H200, session 44); the second waits and takes
    /// the first's choice.
    choosing: Mutex<HashMap<(usize, String), std::sync::Arc<Mutex<()>>>>,
    reports: Mutex<HashMap<String, TuneReport>>,
    /// A value tried on the finalists only ([`Self::finalist_knob`]).
    knob: Option<(String, i64, Vec<i64>)>,
}

fn disk_path() -> Option<std::path::PathBuf> {
    let dir = match std::env::var("FERROTILE_CACHE_DIR") {
        Ok(d) => std::path::PathBuf::from(d),
        Err(_) => std::path::Path::new(&std::env::var("HOME").ok()?).join(".cache/ferrotile"),
    };
    Some(dir.join("autotune.tsv"))
}

fn disk_lock() -> &'static Mutex<()> {
    static L: OnceLock<Mutex<()>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(()))
}

fn disk_get(full_key: &str) -> Option<TuneConfig> {
    let _g = disk_lock().lock().ok()?;
    let path = disk_path()?;
    let bytes = std::fs::read(&path).ok()?;
    let Ok(text) = String::from_utf8(bytes) else {
        // not ours (or damaged): set aside and start a new one, said once,
        // rather than leaving the cache silently off
        let aside = path.with_extension("tsv.unreadable");
        let moved = std::fs::rename(&path, &aside).is_ok();
        eprintln!(
            "ferrotile autotune: {} is not UTF-8 text; {}",
            path.display(),
            if moved { format!("moved to {} and starting a new cache", aside.display()) } else { "ignoring it".to_string() }
        );
        return None;
    };
    // last entry wins
    text.lines().rev().find_map(|l| {
        let (k, v) = l.split_once('\t')?;
        (k == full_key).then(|| TuneConfig::decode(v)).flatten()
    })
}

fn disk_put(full_key: &str, c: &TuneConfig) {
    let Ok(_g) = disk_lock().lock() else { return };
    let Some(p) = disk_path() else { return };
    if let Some(d) = p.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&p) {
        let _ = writeln!(f, "{full_key}\t{}", c.encode());
    }
}

impl Autotuner {
    /// The first of `configs` is the fallback when tuning is disabled. With
    /// no configurations, [`Self::run`] returns an error (it never panics).
    pub fn new(name: &str, configs: Vec<TuneConfig>) -> Self {
        // FNV-1a over the candidates' canonical text (stable across runs)
        let h = configs.iter().fold(super::FNV_OFFSET, |h, c| super::fnv1a(h, c.encode().bytes().chain(std::iter::once(b';'))));
        Autotuner {
            name: name.to_string(),
            configs,
            configs_hash: h as u32,
            reps: 10,
            sample_ms: 0.2,
            chosen: Mutex::default(),
            choosing: Mutex::default(),
            reports: Mutex::default(),
            knob: None,
        }
    }

    /// A knob decided among the finalists only: every configuration runs
    /// the first pass with `name` set to `base`, and each of the three
    /// finalists is re-timed, side by side with the others, also with `name`
    /// set to each of `others` — for compiler options that change a
    /// configuration's speed by a few percent either way (threaded loop
    /// copies), where doubling the whole candidate list would double the
    /// tuning time. The choice may carry any of the values.
    pub fn finalist_knob(mut self, name: &str, base: i64, others: &[i64]) -> Self {
        self.configs = self.configs.into_iter().map(|c| c.with(name, base)).collect();
        self.configs_hash = super::fnv1a(self.configs_hash as u64 ^ super::FNV_OFFSET, format!("{name}={base}{others:?}").bytes()) as u32;
        self.knob = Some((name.to_string(), base, others.to_vec()));
        self
    }

    /// Whether `c` is a candidate, or a candidate with a finalist knob's
    /// other value.
    fn accepts(&self, c: &TuneConfig) -> bool {
        self.configs.contains(c)
            || self.knob.as_ref().is_some_and(|(name, base, others)| {
                c.values.get(name).is_some_and(|v| others.contains(v)) && self.configs.contains(&c.clone().with(name, *base))
            })
    }

    /// Timed runs per configuration (default 10).
    pub fn reps(mut self, n: usize) -> Self {
        self.reps = n.max(1);
        self
    }

    /// Device time one timing sample aims at (default 0.2 ms): a launch
    /// shorter than that is timed as a batch of launches queued back to
    /// back (at most [`MAX_BATCH`]), 0 times every launch alone.
    pub fn sample_ms(mut self, ms: f64) -> Self {
        self.sample_ms = if ms.is_finite() { ms.max(0.0) } else { f64::MAX };
        self
    }

    /// The candidate configurations, in the order given.
    pub fn configs(&self) -> &[TuneConfig] {
        &self.configs
    }

    /// The report of the tuning done for `key` in this process, if any.
    pub fn report(&self, dev: &Device, key: &str) -> Option<TuneReport> {
        self.reports.lock().ok()?.get(&self.full_key(dev, key)).cloned()
    }

    /// The cache key of `key`: the tuner's name, the device, the caller's
    /// key and a fingerprint of the candidate list, so that a choice made
    /// among other candidates (a library that gained configurations since
    /// the cache was written) is tuned again rather than kept forever.
    fn full_key(&self, dev: &Device, key: &str) -> String {
        format!("{}|{}|{}|c{:08x}", self.name, dev.name(), key, self.configs_hash)
    }

    /// The configuration to use for `key`, tuning with `launch` if this is
    /// the first time; then launches it once.
    pub fn run(&self, dev: &Device, key: &str, mut launch: impl FnMut(&TuneConfig) -> Result<()>) -> Result<TuneConfig> {
        if self.configs.is_empty() {
            return Err(Error::Launch { kernel: self.name.clone(), msg: format!("the autotuner has no configurations to choose from for [{key}]") });
        }
        let cached = || self.chosen.lock().unwrap_or_else(|p| p.into_inner()).get(&dev.id()).and_then(|m| m.get(key)).cloned();
        if let Some(c) = cached() {
            launch(&c)?;
            return Ok(c);
        }
        // (the key's lock, then the choice again: another thread may have
        // made it while this one waited)
        let lock = self.choosing.lock().unwrap_or_else(|p| p.into_inner()).entry((dev.id(), key.to_string())).or_default().clone();
        let _choosing = lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cached() {
            launch(&c)?;
            return Ok(c);
        }
        let full = self.full_key(dev, key);
        let print_var = std::env::var("FERROTILE_AUTOTUNE_PRINT").ok();
        let print = print_var.as_deref().is_some_and(|v| v != "0");
        let disabled = std::env::var("FERROTILE_AUTOTUNE").is_ok_and(|v| v == "0");
        let (best, from, launched) = if disabled || self.configs.len() == 1 {
            (self.configs[0].clone(), "default".to_string(), false)
        } else if let Some(c) = disk_get(&full).filter(|c| self.accepts(c)) {
            match launch(&c) {
                Ok(()) => (c, "disk cache".to_string(), true),
                // a remembered choice that no longer launches (the compiler,
                // the driver or the device changed under it) is tuned again
                // instead of failing every call from now on
                Err(e) if !dev.capturing() => {
                    let b = self.tune_and_remember(dev, key, &full, &mut launch, print_var.as_deref())?;
                    (b, format!("re-tuned: the cached choice {c} failed: {e}"), false)
                }
                Err(e) => return Err(e),
            }
        } else if dev.capturing() {
            // (tuning times candidates: it would capture every one of them)
            return Err(Error::Launch {
                kernel: self.name.clone(),
                msg: format!("the autotuner has no choice for [{key}] yet and cannot time candidates while a graph is being captured: run the call once before capturing it"),
            });
        } else {
            (self.tune_and_remember(dev, key, &full, &mut launch, print_var.as_deref())?, "tuned".to_string(), false)
        };
        if print {
            eprintln!("ferrotile autotune: {} [{key}] on {} -> {best} ({from})", self.name, dev.name());
        }
        self.chosen.lock().unwrap_or_else(|p| p.into_inner()).entry(dev.id()).or_default().insert(key.to_string(), best.clone());
        if !launched {
            launch(&best)?;
        }
        Ok(best)
    }

    /// Tune `key`, keep the report for [`Self::report`] and the choice on disk.
    fn tune_and_remember(
        &self,
        dev: &Device,
        key: &str,
        full: &str,
        launch: &mut impl FnMut(&TuneConfig) -> Result<()>,
        print: Option<&str>,
    ) -> Result<TuneConfig> {
        let report = self.tune(dev, key, launch)?;
        if print == Some("all") {
            eprintln!("{report}");
        }
        let best = report.best.clone();
        disk_put(full, &best);
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).insert(full.to_string(), report);
        Ok(best)
    }

    /// Launches per timing sample of a configuration whose single launch
    /// took `one_ms` (host path included: an overestimate of its device
    /// time, so the batch errs short): enough to fill [`Self::sample_ms`],
    /// or `FERROTILE_AUTOTUNE_SUSTAIN_MS` where that is longer.
    fn batch_for(&self, one_ms: f64) -> usize {
        if one_ms <= 0.0 {
            return MAX_BATCH;
        }
        let sustain = std::env::var("FERROTILE_AUTOTUNE_SUSTAIN_MS").ok().and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite() && *v > 0.0);
        let ms = self.sample_ms.max(sustain.unwrap_or(0.0));
        (ms / one_ms).ceil().clamp(1.0, MAX_BATCH as f64) as usize
    }

    /// The first run of `c`: compile and validate (an error prunes it), then
    /// one launch timed alone, which sizes its samples' batch.
    fn validate(&self, dev: &Device, launch: &mut impl FnMut(&TuneConfig) -> Result<()>, c: &TuneConfig) -> Result<usize> {
        launch(c).and_then(|_| dev.synchronize())?;
        Ok(self.batch_for(dev.time_ms(|| launch(c))?))
    }

    fn tune(&self, dev: &Device, key: &str, launch: &mut impl FnMut(&TuneConfig) -> Result<()>) -> Result<TuneReport> {
        let mut timings = vec![];
        // (launches per sample, by the index of `timings`)
        let mut batches = vec![];
        let mut pruned = vec![];
        let n = self.configs.len();
        for (i, c) in self.configs.iter().enumerate() {
            eprint!("\rferrotile autotune: {} [{key}] {}/{n}   ", self.name, i + 1);
            // first run: compile + validate; failures prune the configuration
            let batch = match self.validate(dev, launch, c) {
                Ok(b) => b,
                Err(e) => {
                    pruned.push((c.clone(), e.to_string()));
                    continue;
                }
            };
            let mut ts = vec![];
            let mut failed = None;
            for _ in 0..self.reps {
                match sample(dev, launch, c, batch) {
                    Ok(t) => ts.push(t),
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                pruned.push((c.clone(), e));
                continue;
            }
            timings.push((c.clone(), median(ts)));
            batches.push(batch);
        }
        // finalists: the fastest three, re-timed round-robin
        let mut order: Vec<usize> = (0..timings.len()).collect();
        order.sort_by(|&a, &b| timings[a].1.total_cmp(&timings[b].1));
        let mut finalists: Vec<usize> = order.into_iter().take(3).collect();
        // (the finalist knob's other values: validated, then timed with them)
        if let Some((name, _, others)) = &self.knob {
            for f in finalists.clone() {
                for v in others {
                    let c = timings[f].0.clone().with(name, *v);
                    match self.validate(dev, launch, &c) {
                        Ok(batch) => {
                            timings.push((c, f64::INFINITY));
                            batches.push(batch);
                            finalists.push(timings.len() - 1);
                        }
                        Err(e) => pruned.push((c, e.to_string())),
                    }
                }
            }
        }
        if finalists.len() > 1 {
            let mut again: Vec<Vec<f64>> = vec![vec![]; finalists.len()];
            'rounds: for _ in 0..2 * self.reps {
                for (f, &i) in finalists.iter().enumerate() {
                    match sample(dev, launch, &timings[i].0, batches[i]) {
                        Ok(t) => again[f].push(t),
                        Err(_) => break 'rounds, // keep the first pass's timings
                    }
                }
            }
            if again.iter().all(|v| v.len() == 2 * self.reps) {
                for (f, &i) in finalists.iter().enumerate() {
                    timings[i].1 = median(std::mem::take(&mut again[f]));
                }
            }
        }
        eprintln!();
        let best = timings.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|(c, _)| c.clone()).ok_or_else(|| Error::Launch {
            kernel: self.name.clone(),
            msg: format!("autotuning [{key}]: every configuration failed: {}", pruned.iter().map(|(c, e)| format!("{c}: {e}")).collect::<Vec<_>>().join("; ")),
        })?;
        Ok(TuneReport { best, timings, pruned })
    }
}

/// Most launches in one timing sample.
pub const MAX_BATCH: usize = 64;

/// One timing sample of `c`: device ms per launch over `batch` launches
/// queued back to back. With more than one, an untimed launch goes first,
/// so the device is busy while the timed ones are queued and the first
/// event does not wait on the host's launch path.
fn sample(dev: &Device, launch: &mut impl FnMut(&TuneConfig) -> Result<()>, c: &TuneConfig, batch: usize) -> Result<f64> {
    if batch > 1 {
        launch(c)?;
    }
    Ok(dev.time_ms(|| (0..batch).try_for_each(|_| launch(c)))? / batch as f64)
}

fn median(mut ts: Vec<f64>) -> f64 {
    ts.sort_by(f64::total_cmp);
    ts[ts.len() / 2]
}
