//! The page's pictures, drawn here as inline SVG (no library, no font,
//! nothing fetched): a cell's phases as one stacked bar, and each
//! benchmark configuration's ops/s across kernels with ±1 sd whiskers.

use super::{kernel_of, Esc, Order, Placed};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// Fixed colours, taken in turn.
const PALETTE: [&str; 9] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f",
];

/// Width of the phases bar, in pixels.
const BAR_W: f64 = 600.0;

/// A cell's phases (seconds each) as one stacked bar with a legend; the
/// phases of no time are left out of both (each keeps its colour).
pub(super) fn phases(out: &mut String, phases: &BTreeMap<String, f64>) {
    let total: f64 = phases.values().filter(|s| s.is_finite() && **s > 0.0).sum();
    let _ = write!(
        out,
        "<svg class=\"phases\" width=\"{BAR_W}\" height=\"18\" viewBox=\"0 0 {BAR_W} 18\" role=\"img\">"
    );
    let mut x = 0.0;
    for (i, (name, s)) in phases.iter().enumerate() {
        if total <= 0.0 || !(s.is_finite() && *s > 0.0) {
            continue;
        }
        let w = s / total * BAR_W;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"18\" fill=\"{}\"><title>{}: {s:.2} s</title></rect>",
            PALETTE[i % PALETTE.len()],
            Esc(name)
        );
        x += w;
    }
    out.push_str("</svg>\n<p class=\"legend\">");
    for (i, (name, s)) in phases.iter().enumerate() {
        if !(s.is_finite() && *s >= 0.005) {
            continue;
        }
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{} {s:.2} s</span> ",
            PALETTE[i % PALETTE.len()],
            Esc(name)
        );
    }
    out.push_str("</p>\n");
}

/// One bar of a benchmark plot.
struct Point<'a> {
    kernel: &'a str,
    mean: f64,
    sd: f64,
    n: usize,
}

/// Every benchmark configuration (suite, topology, test, config) of the
/// cells as a plot across kernels; nothing when no cell has rows.
pub(super) fn bench(out: &mut String, placed: &[Placed]) {
    let mut keys: Order = Order::default();
    let mut labels: Vec<String> = Vec::new();
    let mut plots: HashMap<usize, Vec<Point>> = HashMap::new();
    // The key is joined with NUL, which no name holds (Esc drops it anyway).
    let mut joined: Vec<String> = Vec::new();
    for p in placed {
        for b in &p.cell.bench {
            joined.push(format!(
                "{}\0{}\0{}\0{}",
                p.cell.suite, p.cell.topology, b.test, b.config
            ));
        }
    }
    let mut j = 0;
    for p in placed {
        for b in &p.cell.bench {
            let key = &joined[j];
            j += 1;
            let k = keys.add(key);
            if k == labels.len() {
                labels.push(format!(
                    "{}/{} on {} ({})",
                    b.test, b.config, p.cell.topology, p.cell.suite
                ));
            }
            plots.entry(k).or_default().push(Point {
                kernel: kernel_of(p.cell),
                mean: b.ops_per_s,
                sd: b.sd,
                n: b.n,
            });
        }
    }
    if keys.names.is_empty() {
        return;
    }
    out.push_str("<section id=\"bench\">\n<h2>Benchmarks</h2>\n<p>Mean ops/s per kernel, whiskers ±1 standard deviation over the rounds; compare within one run.</p>\n");
    for (k, label) in labels.iter().enumerate() {
        let _ = writeln!(out, "<h3>{}</h3>", Esc(label));
        plot(out, plots.get(&k).map(Vec::as_slice).unwrap_or_default());
    }
    out.push_str("</section>\n");
}

fn plot(out: &mut String, points: &[Point]) {
    const H: f64 = 200.0;
    const TOP: f64 = 16.0;
    const LEFT: f64 = 70.0;
    const BAR: f64 = 80.0;
    let ymax = points
        .iter()
        .map(|p| p.mean + p.sd)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.1;
    let width = LEFT + BAR * points.len() as f64 + 20.0;
    let y = |v: f64| TOP + H - (v.clamp(0.0, ymax) / ymax * H);
    let _ = write!(
        out,
        "<svg class=\"bench\" width=\"{width:.0}\" height=\"{:.0}\" viewBox=\"0 0 {width:.0} {:.0}\" role=\"img\">",
        TOP + H + 40.0,
        TOP + H + 40.0
    );
    // The axis, with its top and middle values.
    let _ = write!(
        out,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{:.1}\" class=\"axis\"/>",
        TOP + H
    );
    for v in [0.0, ymax / 2.0, ymax] {
        let _ = write!(
            out,
            "<text x=\"{:.0}\" y=\"{:.1}\" class=\"tick\">{}</text>",
            LEFT - 4.0,
            y(v) + 4.0,
            ops(v)
        );
    }
    for (i, p) in points.iter().enumerate() {
        let x = LEFT + 10.0 + BAR * i as f64;
        let w = BAR - 20.0;
        let mean = if p.mean.is_finite() { p.mean } else { 0.0 };
        let sd = if p.sd.is_finite() { p.sd } else { 0.0 };
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {} ops/s ± {} (n={})</title></rect>",
            y(mean),
            TOP + H - y(mean),
            PALETTE[i % PALETTE.len()],
            Esc(p.kernel),
            ops(mean),
            ops(sd),
            p.n
        );
        let cx = x + w / 2.0;
        let _ = write!(
            out,
            "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" class=\"whisker\"/>",
            y(mean - sd),
            y(mean + sd)
        );
        let _ = write!(
            out,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" class=\"label\">{}</text>",
            TOP + H + 16.0,
            Esc(p.kernel)
        );
    }
    out.push_str("</svg>\n");
}

/// `1.23M`, `456k`, `78`.
fn ops(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}
