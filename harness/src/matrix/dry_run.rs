//! `harness matrix --dry-run`: what the selected cells would do, with
//! nothing done. Each cell's plan is the one `harness run --dry-run` gives
//! ([`crate::cell::bootplan::planned`]): its tests, initramfs, kernel
//! command line and shell-quoted QEMU argv. What would be fetched or built
//! is said once per kernel (a run resolves each kernel once). No QEMU is
//! needed; nothing is fetched, built, unpacked or created.

use super::model::SuiteKind;
use super::run::{cell_dir, Options};
use super::Matrix;
use crate::error::Error;
use crate::kernel::cache::Cache;
use crate::planner::CellRequest;
use std::fmt::Write as _;

/// The plan of `cells` (indices into `m.cells`) as text; `writes`: the
/// run-wide files a run would write, with what they are.
pub fn plan(
    m: &Matrix,
    cells: &[usize],
    opts: &Options,
    writes: &[String],
) -> Result<String, Error> {
    let cache = Cache::from_env().map_err(Error::infra)?;
    let (qemu, qemu_note) = crate::dry_run::qemu();
    let (bins, unpack) = crate::dry_run::guest_bins(&cache);
    let mut notes: Vec<String> = Vec::new();
    let kvm = crate::host::probe_kvm();
    let mut would: Vec<String> = Vec::new();
    let mut add = |w: String| {
        if !would.contains(&w) {
            would.push(w);
        }
    };
    let mut plans = String::new();
    for &c in cells {
        let cell = &m.cells[c];
        let kernel = &m.kernels[cell.kernel];
        let k = crate::dry_run::kernel_for(
            &kernel.spec,
            kernel.arch,
            opts.debian_mirror.as_deref(),
            &cache,
        );
        for w in &k.would {
            add(format!("{w} (kernel {})", kernel.name));
        }
        let suite = &m.suites[cell.suite];
        let tests = match &suite.kind {
            SuiteKind::Builtin(name) if crate::suite::is_kselftest_suite(name) => {
                add(format!(
                    "build the upstream futex selftests for kernel {} (from Debian's linux-source of its series) into the cache: their programs are the tests of its {} cells",
                    kernel.name, suite.name
                ));
                vec![]
            }
            _ => m.suite_tests(cell),
        };
        let (accel, _) =
            crate::host::choose_accel_for(cell.accel, &kvm, kernel.arch).map_err(Error::infra)?;
        let topo = &m.topologies[cell.topology];
        let out_dir = cell_dir(&opts.out_dir, &cell.name);
        let mut req = CellRequest::new(
            &kernel.spec_text,
            k.image.clone(),
            &topo.name,
            topo.topology.clone(),
            &suite.name,
            tests,
            accel,
            out_dir.clone(),
        );
        req.name = cell.name.clone();
        req.arch = kernel.arch;
        req.kernel_name = kernel.name.clone();
        req.tcg_thread = opts.tcg_thread;
        req.cmdline = cell.cmdline.clone();
        req.debug.qemu_args = cell.qemu_args.clone();
        req.timeout_scale = cell.timeout_scale;
        req.expect = Some(kernel.expect.encode());
        req.test_glob = opts.test_glob.clone();
        req.known_failures = suite.known_failures.clone();
        let planned = crate::planner::cell(0, req);
        let text = if kernel.arch == crate::arch::Arch::X86_64 {
            crate::cell::bootplan::planned(&planned.spec, &qemu, &bins)
        } else {
            let (q, q_note) = crate::dry_run::qemu_for(kernel.arch);
            let (b, b_note) = crate::dry_run::guest_bins_for(&cache, kernel.arch);
            for n in q_note.into_iter().chain(b_note) {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
            crate::cell::bootplan::planned(&planned.spec, &q, &b)
        }
        .map_err(Error::infra)?;
        let _ = writeln!(
            plans,
            "\nwould write: {} (console.log, results.ktap, junit.xml, qemu-argv.txt)",
            out_dir.display()
        );
        if kernel.arch != crate::arch::Arch::X86_64 {
            let _ = writeln!(plans, "shares: none (shares are x86-64 only so far)");
        } else if !cell.shares.is_empty() || cell.artifacts {
            let _ = writeln!(
                plans,
                "shares: {} (decided at run time, with virtiofsd and the kernel's virtiofs support)",
                if cell.shares.is_empty() {
                    "the artifacts share".to_string()
                } else {
                    cell.shares
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            );
        }
        plans.push_str(&text);
    }
    if let Some(u) = unpack {
        add(u);
    }
    for n in notes {
        match n.strip_prefix("fail: ") {
            Some(why) => add(format!("fail: {why}")),
            None if n.starts_with("unpack ") => add(n),
            None => add(format!("note: {n}")),
        }
    }
    let mut s = format!(
        "dry run: nothing was fetched, built, written or started\n{} cells\n",
        cells.len()
    );
    for w in &would {
        let _ = writeln!(s, "would {w}");
    }
    let _ = writeln!(s, "would write: {}", writes.join(", "));
    if let Some(n) = qemu_note {
        let _ = writeln!(s, "note: {n}");
    }
    s.push_str(&plans);
    Ok(s)
}
