//! SVG charts of results (plotters' SVG backend; no fonts needed: the text
//! is SVG `<text>`, laid out by the viewer).
//!
//! - [`roofline_svg`]: the main job's results, one bar per result, each
//!   the fraction of the device's roofline it reaches (memory-bound results
//!   against the copy bandwidth, the others against the tensor-core peak).
//! - [`compare_svg`]: JSON lines of `bench` and `benches/peers.py` (any
//!   number of files), one group of bars per case that two or more
//!   implementations ran, one bar per
//!   implementation: its rate relative to the fastest implementation of the
//!   case, labelled with the rate itself.

use crate::job::{Roofs, Row};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

type Res<T> = Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Bar colours, one per implementation (or per bound in the roofline chart).
const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// One bar: its label on the left (only the first bar of a group has one),
/// its length, the text after it and its colour.
struct Bar {
    label: String,
    value: f64,
    note: String,
    color: usize,
}

/// A horizontal bar chart: `bars` top to bottom, `gap` marks after which
/// bar a group ends; x from 0 to `x_max` labelled as percentages;
/// a dashed line at x = 1 (the roof, or the fastest); `legend` (colour
/// index, text) at the bottom.
fn bars_svg(title: &str, x_desc: &str, bars: &[Bar], gaps: &[usize], x_max: f64, legend: &[(usize, String)]) -> Res<String> {
    let row = 16u32;
    let slots = bars.len() as f64 + gaps.len() as f64 * 0.6;
    let height = 90 + (slots * row as f64) as u32 + 20 * legend.len().div_ceil(3) as u32;
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (1100, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, foot) = root.split_vertically(height - 20 * legend.len().div_ceil(3) as u32);
        let mut c = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(330)
            .build_cartesian_2d(0f64..x_max, slots..0f64)
            .map_err(err)?;
        c.configure_mesh().disable_y_mesh().y_labels(0).x_desc(x_desc).x_label_formatter(&|x| format!("{:.0}%", x * 100.0)).draw().map_err(err)?;
        let label = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        let note = TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        let mut y = 0.0;
        for (i, b) in bars.iter().enumerate() {
            let v = b.value.clamp(0.0, x_max);
            c.draw_series(std::iter::once(Rectangle::new([(0.0, y + 0.12), (v, y + 0.88)], COLORS[b.color % COLORS.len()].filled()))).map_err(err)?;
            let (x0, ym) = c.backend_coord(&(0.0, y + 0.5));
            let (x1, _) = c.backend_coord(&(v, y + 0.5));
            if !b.label.is_empty() {
                plot.draw(&Text::new(b.label.clone(), (x0 - 6, ym), label.clone())).map_err(err)?;
            }
            plot.draw(&Text::new(b.note.clone(), (x1 + 4, ym), note.clone())).map_err(err)?;
            y += 1.0;
            if gaps.contains(&i) {
                y += 0.6;
            }
        }
        let top = c.backend_coord(&(1.0, 0.0));
        let bottom = c.backend_coord(&(1.0, slots));
        plot.draw(&PathElement::new(vec![top, bottom], BLACK.stroke_width(1))).map_err(err)?;
        for (i, (color, text)) in legend.iter().enumerate() {
            let (x, y) = (340 + (i % 3) as i32 * 250, 8 + (i / 3) as i32 * 20);
            foot.draw(&Rectangle::new([(x, y), (x + 14, y + 12)], COLORS[color % COLORS.len()].filled())).map_err(err)?;
            foot.draw(&Text::new(text.clone(), (x + 20, y + 6), TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center))))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(s)
}

