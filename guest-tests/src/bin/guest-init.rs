//! `guest-init`: the static PID 1 of the test initramfs.
//!
//! Boot order is the order of [`run`]: mount the pseudo filesystems, log to
//! `/dev/kmsg`, open the results port in raw mode, decode the run plan, run
//! every planned binary as one KTAP subtest (see `guest_tests::init`), sync,
//! end the VM. No step may panic: every path, errors included, ends the VM
//! with a [`GuestExit`] status the host can tell apart.
//!
//! CLI: none. It refuses to run unless it is PID 1, so starting it by
//! mistake on a host does nothing.

#[path = "guest-init/boot.rs"]
mod boot;
#[path = "guest-init/vm.rs"]
mod vm;

use boot::{Log, ResultsPort};
use guest_tests::init::report;
use guest_tests::init::runner::{self, Options};
use guest_tests::plan::{GuestExit, RunPlan, BIN_DIR, PLAN_PATH, RESULTS_PORT};

fn main() {
    if std::process::id() != 1 {
        eprintln!("guest-init: not PID 1; this is the test VM's init, refusing to run");
        std::process::exit(2);
    }
    std::panic::set_hook(Box::new(|info| {
        let msg = format!("guest-init panicked: {info}");
        Log::emergency(&msg);
        vm::end(GuestExit::InitError)
    }));
    let mut log = Log::new();
    let mut port = None;
    let exit = match run(&mut log, &mut port) {
        Ok(exit) => exit,
        Err(e) => {
            log.line(&format!("error: {e}"));
            // Tell the host on the results port too, unless the document
            // there has started (then the error is in writing it).
            if port.is_none() {
                if let Ok(mut p) = ResultsPort::open(RESULTS_PORT) {
                    for line in report::init_error_doc(&e) {
                        let _ = p.write_line(&line);
                    }
                    port = Some(p);
                }
            }
            GuestExit::InitError
        }
    };
    if let Some(p) = &port {
        p.drain();
    }
    log.line(&format!("ending the VM: {exit:?} ({:#x})", exit as u8));
    vm::end(exit)
}

/// The boot, step by step. Leaves the results port in `port` so `main`
/// can drain it on every path.
fn run(log: &mut Log, port: &mut Option<ResultsPort>) -> Result<GuestExit, String> {
    boot::mount_all(log)?;
    log.open_kmsg();
    log.line("pseudo filesystems mounted");
    boot::unlimit_kmsg(log);

    let results = port.insert(ResultsPort::open(RESULTS_PORT)?);
    log.line(&format!("results port {RESULTS_PORT} in raw mode"));

    let plan = match std::fs::read(PLAN_PATH)
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(|b| RunPlan::decode(&b))
    {
        Ok(plan) => plan,
        Err(e) => {
            log.line(&format!("bad run plan {PLAN_PATH}: {e}"));
            for line in report::bad_plan_doc(&e) {
                results.write_line(&line)?;
            }
            return Ok(GuestExit::BadPlan);
        }
    };
    log.line(&format!("run plan: {} test(s)", plan.tests.len()));
    // Kernel modules and virtiofs shares (optional plan fields).
    if let Err(e) = guest_tests::init::modules::setup(&plan, &mut |l| log.line(l)) {
        for line in report::init_error_doc(&e) {
            results.write_line(&line)?;
        }
        return Ok(GuestExit::InitError);
    }

    if let Some(busybox) = &plan.busybox {
        log.line(&guest_tests::init::shell::link_applets(busybox));
    }
    if plan.shell.is_some() {
        log.line(&guest_tests::init::shell::mount_debugfs());
    }
    let opts = Options {
        path_env: BIN_DIR.to_string(),
        reap_orphans: true,
        ..Options::default()
    };
    let runs = runner::run_plan(&plan, &opts, results, log.kmsg())
        .map_err(|e| format!("writing results to {RESULTS_PORT}: {e}"))?;
    let verdicts: Vec<_> = runs.iter().map(|r| r.ending.verdict()).collect();
    log.line(report::totals_line(&verdicts).trim_start_matches("# "));
    Ok(GuestExit::Finished)
}
