//! The terminal reporter: progress and results on the terminal, from the
//! run's events. Two shapes: per case (`harness run`: a PASS/FAIL line per
//! case, then the counts) and per cell (`harness matrix`: a progress bar, a
//! line per cell, the kernels x topologies table). Lives in the binary:
//! the library prints nothing of its own.

use harness::events::{CellOutcome, CellStatus, Event};
use harness::reporter::{ReportError, Reporter};
use harness::verdict::CaseStatus;
use harness::vm::LiveLine;
use indicatif::{ProgressBar, ProgressStyle};

/// Which shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every case of the (one) cell.
    Cases,
    /// A line per cell and a summary table.
    Cells,
    /// Preparation steps only (the front door prints its own results:
    /// `bench`).
    Steps,
}

/// Prints a run.
pub struct Terminal {
    shape: Shape,
    bar: Option<ProgressBar>,
    running: Vec<String>,
    failed: usize,
    step: String,
    outcomes: Vec<CellOutcome>,
    /// Lines printed after the summary (where the reports are).
    footer: Vec<String>,
    /// Print live console and result lines (`--live`).
    live: bool,
    /// After the summary, the table of the N costliest items (`--profile`).
    profile: Option<usize>,
    /// Known-failure entries that excused nothing.
    staleness: harness::known::Staleness,
}

impl Terminal {
    /// A reporter of this shape; `footer` lines end the output.
    pub fn new(shape: Shape, footer: Vec<String>) -> Terminal {
        Terminal {
            shape,
            bar: None,
            running: Vec::new(),
            failed: 0,
            step: String::new(),
            outcomes: Vec::new(),
            footer,
            live: false,
            profile: None,
            staleness: Default::default(),
        }
    }

    /// After the summary, prints the `top` costliest items (`--profile`).
    pub fn profile(mut self, top: Option<usize>) -> Terminal {
        self.profile = top;
        self
    }

    /// Each phase's share of the run's work, and with `--profile` the
    /// costliest items.
    fn time(&self, prepare: std::time::Duration) {
        let cells: Vec<_> = self.outcomes.iter().filter_map(|o| o.times()).collect();
        println!("{}", harness::profile::totals(prepare, &cells).line());
        if let Some(top) = self.profile {
            let items = harness::profile::costliest(prepare, &cells, top);
            print!("{}", harness::profile::table(&items));
        }
    }

    /// Prints the live lines of cells that send them (`--live`).
    pub fn live(mut self, on: bool) -> Terminal {
        self.live = on;
        self
    }

    fn live_line(&self, index: usize, line: &LiveLine) {
        // Only matrix runs have more than one cell to tell apart.
        let cell = match self.shape {
            Shape::Cells => format!("[{index}] "),
            _ => String::new(),
        };
        let text = match line {
            LiveLine::Console(l) => format!("{cell}console| {l}"),
            LiveLine::Result(l) => format!("{cell}results| {l}"),
            LiveLine::Dropped(n) => {
                format!("{cell}harness| {n} line(s) not shown: the terminal fell behind")
            }
        };
        self.say(&text);
    }

    fn say(&self, line: &str) {
        // While the shell's bridge has the terminal in raw mode, `\n`
        // alone would not return the cursor.
        let end = if harness::console_bridge::raw_active() {
            "\r\n"
        } else {
            "\n"
        };
        match &self.bar {
            Some(b) => b.suspend(|| eprint!("{line}{end}")),
            None => eprint!("{line}{end}"),
        }
    }

    fn refresh(&self) {
        if let Some(b) = &self.bar {
            let cur = self
                .running
                .last()
                .map_or(self.step.clone(), |r| format!("booting {r}"));
            b.set_message(format!(
                "| {} running | {} failed | {cur}",
                self.running.len(),
                self.failed
            ));
        }
    }

    fn cell_line(o: &CellOutcome) -> String {
        let word = match &o.status {
            CellStatus::Passed => "PASS".to_string(),
            CellStatus::Failed => "FAIL".to_string(),
            CellStatus::Interrupted => "INTR".to_string(),
            CellStatus::Error(e) => format!("ERROR ({e})"),
            CellStatus::NotRun(why) => format!("SKIP ({why})"),
        };
        format!(
            "{word} {} ({} passed, {} failed, {} xfail, {} skipped) {:.1} s",
            o.meta.name,
            o.counts.pass,
            o.counts.fail,
            o.counts.xfail,
            o.counts.skip,
            o.duration.as_secs_f64()
        )
    }

    /// A `RETRY` line per boot that crashed with a known signature and
    /// was booted again.
    fn retry_lines(o: &CellOutcome) -> Vec<String> {
        let retries = o.result.as_ref().map(|r| r.boot_retries.as_slice());
        retries
            .unwrap_or_default()
            .iter()
            .map(|r| {
                format!(
                    "RETRY {} {} attempt {}: {} (console kept as console-boot-failure-{}.log)",
                    o.meta.name, r.signature, r.attempt, r.line, r.attempt
                )
            })
            .collect()
    }