/// The main job's chart: per result, the roofline's time over the time
/// taken (100 %: on the roof), labelled with the achieved rate; memory-bound
/// and compute-bound results in two colours; results without a roof (math
/// on a device whose peak is unknown) are left out and counted in the title.
pub fn roofline_svg(rows: &[Row], roofs: &Roofs, title: &str) -> Res<String> {
    let mut bars = vec![];
    let mut left_out = 0;
    for r in rows {
        let Some(f) = r.roof_fraction(roofs) else {
            left_out += 1;
            continue;
        };
        bars.push(Bar {
            label: format!("{} {} {}", r.kernel, r.dtype, r.problem),
            value: f,
            note: format!("{} ({:.0}%)", r.rate(roofs), 100.0 * f),
            color: if r.memory_bound(roofs) { 0 } else { 1 },
        });
    }
    if bars.is_empty() {
        return Err("no result has a roofline on this device".into());
    }
    let peak = roofs.tensor16_tflops.map_or("tensor-core peak unknown".to_string(), |p| format!("16-bit tensor cores {p:.0} TFLOP/s"));
    let mut t = format!("{title} — roofline: copy {:.0} GB/s, {peak}", roofs.copy_gbs);
    if left_out > 0 {
        t += &format!(" ({left_out} without a roof left out)");
    }
    let x_max = bars.iter().map(|b| b.value).fold(1.0f64, f64::max) * 1.25;
    let legend = [(0, "memory-bound: bytes / copy bandwidth".to_string()), (1, "compute-bound: FLOP / tensor-core peak".to_string())];
    bars_svg(&t, "fraction of the roofline (time the roofline allows / time taken)", &bars, &[], x_max, &legend)
}

/// A case's name and its rate with unit, from one JSON line of `bench`,
/// `run-library --json` or `peers.py` (row kernels: `rows`/`cols` and
/// `gbs`; GEMMs: `m`/`n`/`k` and `tflops`; others: `problem` or `shape`).
pub fn case_of(v: &Value) -> Option<(String, f64, &'static str)> {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let n = |k: &str| v.get(k).and_then(Value::as_f64);
    let kernel = s("kernel")?;
    let dtype = s("dtype").unwrap_or("");
    let shape = if let (Some(r), Some(c)) = (n("rows"), n("cols")) {
        format!("{r}x{c}")
    } else if let (Some(m), Some(nn), Some(k)) = (n("m"), n("n"), n("k")) {
        format!("{m}x{nn}x{k}")
    } else {
        s("problem").or(s("shape")).unwrap_or("").to_string()
    };
    let name = format!("{kernel} {dtype} {shape}");
    // (`run-library --json` says what bounds each result; `bench` and
    // `peers.py` rows of row kernels carry GB/s, their GEMMs TFLOP/s)
    let memory = match s("bound") {
        Some(b) => b == "memory",
        None => v.get("rows").is_some() || n("tflops").is_none(),
    };
    match (memory, n("gbs"), n("tflops")) {
        (true, Some(g), _) => Some((name, g, "GB/s")),
        (false, _, Some(t)) => Some((name, t, "TFLOP/s")),
        _ => n("ms").filter(|&ms| ms > 0.0).map(|ms| (name, 1.0 / ms, "1/ms")),
    }
}

