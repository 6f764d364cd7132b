//! `harness setup` for real: `--dry-run` anywhere, and under `CI` as root
//! the real install, twice: the second run must find nothing to do.

use std::process::Command;

fn setup(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("setup")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let (code, text) = setup(&["--dry-run"]);
    // An unknown system with something missing is refused (69); otherwise
    // the plan, or nothing to do.
    assert!(code == 0 || code == 69, "exit {code}: {text}");
    if code == 0 {
        assert!(
            text.contains("nothing to do") || text.contains("step(s):"),
            "{text}"
        );
    } else {
        assert!(
            text.contains("not a system `harness setup` installs on"),
            "{text}"
        );
    }
}

#[test]
fn dry_run_with_arm64_takes_the_architecture() {
    let (code, text) = setup(&["--dry-run", "--arch", "arm64"]);
    assert!(code == 0 || code == 69, "exit {code}: {text}");
    let (code, text) = setup(&["--dry-run", "--arch", "riscv64"]);
    assert_eq!(code, 2, "{text}");
}

#[test]
fn real_setup_is_idempotent() {
    // Like the VM tests, this runs in CI (as root there); elsewhere it
    // would change the machine.
    if std::env::var_os("CI").is_none() {
        eprintln!("skipping: the real `harness setup --yes` runs only under CI");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: the real `harness setup --yes` runs only as root");
        return;
    }
    let (code, text) = setup(&["--yes"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = setup(&["--yes"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("nothing to do"),
        "a second run did something:\n{text}"
    );
}
