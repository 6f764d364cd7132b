//! Output to a reader that goes away (`harness kernel list | head -c1`):
//! every command that prints ends quietly, by SIGPIPE as a C tool does,
//! never by a panic (exit 101) or an abort (134) with a backtrace. Quick
//! tier: nothing is booted or fetched.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// Runs `args` with stdout to a pipe whose reader takes one byte and
/// closes; the exit status and stderr.
fn read_one_byte(args: &[&str], cache: &std::path::Path) -> (std::process::ExitStatus, String) {
    let matrix = concat!(env!("CARGO_MANIFEST_DIR"), "/../matrix.yaml");
    let args: Vec<&str> = args
        .iter()
        .map(|a| if *a == "MATRIX" { matrix } else { a })
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(&args)
        .env("HARNESS_CACHE_DIR", cache)
        .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
        .env("HARNESS_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    let n = stdout.read(&mut one).unwrap();
    assert_eq!(n, 1, "harness {}: printed nothing", args.join(" "));
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), stderr)
}

#[test]
fn every_printing_command_ends_quietly_when_its_reader_goes_away() {
    let cache = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["kernel", "list"],
        &["completions", "bash"],
        &["completions", "zsh"],
        &["man"],
        &["doctor"],
        &["--help"],
        &["run", "--help"],
        &["matrix", "--help"],
        &["matrix", "--list", "--matrix", "MATRIX"],
        &["matrix", "--dry-run", "--matrix", "MATRIX"],
        &["run", "--dry-run", "--kernel", "debian:7.3"],
    ];
    let mut bad = Vec::new();
    let mut sigpipe = 0;
    for args in commands {
        for _ in 0..20 {
            let (status, stderr) = read_one_byte(args, cache.path());
            if status.signal() == Some(libc::SIGPIPE) {
                sigpipe += 1;
            }
            let crashed = matches!(status.code(), Some(101 | 134))
                || status.signal() == Some(libc::SIGABRT)
                || stderr.contains("panicked")
                || stderr.contains("backtrace");
            if crashed {
                bad.push(format!("harness {}: {status}\n{stderr}", args.join(" ")));
                break;
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n---\n"));
    // Most runs are still writing when the reader goes (output longer than
    // the pipe's buffer or written in pieces): those end by SIGPIPE.
    eprintln!("ended by SIGPIPE: {sigpipe} of {}", commands.len() * 20);
    assert!(sigpipe > 0);
}