/// The comparison chart of `bench` / `peers.py` JSON lines: per case, one
/// bar per implementation (`impl`), its rate over the fastest one's.
pub fn compare_svg(records: &[Value], title: &str) -> Res<String> {
    let mut impls: Vec<String> = vec![];
    let mut cases: Vec<(String, Vec<(String, f64, &'static str)>)> = vec![];
    for v in records {
        let Some((case, rate, unit)) = case_of(v) else { continue };
        let imp = v.get("impl").and_then(Value::as_str).unwrap_or("?").to_string();
        if !impls.contains(&imp) {
            impls.push(imp.clone());
        }
        match cases.iter_mut().find(|(c, _)| *c == case) {
            Some((_, list)) => list.push((imp, rate, unit)),
            None => cases.push((case, vec![(imp, rate, unit)])),
        }
    }
    // (a case with one implementation has nothing to compare)
    cases.retain(|(_, list)| list.len() > 1);
    if cases.is_empty() {
        return Err("no case with two implementations or more in the input".into());
    }
    // ferrotile first, then the peers in the order met
    impls.sort_by_key(|i| i != "ferrotile");
    let (mut bars, mut gaps) = (vec![], vec![]);
    for (case, list) in &cases {
        let best = list.iter().map(|x| x.1).fold(0.0f64, f64::max);
        for (j, imp) in impls.iter().enumerate() {
            if let Some((_, rate, unit)) = list.iter().find(|x| x.0 == *imp) {
                bars.push(Bar {
                    label: if bars.len() == gaps.last().map_or(0, |g| g + 1) { case.clone() } else { String::new() },
                    value: rate / best,
                    note: format!("{imp}: {rate:.1} {unit}"),
                    color: j,
                });
            }
        }
        gaps.push(bars.len() - 1);
    }
    let legend: Vec<(usize, String)> = impls.iter().enumerate().map(|(j, i)| (j, i.clone())).collect();
    bars_svg(title, "rate relative to the fastest implementation of the case", &bars, &gaps, 1.3, &legend)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Math;

    #[test]
    fn roofline_chart_has_a_bar_per_result_with_a_roof() {
        let roofs = Roofs { copy_gbs: 1000.0, tensor16_tflops: None };
        let row = |kernel, math, ops| Row {
            kernel,
            dtype: "bf16".into(),
            problem: "64x64".into(),
            err: 0.0,
            tol: 1.0,
            cold_ms: 1.0,
            warm_ms: 0.5,
            bytes: 2.5e8,
            ops,
            math,
        };
        let rows = [row("softmax", Math::None, 0.0), row("gemm", Math::Tensor16, 1e9)];
        // the GEMM needs the tensor-core peak, unknown here: left out
        let svg = roofline_svg(&rows, &roofs, "t").unwrap();
        assert!(svg.contains("softmax bf16 64x64"), "{svg}");
        assert!(!svg.contains("gemm bf16"));
        assert!(svg.contains("1 without a roof left out"));
        // 2.5e8 bytes in 0.5 ms at 1000 GB/s: 0.25 ms allowed, 50 %
        assert!(svg.contains("500.0 GB/s (50%)"), "{svg}");
        let with_peak = Roofs { tensor16_tflops: Some(4.0), ..roofs };
        // 1e9 FLOP at 4 TFLOP/s: 0.25 ms allowed (> 0.25 ms of bytes? equal): 50 %
        let svg = roofline_svg(&rows, &with_peak, "t").unwrap();
        assert!(svg.contains("gemm bf16 64x64"));
        assert!(roofline_svg(&rows[1..], &roofs, "t").is_err());
    }

    #[test]
    fn comparison_chart_groups_implementations_per_case() {
        let lines = [
            r#"{"impl":"ferrotile","kernel":"softmax","dtype":"bf16","rows":4096,"cols":4096,"gbs":3000.0}"#,
            r#"{"impl":"eager","kernel":"softmax","dtype":"bf16","rows":4096,"cols":4096,"gbs":2000.0}"#,
            r#"{"impl":"cublas","kernel":"gemm","dtype":"bf16","m":64,"n":64,"k":64,"tflops":700.0}"#,
            r#"{"impl":"ferrotile","kernel":"gemm","dtype":"bf16","m":64,"n":64,"k":64,"tflops":735.0}"#,
        ];
        let recs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(case_of(&recs[0]).unwrap(), ("softmax bf16 4096x4096".to_string(), 3000.0, "GB/s"));
        assert_eq!(case_of(&recs[2]).unwrap(), ("gemm bf16 64x64x64".to_string(), 700.0, "TFLOP/s"));
        let svg = compare_svg(&recs, "cmp").unwrap();
        for want in ["softmax bf16 4096x4096", "gemm bf16 64x64x64", "eager: 2000.0 GB/s", "cublas: 700.0 TFLOP/s", "ferrotile: 735.0 TFLOP/s"] {
            assert!(svg.contains(want), "{want} missing");
        }
        assert!(compare_svg(&[], "cmp").is_err());
        // a case only one implementation ran is left out
        assert!(compare_svg(&recs[..1], "cmp").is_err());
    }
}
