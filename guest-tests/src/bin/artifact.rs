//! `artifact`: exercises the harness's virtiofs shares from inside the guest.
//!
//! Usage:
//!
//! - `artifact write [MIB]`: writes MIB MiB (default 64) of a deterministic
//!   stream ([`guest_tests::artifact::stream`]) to
//!   `$HARNESS_ARTIFACTS/artifact-<MIB>MiB.bin`, fsyncs it, reads it back
//!   and prints its FNV-1a 64 checksum (`# fnv1a64 HEX bytes N`); the host
//!   regenerates the stream and compares. Skips without `HARNESS_ARTIFACTS`.
//! - `artifact readonly [DIR]`: creating a file in DIR (default: every
//!   read-only share of `$HARNESS_SHARES`) fails with `EROFS`, and so does
//!   opening an existing file for writing; reading still works.
//! - `artifact exec [PATH [ARGS...]]`: replaces itself with PATH (default:
//!   the first `run-me` found at the top of a share of `$HARNESS_SHARES`),
//!   so a binary dropped into a shared directory runs without a new
//!   initramfs; its output and exit status are the test's.
//!
//! Without arguments the mode is taken from the program name
//! (`...artifact-write`, `...artifact-readonly`, `...artifact-exec`), so the
//! binary can be passed as a `--guest-bin` under such a name.
//!
//! Output: KTAP (exec: whatever PATH prints).

use guest_tests::artifact::{parse_shares, stream, Fnv1a, ARTIFACTS_ENV, SHARES_ENV};
use guest_tests::ktap::{Ktap, Outcome};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let argv0 = args.remove(0);
    if args.is_empty() {
        if let Some(mode) = argv0.rsplit("artifact-").next().filter(|m| *m != argv0) {
            args.push(mode.to_string());
        }
    }
    let code = match args.first().map(String::as_str) {
        Some("write") => match args.get(1).map(|m| m.parse::<u64>()) {
            None => write(64),
            Some(Ok(mib)) if mib > 0 => write(mib),
            Some(_) => usage("write: MIB must be a positive number"),
        },
        Some("readonly") => readonly(args.get(1).cloned()),
        Some("exec") => exec(&args[1..]),
        Some("-h" | "--help") => {
            println!(
                "artifact: exercises the harness's virtiofs shares from inside the guest\n\
                 (write: a checked stream into $HARNESS_ARTIFACTS; readonly: EROFS on a\n\
                 read-only share; exec: a binary from a share)\n\n{USAGE}"
            );
            0
        }
        _ => usage("unknown or missing mode"),
    };
    std::process::exit(code)
}

const USAGE: &str = "usage: artifact write [MIB] | readonly [DIR] | exec [PATH [ARGS...]]";

fn usage(msg: &str) -> i32 {
    eprintln!("artifact: {msg}\n{USAGE}");
    2
}

fn skip_all(reason: &str) -> i32 {
    println!("KTAP version 1\n1..0 # SKIP {reason}");
    4
}

fn write(mib: u64) -> i32 {
    let Some(dir) = std::env::var_os(ARTIFACTS_ENV) else {
        return skip_all("HARNESS_ARTIFACTS is not set (no artifacts share)");
    };
    let path = std::path::Path::new(&dir).join(format!("artifact-{mib}MiB.bin"));
    let mut k = Ktap::stdout(3);
    let len = mib << 20;
    let started = std::time::Instant::now();
    let mut sum = Fnv1a::new();
    let written = (|| -> std::io::Result<std::fs::File> {
        let mut f = std::fs::File::create(&path)?;
        let mut buf = vec![0u8; 1 << 20];
        let mut gen = stream();
        for _ in 0..mib {
            gen.fill(&mut buf);
            sum.update(&buf);
            f.write_all(&buf)?;
        }
        Ok(f)
    })();
    let file = match written {
        Ok(f) => {
            k.result("write", &Outcome::Pass);
            Some(f)
        }
        Err(e) => {
            k.result("write", &Outcome::Fail(format!("{}: {e}", path.display())));
            None
        }
    };
    let synced = file.map(|f| f.sync_all());
    k.result(
        "fsync",
        &match synced {
            Some(Ok(())) => Outcome::Pass,
            Some(Err(e)) => Outcome::Fail(format!("fsync: {e}")),
            None => Outcome::Skip("not written".into()),
        },
    );
    let secs = started.elapsed().as_secs_f64();
    k.diag(&format!(
        "wrote {} in {secs:.2} s ({:.1} MiB/s)",
        path.display(),
        mib as f64 / secs.max(1e-9)
    ));
    let back = (|| -> std::io::Result<(u64, u64)> {
        let mut f = std::fs::File::open(&path)?;
        let mut s = Fnv1a::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let r = f.read(&mut buf)?;
            if r == 0 {
                return Ok((s.finish(), n));
            }
            s.update(&buf[..r]);
            n += r as u64;
        }
    })();
    let expected = sum.finish();
    k.diag(&format!("fnv1a64 {expected:016x} bytes {len}"));
    k.result(
        "read-back",
        &match back {
            Ok((s, n)) => Outcome::check(s == expected && n == len, || {
                format!("read back {n} bytes with fnv1a64 {s:016x}, wrote {len} with {expected:016x}")
            }),
            Err(e) => Outcome::Fail(format!("read back: {e}")),
        },
    );
    0
}

