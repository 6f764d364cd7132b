//! A cell's section: status, time, error, its failing, xfail and skipped
//! cases, kernel reports with their console excerpt, repeats, where the
//! time went, notes and the paths of its logs. Every results string
//! goes through [`Esc`].

use super::{duration, filter_attrs, kernel_of, svg, utc, Esc, Placed};
use crate::results::{Case, Cell};
use std::fmt::Write as _;
use std::path::Path;

pub(super) fn section(out: &mut String, p: &Placed) {
    let c = p.cell;
    let _ = write!(
        out,
        "<section class=\"cell s-{status}\" id=\"{id}\" {attrs}>\n\
         <h3><a href=\"#{id}\">{name}</a> <span class=\"badge s-{status}\">{status}</span></h3>\n",
        status = Esc(&c.status),
        id = p.id,
        attrs = filter_attrs(c),
        name = Esc(&c.name),
    );
    facts(out, c);
    if let Some(e) = &c.error {
        let _ = writeln!(out, "<p class=\"error\">Error:</p><pre>{}</pre>", Esc(e));
    }
    cases(out, c);
    reports(out, c);
    repeat(out, c);
    if let Some(vm) = &c.vm {
        if !vm.profile.phases.is_empty() {
            out.push_str("<h4>Where the time went</h4>\n");
            svg::phases(out, &vm.profile.phases);
            if !vm.profile.tests.is_empty() {
                let _ = write!(
                    out,
                    "<details><summary>{} test binaries</summary><table class=\"tests\">",
                    vm.profile.tests.len()
                );
                for t in &vm.profile.tests {
                    let _ = write!(
                        out,
                        "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
                        Esc(&t.name),
                        duration(t.s)
                    );
                }
                out.push_str("</table></details>\n");
            }
        }
        if !vm.notes.is_empty() {
            out.push_str("<h4>Notes</h4>\n<ul class=\"notes\">");
            for n in &vm.notes {
                let _ = write!(out, "<li>{}</li>", Esc(n));
            }
            out.push_str("</ul>\n");
        }
    }
    logs(out, c);
    out.push_str("</section>\n");
}

/// Kernel, topology, suite, time: one definition list.
fn facts(out: &mut String, c: &Cell) {
    out.push_str("<dl class=\"facts\">");
    let kernel = if kernel_of(c) == c.kernel {
        Esc(&c.kernel).to_string()
    } else {
        format!("{} ({})", Esc(kernel_of(c)), Esc(&c.kernel))
    };
    let _ = write!(out, "<dt>kernel</dt><dd>{kernel}");
    if let Some(f) = &c.kernel_facts {
        let _ = write!(out, ": {}", Esc(&f.description));
    }
    out.push_str("</dd>");
    let _ = write!(out, "<dt>topology</dt><dd>{}", Esc(&c.topology));
    if let Some(l) = &c.topology_layout {
        let nodes: Vec<String> = l
            .nodes
            .iter()
            .map(|n| format!("{}c/{}M", n.cpus, n.mem_mib))
            .collect();
        let _ = write!(out, " ({} nodes: {})", l.nodes.len(), nodes.join(" "));
    }
    out.push_str("</dd>");
    let _ = write!(out, "<dt>suite</dt><dd>{}</dd>", Esc(&c.suite));
    if let Some(e) = &c.expect {
        let _ = write!(out, "<dt>expect</dt><dd>{}</dd>", Esc(e));
    }
    let _ = write!(
        out,
        "<dt>duration</dt><dd>{}</dd><dt>cases</dt><dd>{} pass, {} fail, {} xfail, {} skip</dd>",
        duration(c.duration_s),
        c.counts.pass,
        c.counts.fail,
        c.counts.xfail,
        c.counts.skip
    );
    if let Some(vm) = &c.vm {
        let _ = write!(
            out,
            "<dt>VM</dt><dd>{}, started {} UTC: {}</dd>",
            Esc(&vm.accel),
            utc(vm.started),
            Esc(&vm.end)
        );
        for b in &vm.boot_retries {
            let _ = write!(
                out,
                "<dt>boot retry</dt><dd>boot {} crashed ({}): <code>{}</code></dd>",
                b.attempt,
                Esc(&b.signature),
                Esc(&b.line)
            );
        }
    }
    out.push_str("</dl>\n");
}

/// The failing, xfail and skipped cases with why; the passes as names.
fn cases(out: &mut String, c: &Cell) {
    let of = |status: &'static str| c.cases.iter().filter(move |k| k.status == status);
    for (status, heading) in [
        ("fail", "Failing cases"),
        ("xfail", "Known failures (xfail)"),
    ] {
        if of(status).next().is_none() {
            continue;
        }
        let _ = writeln!(out, "<h4>{heading}</h4>\n<ul class=\"cases\">");
        for k in of(status) {
            case(out, k);
        }
        out.push_str("</ul>\n");
    }
    let skips = of("skip").count();
    if skips > 0 {
        let _ = writeln!(
            out,
            "<details><summary>{skips} skipped</summary>\n<ul class=\"cases\">"
        );
        for k in of("skip") {
            case(out, k);
        }
        out.push_str("</ul></details>\n");
    }
    let passes = of("pass").count();
    if passes > 0 {
        let _ = write!(
            out,
            "<details><summary>{passes} passed</summary><p class=\"passes\">"
        );
        for (i, k) in of("pass").enumerate() {
            let sep = if i == 0 { "" } else { " · " };
            let _ = write!(out, "{sep}{}", Esc(&k.name));
        }
        out.push_str("</p></details>\n");
    }
}

