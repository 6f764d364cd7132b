//! The plot: ops/s by configuration (groups) and kernel/topology (bars in a
//! group), with ±1 standard deviation whiskers, as SVG via plotters (SVG
//! backend only: no fonts or system libraries needed).

use super::report::{Report, RowStatus};
use plotters::prelude::*;
use std::path::Path;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Series (kernel + topology) and configurations in first-seen order.
pub fn axes(report: &Report) -> (Vec<String>, Vec<String>) {
    let mut series: Vec<String> = Vec::new();
    let mut configs: Vec<String> = Vec::new();
    for r in &report.rows {
        let s = format!("{} {}", r.kernel, r.topology);
        if !series.contains(&s) {
            series.push(s);
        }
        if !configs.contains(&r.config) {
            configs.push(r.config.clone());
        }
    }
    (series, configs)
}

/// Renders the report's rows to an SVG string.
pub fn svg(report: &Report) -> Result<String, String> {
    let (series, configs) = axes(report);
    let ymax = report
        .rows
        .iter()
        .filter(|r| r.total.n > 0)
        .map(|r| r.total.mean + r.total.sd)
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.15;
    let width = (160 + 90 * configs.len().max(1) * series.len().clamp(1, 3)) as u32;
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (width.clamp(640, 2400), 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let title = format!(
            "futex ops/s by configuration ({}; {} rounds x {} s; compare within this run)",
            report.meta.accel, report.meta.rounds, report.meta.runtime_s
        );
        let n = configs.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .margin_right(80)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0f64..n, 0.0f64..ymax)
            .map_err(|e| e.to_string())?;
        let names = configs.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(configs.len() * 2 + 1)
            .x_label_formatter(&|x| {
                // Labels sit at group centres (k + 0.5).
                let k = x.floor();
                if (x - k - 0.5).abs() < 1e-6 {
                    names.get(k as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("ops/s (total)")
            .y_label_formatter(&|y| guest_tests::bench::si(*y))
            .draw()
            .map_err(|e| e.to_string())?;
        let ns = series.len().max(1) as f64;
        let bar = 0.8 / ns;
        for (si, s) in series.iter().enumerate() {
            let color = PALETTE[si % PALETTE.len()];
            let rows: Vec<_> = report
                .rows
                .iter()
                .filter(|r| format!("{} {}", r.kernel, r.topology) == *s)
                .collect();
            let mut rects = Vec::new();
            let mut whiskers = Vec::new();
            let mut marks = Vec::new();
            for r in &rows {
                let Some(ci) = configs.iter().position(|c| *c == r.config) else {
                    continue;
                };
                let x0 = ci as f64 + 0.1 + bar * si as f64;
                if r.total.n == 0 || r.status != RowStatus::Ok {
                    let word = match r.status {
                        RowStatus::Skip => "skip",
                        RowStatus::Fail => "FAIL",
                        _ => "n/a",
                    };
                    marks.push(Text::new(
                        word.to_string(),
                        (x0, ymax * 0.02),
                        ("sans-serif", 11).into_font().color(&color),
                    ));
                    continue;
                }
                rects.push(Rectangle::new(
                    [(x0, 0.0), (x0 + bar * 0.9, r.total.mean)],
                    color.filled(),
                ));
                let xm = x0 + bar * 0.45;
                let (lo, hi) = (
                    (r.total.mean - r.total.sd).max(0.0),
                    r.total.mean + r.total.sd,
                );
                whiskers.push(PathElement::new(vec![(xm, lo), (xm, hi)], BLACK));
            }
            chart
                .draw_series(rects)
                .map_err(|e| e.to_string())?
                .label(s.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
            chart.draw_series(whiskers).map_err(|e| e.to_string())?;
            chart.draw_series(marks).map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Writes the SVG to `path`.
pub fn write(report: &Report, path: &Path) -> Result<(), String> {
    let s = svg(report)?;
    crate::reporter::write_atomic(path, s.as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::report::{Meta, Row};
    use super::*;
    use guest_tests::bench::Stats;

    fn row(kernel: &str, config: &str, xs: &[f64], status: RowStatus) -> Row {
        Row {
            kernel: kernel.into(),
            topology: "nodes=2".into(),
            config: config.into(),
            spec: String::new(),
            status,
            reason: String::new(),
            total: Stats::of(xs),
            per_thread: Stats::of(xs),
            threads: 1,
            ratio: None,
        }
    }

    #[test]
    fn svg_has_bars_labels_and_legend() {
        let report = Report {
            meta: Meta {
                accel: "tcg".into(),
                qemu: "7.2".into(),
                baseline: "global".into(),
                rounds: 2,
                runtime_s: 1.0,
                host_cpus: 2,
                note: String::new(),
            },
            rows: vec![
                row("k1", "global", &[100.0, 120.0], RowStatus::Ok),
                row("k1", "b16", &[300.0, 280.0], RowStatus::Ok),
                row("k2", "global", &[90.0, 95.0], RowStatus::Ok),
                row("k2", "Ib128", &[], RowStatus::Skip),
            ],
        };
        let (series, configs) = axes(&report);
        assert_eq!(series, ["k1 nodes=2", "k2 nodes=2"]);
        assert_eq!(configs, ["global", "b16", "Ib128"]);
        let s = svg(&report).unwrap();
        assert!(s.starts_with("<svg"), "{}", &s[..100]);
        for label in ["global", "b16", "Ib128", "k1 nodes=2", "k2 nodes=2", "tcg"] {
            assert!(s.contains(label), "missing {label}");
        }
        // 3 bars (the skipped row has none) + 2 legend swatches + background.
        let blue = s.matches("fill=\"#1F77B4\"").count();
        assert!(blue >= 3, "{blue} blue rects");
        assert!(
            s.contains(">\nskip\n<") || s.contains(">skip<"),
            "skipped row not marked"
        );
    }
}
