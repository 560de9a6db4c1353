//! The `ferrotile` binary end to end: help, the backend report, a dump, the
//! main job on the CPU interpreter with its chart and JSON, and errors.

use std::process::Command;

fn ferrotile(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrotile")).args(args).output().expect("run ferrotile");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn help_lists_every_subcommand() {
    let (code, out, _) = ferrotile(&["--help"]);
    assert_eq!(code, 0);
    for sub in ["devices", "run-library", "bench", "dump", "chart"] {
        assert!(out.contains(sub), "{sub} missing from:\n{out}");
    }
    // `bench --help` prints help instead of running the benchmark
    let (code, out, _) = ferrotile(&["bench", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--gemm-shape") && !out.contains("device copy"), "{out}");
}

#[test]
fn devices_reports_every_backend() {
    let (code, out, _) = ferrotile(&["devices"]);
    assert_eq!(code, 0);
    for b in ["cpu      ran", "cuda     ", "wgpu     ", "ptxas    ", "best     "] {
        assert!(out.contains(b), "{b} missing from:\n{out}");
    }
}

#[test]
fn dump_prints_ptx_and_names_a_missing_constexpr() {
    let (code, out, err) = ferrotile(&["dump", "rms_norm_row", "--const", "BLOCK=512", "--dtype", "T=f16"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(".visible .entry"), "{out}");
    let (code, _, err) = ferrotile(&["dump", "rms_norm_row"]);
    assert_eq!(code, 2);
    assert!(err.contains("missing --const BLOCK"), "{err}");
}

#[test]
fn main_job_on_the_interpreter_writes_table_chart_and_json() {
    let dir = std::env::temp_dir().join(format!("ferrotile-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (svg, json) = (dir.join("r.svg"), dir.join("r.json"));
    let (code, out, err) = ferrotile(&["run-library", "--quick", "--device", "cpu", "--svg", svg.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    for k in ["softmax", "layer_norm", "rms_norm", "gemm+bias+gelu", "attn fwd", "attn bwd", "attn decode", "quant gemm", "w8a8 gemm", "fp8 gemm"] {
        assert!(out.contains(k), "{k} missing from:\n{out}");
    }
    assert!(out.contains("within tolerance"), "{out}");
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg") && svg_text.contains("softmax f32"), "{svg_text}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 30, "{} results", lines.len());
    assert!(lines.iter().all(|v| v["ok"] == true && v["ms"].as_f64().unwrap() > 0.0));
    // the chart of those results next to a peer's line for one case (as
    // peers.py writes it); alone, no case has two implementations
    let out_svg = dir.join("c.svg");
    let (code, _, err) = ferrotile(&["chart", json.to_str().unwrap(), "-o", out_svg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("no case with two implementations"), "{err}");
    let peer = dir.join("peer.json");
    std::fs::write(&peer, r#"{"impl":"eager","kernel":"softmax","dtype":"f32","rows":64,"cols":1000,"ms":1.0,"gbs":0.5}"#).unwrap();
    let (code, _, err) = ferrotile(&["chart", json.to_str().unwrap(), peer.to_str().unwrap(), "-o", out_svg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(&out_svg).unwrap();
    assert!(svg.contains("softmax f32 64x1000") && svg.contains("eager: 0.5 GB/s") && svg.contains("ferrotile:"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_named_device_that_is_missing_is_an_error() {
    let (code, _, err) = ferrotile(&["run-library", "--device", "tpu"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown device `tpu`"), "{err}");
}