    fn cases(o: &CellOutcome) {
        for c in &o.cases {
            // A repeated case says how often it ran: `PASS a/x (20/20)`.
            let runs = o
                .repeat
                .as_ref()
                .and_then(|r| r.case(&c.name))
                .map(|r| format!(" ({}/{})", r.runs - r.failures, r.runs))
                .unwrap_or_default();
            match &c.status {
                CaseStatus::Pass => println!("PASS {}{runs}", c.name),
                CaseStatus::Skip(r) => println!("SKIP {}{runs} ({r})", c.name),
                CaseStatus::Fail { message, .. } => println!("FAIL {}{runs}: {message}", c.name),
                CaseStatus::Xfail { message, entry, .. } => {
                    println!("XFAIL {}{runs}: {message} (known failure, {entry})", c.name)
                }
            }
        }
        for line in Self::retry_lines(o) {
            println!("{line}");
        }
        match (&o.result, &o.status) {
            (Some(cell), _) => {
                for note in &cell.notes {
                    println!("NOTE {note}");
                }
                println!(
                    "{}: {} in {:.1} s under {}; console log {}",
                    cell.name,
                    harness::verdict::describe(&cell.end),
                    cell.duration.as_secs_f64(),
                    cell.accel,
                    cell.console_log
                        .clone()
                        .unwrap_or_else(|| o.meta.out_dir.join("console.log"))
                        .display()
                );
            }
            (None, CellStatus::Error(e) | CellStatus::NotRun(e)) => {
                println!("{}: {e}", o.meta.name)
            }
            (None, _) => {}
        }
        if let Some(r) = &o.repeat {
            println!("{}", r.line());
        }
    }
}

impl Reporter for Terminal {
    fn report(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted { cells, .. } if self.shape == Shape::Cells => {
                let bar = ProgressBar::new(cells.len() as u64);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:30}] {pos}/{len} done {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                self.bar = Some(bar);
            }
            Event::RunStarted { .. } => {}
            Event::Step(s) => {
                self.say(&format!("harness: {s}"));
                self.step = s.clone();
            }
            Event::CellStarted { name, .. } => self.running.push(name.clone()),
            Event::Live { index, line } if self.live => self.live_line(*index, line),
            Event::Live { .. } => {}
            Event::CellFinished(o) => {
                self.running.retain(|r| *r != o.meta.name);
                self.failed += usize::from(!o.status.ok());
                match self.shape {
                    Shape::Cells => {
                        self.say(&Self::cell_line(o));
                        for line in Self::retry_lines(o) {
                            self.say(&line);
                        }
                        // A known failure that happened is seen, not only
                        // counted: which case, which message, which entry.
                        for c in &o.cases {
                            if let CaseStatus::Xfail { message, entry, .. } = &c.status {
                                self.say(&format!(
                                    "  XFAIL {}: {message} (known failure, {entry})",
                                    c.name
                                ));
                            }
                        }
                    }
                    Shape::Cases => Self::cases(o),
                    Shape::Steps => {}
                }
                if let Some(b) = &self.bar {
                    b.inc(1);
                }
                self.staleness.observe(o);
                self.outcomes.push((**o).clone());
            }
            Event::RunFinished { stats, .. } => {
                if let Some(b) = self.bar.take() {
                    b.finish_and_clear();
                }
                match self.shape {
                    Shape::Cells => {
                        let mut sorted = self.outcomes.clone();
                        sorted.sort_by_key(|o| o.meta.index);
                        println!("{}", harness::matrix::report::summary_table(&sorted));
                        let count = |f: &dyn Fn(&CellStatus) -> bool| {
                            sorted.iter().filter(|o| f(&o.status)).count()
                        };
                        let passed = count(&|s| s.ok());
                        let not_run = count(&|s| matches!(s, CellStatus::NotRun(_)));
                        let (cw, cpu) = (stats.cells_wall.as_secs_f64(), stats.cells_cpu);
                        let wall = stats.prepare.as_secs_f64() + cw;
                        println!(
                            "cells: {passed} passed, {} failed, {not_run} not run; {wall:.1} s wall ({:.1} s preparing, {cw:.1} s running cells); QEMU CPU {cpu:.1} s = {:.2} cores busy while cells ran",
                            sorted.len() - passed - not_run,
                            stats.prepare.as_secs_f64(),
                            cpu / cw.max(1e-9)
                        );
                    }
                    Shape::Cases | Shape::Steps => {}
                }
                if self.shape == Shape::Cells {
                    self.time(stats.prepare);
                }
                for k in self.staleness.stale() {
                    println!(
                        "STALE known failure {}: excused nothing in this run (its case ran, never with that failure); remove it or fix it",
                        k.describe()
                    );
                }
                for k in self.staleness.unseen() {
                    println!(
                        "UNSEEN intermittent known failure {}: did not fire in this run (seen: {})",
                        k.describe(),
                        k.intermittent.as_deref().unwrap_or_default()
                    );
                }
                for l in &self.footer {
                    println!("{l}");
                }
                if self.shape == Shape::Cases {
                    let (p, f, x, s) = self.outcomes.iter().fold((0, 0, 0, 0), |a, o| {
                        (
                            a.0 + o.counts.pass,
                            a.1 + o.counts.fail,
                            a.2 + o.counts.xfail,
                            a.3 + o.counts.skip,
                        )
                    });
                    println!("{p} passed, {f} failed, {x} xfail, {s} skipped");
                    self.time(stats.prepare);
                }
            }
        }
        self.refresh();
        Ok(())
    }
}
