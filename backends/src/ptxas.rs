//! Runs NVIDIA's `ptxas` on emitted PTX (tests, CI, resource reports).
//!
//! Finds `ptxas` from `$FERROTILE_PTXAS`, then `.tools/ptxas-path` in the
//! workspace (written by `scripts/install-ptxas.sh`), then `PATH`. Returns
//! `None` when none is available so callers can report "skipped: no ptxas".

use std::path::PathBuf;
use std::process::Command;

/// What `ptxas -v` reported for one assembled kernel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PtxasReport {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Bytes of stack frame per thread.
    pub stack_frame: u32,
    /// Bytes of static shared memory (`smem`; the dynamic shared memory of
    /// [`crate::ptx::PtxKernel`] is not included).
    pub shared: u32,
    /// Full verbose output.
    pub log: String,
}

/// Where `ptxas` is: `$FERROTILE_PTXAS`, then the path written in the first `.tools/ptxas-path`
/// found from the current directory upwards, then `ptxas` on `PATH`; `None` when none of them
/// exists.
pub fn find() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("FERROTILE_PTXAS") {
        let p = PathBuf::from(p);
        if p.exists() {
            return Some(p);
        }
    }
    let mut dir = std::env::current_dir().ok();
    while let Some(d) = dir {
        let f = d.join(".tools/ptxas-path");
        if let Ok(s) = std::fs::read_to_string(&f) {
            let p = PathBuf::from(s.trim());
            if p.exists() {
                return Some(p);
            }
        }
        dir = d.parent().map(|p| p.to_path_buf());
    }
    let ok = Command::new("ptxas").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    ok.then(|| PathBuf::from("ptxas"))
}

/// For tests: [`find`], or `None` after printing "skipped: no ptxas" —
/// unless `FERROTILE_REQUIRE_PTXAS` is set (CI), where a missing ptxas is a
/// failure rather than a skip.
pub fn find_or_skip() -> Option<PathBuf> {
    let p = find();
    if p.is_none() {
        eprintln!("skipped: no ptxas (run scripts/install-ptxas.sh or set FERROTILE_PTXAS)");
        assert!(std::env::var("FERROTILE_REQUIRE_PTXAS").is_err(), "FERROTILE_REQUIRE_PTXAS is set but no ptxas was found");
    }
    p
}

fn num_after(s: &str, key: &str) -> u32 {
    s.find(key).and_then(|i| s[..i].trim_end().rsplit(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok())).unwrap_or(0)
}

/// Assemble `ptx` for `sm_<sm>` (`sm_<sm>a` when the text targets the
/// architecture-specific variant, as kernels using `wgmma` do); `Err`
/// carries ptxas's message.
pub fn assemble(ptxas: &std::path::Path, ptx: &str, sm: u32) -> Result<PtxasReport, String> {
    let dir = std::env::temp_dir().join(format!("ferrotile-ptxas-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = dir.join("k.ptx");
    std::fs::write(&src, ptx).map_err(|e| e.to_string())?;
    let out = Command::new(ptxas)
        .arg(format!("-arch=sm_{sm}{}", if ptx.contains(&format!(".target sm_{sm}a")) { "a" } else { "" }))
        .arg("-v")
        .arg("-o")
        .arg(dir.join("k.cubin"))
        .arg(&src)
        .output()
        .map_err(|e| format!("running ptxas: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(log);
    }
    Ok(PtxasReport {
        registers: num_after(&log, "registers"),
        spill_stores: num_after(&log, "bytes spill stores"),
        spill_loads: num_after(&log, "bytes spill loads"),
        stack_frame: num_after(&log, "bytes stack frame"),
        shared: num_after(&log, "bytes smem"),
        log,
    })
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) ^ (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0) << 8)
}