fn case(out: &mut String, k: &Case) {
    let _ = write!(
        out,
        "<li class=\"case\" data-case-status=\"{}\"><code>{}</code>",
        Esc(&k.status),
        Esc(&k.name)
    );
    if let Some(r) = &k.repeat {
        let _ = write!(out, " (failed {} of {} runs", r.failures, r.runs);
        if let Some(f) = r.first_failure {
            let _ = write!(out, ", first in iteration {f}");
        }
        out.push(')');
    }
    if let Some(m) = &k.message {
        let _ = write!(out, "<pre>{}</pre>", Esc(m));
    }
    if let Some(kf) = &k.known_failure {
        let _ = write!(
            out,
            "<p class=\"known\">known failure {}: {}</p>",
            Esc(&kf.entry),
            Esc(&kf.reason)
        );
    }
    out.push_str("</li>\n");
}

fn reports(out: &mut String, c: &Cell) {
    let Some(vm) = &c.vm else { return };
    if vm.kernel_reports.is_empty() {
        return;
    }
    out.push_str("<h4>Kernel reports</h4>\n<ul class=\"reports\">");
    for r in &vm.kernel_reports {
        let _ = write!(
            out,
            "<li class=\"report\"><strong>{}</strong>: {} <span class=\"where\">(console line {}",
            Esc(&r.kind),
            Esc(&r.title),
            r.line
        );
        match (&r.test, &r.case) {
            (Some(t), Some(c)) => {
                let _ = write!(out, ", during {}/{}", Esc(t), Esc(c));
            }
            (Some(t), None) => {
                let _ = write!(out, ", during {}", Esc(t));
            }
            _ => {}
        }
        let _ = writeln!(out, ")</span><pre>{}</pre></li>", Esc(&r.excerpt));
    }
    out.push_str("</ul>\n");
}

fn repeat(out: &mut String, c: &Cell) {
    let Some(r) = &c.repeat else { return };
    let _ = write!(
        out,
        "<h4>Repeats</h4>\n<p>{} of {} iterations ran{}{}",
        r.iterations,
        r.times,
        if r.until_fail {
            " (until a failure)"
        } else {
            ""
        },
        if r.fresh_boot {
            ", each in a fresh boot"
        } else {
            ""
        }
    );
    match r.first_failure {
        Some(f) => {
            let _ = write!(out, "; first failing iteration: {f}");
        }
        None => out.push_str("; none failed"),
    }
    if let Some(l) = &r.failing_iteration_logs {
        let _ = write!(out, "; its logs: {}", path_link(l));
    }
    out.push_str("</p>\n");
}

/// The console log, QEMU's command line and the cell's directory (the
/// results carry their paths, not their text).
fn logs(out: &mut String, c: &Cell) {
    if c.out_dir.is_empty() {
        return;
    }
    let dir = Path::new(&c.out_dir);
    let console =
        c.vm.as_ref()
            .and_then(|v| v.console_log.clone())
            .unwrap_or_else(|| dir.join("console.log").display().to_string());
    let _ = writeln!(
        out,
        "<p class=\"logs\">console log: {}; QEMU command: {}; directory: {}</p>",
        path_link(&console),
        path_link(&dir.join("qemu-argv.txt").display().to_string()),
        path_link(&c.out_dir)
    );
    // The command itself, so the page alone says how the cell booted.
    if let Some(cmd) =
        c.vm.as_ref()
            .map(|v| &v.qemu_command)
            .filter(|c| !c.is_empty())
    {
        let _ = writeln!(
            out,
            "<details class=\"qemu\"><summary>QEMU command</summary><pre>{}</pre></details>",
            Esc(cmd)
        );
    }
}

/// A link to a local path: relative to the page, or absolute (the page
/// is read from a `file://` URL).
fn path_link(p: &str) -> String {
    // `a:b` would be read as a URL scheme; `./` keeps it a path.
    let mut href = if p.starts_with('/') || !p.contains(':') {
        String::new()
    } else {
        "./".to_string()
    };
    for c in p.chars() {
        match c {
            '%' => href.push_str("%25"),
            '#' => href.push_str("%23"),
            '?' => href.push_str("%3F"),
            ' ' => href.push_str("%20"),
            c => href.push(c),
        }
    }
    format!("<a href=\"{}\"><code>{}</code></a>", Esc(&href), Esc(p))
}
