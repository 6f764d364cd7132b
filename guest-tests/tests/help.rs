//! `--help` of the guest binaries, run on the host (quick tier, no VM):
//! every binary a developer may type in `harness run --shell` prints its
//! usage and exits 0 for `-h` and `--help`, and a case binary's help names
//! every case its `--list` prints.

use guest_tests::binaries::{self, Role};
use std::path::PathBuf;
use std::process::{Command, Output};

/// A guest binary, beside the one whose path cargo gives.
fn path(name: &str) -> PathBuf {
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_futex-prctl"));
    built.with_file_name(name)
}

fn run(name: &str, arg: &str) -> (Output, String) {
    let o = Command::new(path(name)).arg(arg).output().unwrap();
    let stdout = String::from_utf8(o.stdout.clone()).unwrap();
    (o, stdout)
}

#[test]
fn every_test_binary_prints_its_usage_and_exits_0() {
    // guest-init takes no arguments: PID 1 of the VM, it refuses to run elsewhere.
    for b in binaries::ALL.iter().filter(|b| b.role != Role::Init) {
        for arg in ["--help", "-h"] {
            let (o, text) = run(b.name, arg);
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{} {arg}: {stderr}", b.name);
            assert!(
                text.contains(&format!("usage: {}", b.name)),
                "{} {arg}:\n{text}",
                b.name
            );
        }
    }
}

#[test]
fn a_case_binary_s_help_says_what_it_tests_and_names_every_case() {
    for name in binaries::futex() {
        let (help, text) = run(name, "--help");
        assert_eq!(help.status.code(), Some(0), "{name}");
        let about = text.lines().next().unwrap_or_default();
        assert!(
            about.len() > name.len() + 10 && about.starts_with(&format!("{name}: ")),
            "{name}: first line {about:?}"
        );
        let (list, cases) = run(name, "--list");
        assert_eq!(list.status.code(), Some(0), "{name} --list");
        assert!(cases.lines().count() > 1, "{name} --list: {cases}");
        let listed: Vec<&str> = text.lines().map(str::trim).collect();
        for case in cases.lines() {
            assert!(
                listed.contains(&case),
                "{name} --help lacks {case}:\n{text}"
            );
        }
        for option in [
            "--list",
            "--filter",
            "--expect",
            "--iterations",
            "--seconds",
        ] {
            assert!(text.contains(option), "{name} --help lacks {option}");
        }
    }
}
