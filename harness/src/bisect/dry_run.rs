//! `harness bisect --dry-run`: every check `harness bisect` makes
//! ([`super::ends`]), then what it would do, with nothing done: the tree is
//! not checked out, nothing is built, `--out` and the cache are not
//! created, no QEMU is needed. A step's cell is planned as
//! `harness run --dry-run` plans one, on the image the step's build would
//! leave.

use super::step::{step_expectations, step_request, step_tests, step_want};
use super::{ends, step_argv, steps_expected, validate, BisectArgs, BisectError, Ends};
use crate::kernel::cache::Cache;
use std::fmt::Write as _;
use std::path::Path;

/// What `harness bisect` would do with `args`, as text; `exe` is the
/// harness binary whose `bisect-step` `git bisect run` would run.
pub fn dry_run(args: &BisectArgs, exe: &Path) -> Result<String, BisectError> {
    let c = &args.common;
    let Ends { good, bad, commits } = ends(args)?;
    let (sel, topology) = validate(c)?;
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let out = abs(&c.out);
    let mut s = String::from(
        "dry run: nothing was checked out, built, written or started; the tree is as it was\n",
    );
    let _ = writeln!(
        s,
        "would bisect {commits} commit(s) in {}..{}: about {} step(s) after checking both ends",
        &good[..12],
        &bad[..12],
        steps_expected(commits)
    );
    let _ = writeln!(
        s,
        "would check that --good {} ({}) is good and --bad {} ({}) is bad, one step each, then run `git bisect run`",
        args.good,
        &good[..12],
        args.bad,
        &bad[..12]
    );
    let words: Vec<String> = std::iter::once(exe.display().to_string())
        .chain(step_argv(c, "bisect"))
        .map(|w| crate::debug::shell_quote(&w))
        .collect();
    let _ = writeln!(s, "step: {}", words.join(" "));
    let _ = writeln!(
        s,
        "would write: {} (steps.jsonl, steps/<n>-<commit>/, bisect.log, bisect-run.log; the previous bisection's steps.jsonl and steps/ removed), {} (the object directory, kept between bisections)",
        out.display(),
        out.join("obj").display()
    );
    if let Some(cmd) = &c.step_command {
        let _ = writeln!(
            s,
            "each step: `{cmd}` in the tree, --repeat {} (exit 0 good, 125 skip, other bad)",
            c.repeat
        );
        return Ok(s);
    }
    // The definition, read from a temporary copy of the built-in ones (a
    // dry run does not unpack them into the cache).
    let tmp = tempfile::tempdir().map_err(|e| BisectError::Infra(e.to_string()))?;
    let dir = match crate::kernel::definition::users_kernels_dir() {
        Some(d) => d,
        None => crate::kernel::embedded::materialise(
            &Cache::at(tmp.path()),
            "shipped",
            crate::kernel::embedded::shipped(),
            0o644,
        )
        .map_err(|e| BisectError::Infra(e.to_string()))?
        .join("kernels"),
    };
    let def = crate::kernel::definition::load(&dir, &c.kernel)
        .map_err(|e| BisectError::Usage(format!("--kernel: {e}")))?;
    let build = crate::kernel::build::BuildOptions {
        arch: c.arch,
        ..Default::default()
    };
    let ccache = build.ccache && !c.no_ccache && crate::kernel::source::on_path("ccache");
    let _ = writeln!(
        s,
        "each step: build the checked-out commit into {} with kernels/{}.yaml's config base, fragments and required options (make -j{}{}; a failed build is a skip), then boot it {} time(s) (--repeat; bad if {})",
        out.join("obj").display(),
        c.kernel,
        c.jobs.unwrap_or(build.jobs),
        if ccache { ", ccache" } else { "" },
        c.repeat,
        match (&c.metric, &c.threshold) {
            (Some(m), Some(t)) => format!("the median of {m} is {t}"),
            _ => match c.bad_if {
                super::BadIf::Any => "any repetition fails".to_string(),
                super::BadIf::All => "every repetition fails".to_string(),
            },
        }
    );
    let image = out.join("obj").join(c.arch.kernel_image());
    let expect = step_expectations(&image, def.version.clone(), def.expect.clone());
    let tests = step_tests(c, &sel, &topology, expect.as_deref()).map_err(BisectError::Usage)?;
    let (accel, _) = crate::host::choose_accel_for(
        crate::host::AccelChoice::Auto,
        &crate::host::probe_kvm(),
        c.arch,
    )
    .map_err(|e| BisectError::Infra(e.to_string()))?;
    let (qemu, qemu_note) = crate::dry_run::qemu_for(c.arch);
    let cache = Cache::from_env().map_err(|e| BisectError::Infra(e.to_string()))?;
    let (bins, unpack) = crate::dry_run::guest_bins_for(&cache, c.arch);
    if let Some(u) = unpack {
        let _ = writeln!(s, "would {u}");
    }
    let want = step_want(
        c,
        &sel,
        image,
        &topology,
        tests,
        expect,
        out.join("steps/<n>-<commit>/run-1"),
    );
    let req = step_request(c, want, accel);
    let cell = crate::planner::cell(0, req);
    let plan = crate::cell::bootplan::planned(&cell.spec, &qemu, &bins)
        .map_err(|e| BisectError::Infra(e.to_string()))?;
    let _ = writeln!(s, "each repetition's cell:");
    s.push_str(&plan);
    if let Some(n) = qemu_note {
        let _ = writeln!(s, "note: {n}");
    }
    Ok(s)
}