fn readonly(dir: Option<String>) -> i32 {
    let dirs: Vec<String> = match dir {
        Some(d) => vec![d],
        None => parse_shares(&std::env::var(SHARES_ENV).unwrap_or_default())
            .into_iter()
            .filter(|(_, ro)| *ro)
            .map(|(p, _)| p)
            .collect(),
    };
    if dirs.is_empty() {
        return skip_all("no read-only share in HARNESS_SHARES");
    }
    let mut k = Ktap::stdout(dirs.len() * 3);
    for d in &dirs {
        let name = guest_tests::ktap::sanitize_name(&d.trim_start_matches('/').replace('/', "-"));
        let probe = std::path::Path::new(d).join(".harness-write-probe");
        let create = std::fs::File::create(&probe);
        k.result(
            &format!("{name}-create-erofs"),
            &match create {
                Err(e) if e.raw_os_error() == Some(libc::EROFS) => Outcome::Pass,
                Err(e) => Outcome::Fail(format!("create {}: {e}, expected EROFS", probe.display())),
                Ok(_) => {
                    let _ = std::fs::remove_file(&probe);
                    Outcome::Fail(format!("created {} on a read-only share", probe.display()))
                }
            },
        );
        let existing = std::fs::read_dir(d).ok().and_then(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.is_file())
        });
        let Some(existing) = existing else {
            let why = Outcome::Skip(format!("no file in {d}"));
            k.result(&format!("{name}-open-write-erofs"), &why);
            k.result(&format!("{name}-read"), &why);
            continue;
        };
        let w = std::fs::OpenOptions::new().append(true).open(&existing);
        k.result(
            &format!("{name}-open-write-erofs"),
            &match w {
                Err(e) if e.raw_os_error() == Some(libc::EROFS) => Outcome::Pass,
                Err(e) => Outcome::Fail(format!("{}: {e}, expected EROFS", existing.display())),
                Ok(_) => Outcome::Fail(format!(
                    "opened {} for writing on a read-only share",
                    existing.display()
                )),
            },
        );
        k.result(
            &format!("{name}-read"),
            &match std::fs::read(&existing) {
                Ok(_) => Outcome::Pass,
                Err(e) => Outcome::Fail(format!("read {}: {e}", existing.display())),
            },
        );
    }
    0
}

fn exec(args: &[String]) -> i32 {
    let (path, rest) = match args.split_first() {
        Some((p, rest)) => (p.clone(), rest.to_vec()),
        None => {
            let found = parse_shares(&std::env::var(SHARES_ENV).unwrap_or_default())
                .into_iter()
                .map(|(p, _)| format!("{p}/run-me"))
                .find(|p| std::path::Path::new(p).is_file());
            match found {
                Some(p) => (p, vec![]),
                None => return skip_all("no run-me at the top of any share in HARNESS_SHARES"),
            }
        }
    };
    let e = std::process::Command::new(&path).args(rest).exec();
    println!("KTAP version 1\n1..1\nnot ok 1 exec\n# exec {path}: {e}");
    1
}
