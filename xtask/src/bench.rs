//! `cargo xtask bench-boot` and `cargo xtask bench-peers`: time from
//! command to result for a one-test run, medians of interleaved runs.
//!
//! - `bench-boot`: `harness run --suite none` (just the topology test)
//!   against a bare `qemu-system-x86_64` boot of the same kernel, initramfs
//!   and machine (`harness bench --emit-bare`: serial ports to files, no
//!   QMP); the bare boot is the floor.
//! - `bench-peers`: the same two plus virtme-ng (`vng`) and vmtest on the
//!   same kernel and accelerator, each running `true`. A peer that cannot
//!   produce a result on the kernel is timed to its end anyway and reported
//!   with its exit status and the reason found in its output.
//!
//! Options: `--kernel SPEC` (default debian:7.3.4), `--topology SPEC`
//! (default nodes=1,cpus=2,mem=512M), `--runs N` (default 5),
//! `--out DIR` (default target/bench). Accel: TCG unless `--accel kvm`.
//! `--arch arm64` (bench-boot): also `harness run --arch arm64` of the same
//! kernel version and topology, interleaved with the others, and its
//! median over the x86-64 harness run's (the arm64/x86-64 ratio).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

struct Opts {
    kernel: String,
    topology: String,
    runs: usize,
    out: PathBuf,
    accel: String,
    /// Other architectures whose harness runs are measured too.
    arches: Vec<String>,
}

fn opts(args: &[String], root: &Path) -> Result<Opts> {
    let mut o = Opts {
        kernel: "debian:7.3.4".into(),
        topology: "nodes=1,cpus=2,mem=512M".into(),
        runs: 5,
        out: root.join("target").join("bench"),
        accel: "tcg".into(),
        arches: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut v = || it.next().cloned().context(format!("{a} needs a value"));
        match a.as_str() {
            "--kernel" => o.kernel = v()?,
            "--topology" => o.topology = v()?,
            "--runs" => o.runs = v()?.parse().context("--runs")?,
            "--out" => o.out = v()?.into(),
            "--accel" => o.accel = v()?,
            "--arch" => match v()?.as_str() {
                "x86_64" => {}
                "arm64" => o.arches.push("arm64".into()),
                other => bail!("--arch {other:?}: expected x86_64 or arm64"),
            },
            other => bail!("unknown option {other:?}"),
        }
    }
    if o.runs == 0 {
        bail!("--runs must be >= 1");
    }
    Ok(o)
}

/// One timed command run.
#[derive(Debug, Clone)]
struct Sample {
    secs: f64,
    ok: bool,
    note: String,
}

/// Runs a contender once, logging to the path.
type RunOnce = Box<dyn Fn(&Path) -> Result<Sample>>;

/// A contender: how to run it once and decide whether it produced the result.
struct Contender {
    name: &'static str,
    what: String,
    run: RunOnce,
}

pub(crate) fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return 0.0;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Runs `c` with a deadline; returns (seconds, exit code or -1, output tail).
pub(crate) fn timed(mut c: Command, limit: Duration, log: &Path) -> Result<(f64, i32, String)> {
    let file = std::fs::File::create(log).with_context(|| log.display().to_string())?;
    c.stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    let t = Instant::now();
    let mut child = c.spawn().with_context(|| format!("spawning {c:?}"))?;
    let code = loop {
        if let Some(st) = child.try_wait()? {
            break st.code().unwrap_or(-1);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break -1;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let secs = t.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
    Ok((secs, code, text))
}

/// The first line of `text` that explains a failed boot.
fn reason(text: &str) -> String {
    const KEYS: &[&str] = &[
        "Cannot open root device",
        "Unable to mount root",
        "Kernel panic",
        "failed to set MSR",
        "No such file",
        "error",
        "Error",
    ];
    for k in KEYS {
        if let Some(l) = text.lines().find(|l| l.contains(k)) {
            return l.trim().chars().take(160).collect();
        }
    }
    text.lines()
        .last()
        .unwrap_or("")
        .trim()
        .chars()
        .take(160)
        .collect()
}

fn build_harness(sh: &Shell, root: &Path) -> Result<PathBuf> {
    cmd!(sh, "cargo build --quiet --release -p harness").run()?;
    Ok(root.join("target").join("release").join("harness"))
}

fn harness_contender(harness: PathBuf, o: &Opts, out: PathBuf) -> Contender {
    arch_contender(harness, o, out, "x86_64")
}

/// `harness run --arch ARCH` of the kernel and topology: `harness` for
/// x86-64, `harness-arm64` for arm64.
fn arch_contender(harness: PathBuf, o: &Opts, out: PathBuf, arch: &'static str) -> Contender {
    let (k, t, accel) = (o.kernel.clone(), o.topology.clone(), o.accel.clone());
    Contender {
        name: match arch {
            "arm64" => "harness-arm64",
            _ => "harness",
        },
        what: format!(
            "harness run --arch {arch} --kernel {k} --topology {t} --suite none --accel {accel}"
        ),
        run: Box::new(move |log| {
            let mut c = Command::new(&harness);
            c.args(["run", "--arch", arch, "--kernel", &k, "--topology", &t])
                .args(["--suite", "none", "--accel", &accel, "--out"])
                .arg(&out);
            let (secs, code, text) = timed(c, Duration::from_secs(300), log)?;
            let ok = code == 0 && text.contains("passed, 0 failed");
            Ok(Sample {
                secs,
                ok,
                note: if ok {
                    String::new()
                } else {
                    format!("exit {code}: {}", reason(&text))
                },
            })
        }),
    }
}

fn bare_contender(argv: Vec<String>, dir: PathBuf) -> Contender {
    Contender {
        name: "bare-qemu",
        what: "qemu-system-x86_64 (same kernel, initramfs, machine; -serial file:, no QMP)".into(),
        run: Box::new(move |log| {
            let results = dir.join("results.ktap");
            let _ = std::fs::remove_file(&results);
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            let (secs, code, _) = timed(c, Duration::from_secs(300), log)?;
            let ktap = std::fs::read_to_string(&results).unwrap_or_default();
            // guest-init's isa-debug-exit "finished" status: (0x10 << 1) | 1.
            let ok = code == 33 && ktap.contains("ok 1 topology");
            Ok(Sample {
                secs,
                ok,
                note: if ok {
                    String::new()
                } else {
                    format!("exit {code}")
                },
            })
        }),
    }
}

fn vng_contender(kernel: PathBuf, o: &Opts) -> Option<Contender> {
    which("vng")?;
    let cpus = cpus_of(&o.topology);
    Some(Contender {
        name: "virtme-ng",
        what: format!("vng --disable-kvm -r <vmlinuz> --cpus {cpus} --memory 512M -- true"),
        run: Box::new(move |log| {
            let mut c = Command::new("vng");
            c.args(["--disable-kvm", "-v", "-r"]).arg(&kernel).args([
                "--cpus",
                &cpus.to_string(),
                "--memory",
                "512M",
                "--",
                "true",
            ]);
            let (secs, code, text) = timed(c, Duration::from_secs(300), log)?;
            Ok(Sample {
                secs,
                ok: code == 0,
                note: if code == 0 {
                    String::new()
                } else {
                    format!("exit {code}: {}", reason(&text))
                },
            })
        }),
    })
}

fn vmtest_contender(kernel: PathBuf, wrapper: PathBuf) -> Option<Contender> {
    let bin = which("vmtest").or_else(|| {
        let p = PathBuf::from(std::env::var_os("HOME")?).join(".cargo/bin/vmtest");
        p.is_file().then_some(p)
    })?;
    Some(Contender {
        name: "vmtest",
        what: "vmtest -k <vmlinuz> -q <tcg wrapper> --kargs root=/dev/root true".into(),
        run: Box::new(move |log| {
            let mut c = Command::new(&bin);
            // vmtest 0.18 passes no root=; since the 7.x nullfs root the
            // kernel then mounts its 9p root with an empty source ("9p: Bad
            // value for 'source'"). Its 9p mount tag is /dev/root.
            c.arg("-k")
                .arg(&kernel)
                .arg("-q")
                .arg(&wrapper)
                .args(["--kargs", "root=/dev/root"])
                .arg("true");
            let (secs, code, text) = timed(c, Duration::from_secs(300), log)?;
            Ok(Sample {
                secs,
                ok: code == 0,
                note: if code == 0 {
                    String::new()
                } else {
                    format!("exit {code}: {}", reason(&text))
                },
            })
        }),
    })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn cpus_of(topology: &str) -> usize {
    let get = |k: &str| {
        topology
            .split(',')
            .find_map(|kv| kv.strip_prefix(k))
            .and_then(|v| v.parse::<usize>().ok())
    };
    get("nodes=").unwrap_or(1) * get("cpus=").unwrap_or(1)
}

/// vmtest adds `-enable-kvm -cpu host` whenever /dev/kvm exists; this
/// wrapper drops them and runs TCG with `-cpu max`.
fn write_tcg_wrapper(dir: &Path) -> Result<PathBuf> {
    let p = dir.join("qemu-tcg-wrapper.sh");
    std::fs::write(
        &p,
        "#!/bin/bash\n# Drops KVM flags (vmtest adds them when /dev/kvm exists) and runs TCG.\n\
         out=()\nskip=0\nfor a in \"$@\"; do\n  if [ $skip = 1 ]; then skip=0; continue; fi\n  \
         case \"$a\" in\n    -enable-kvm) continue ;;\n    -cpu) skip=1; continue ;;\n  esac\n  \
         out+=(\"$a\")\ndone\nexec qemu-system-x86_64 \"${out[@]}\" -accel tcg -cpu max\n",
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
    Ok(p)
}

/// Runs every contender `runs` times, interleaved, and prints/writes medians.
fn measure(o: &Opts, contenders: &[Contender], name: &str) -> Result<()> {
    let logs = o.out.join(format!("{name}-logs"));
    std::fs::create_dir_all(&logs)?;
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); contenders.len()];
    for r in 0..o.runs {
        for (i, c) in contenders.iter().enumerate() {
            let s = (c.run)(&logs.join(format!("{}-{r}.log", c.name)))?;
            eprintln!(
                "xtask: run {}/{} {}: {:.2} s{}",
                r + 1,
                o.runs,
                c.name,
                s.secs,
                if s.ok {
                    String::new()
                } else {
                    format!(" (no result: {})", s.note)
                }
            );
            samples[i].push(s);
        }
    }
    let floor = median(
        &samples[contenders
            .iter()
            .position(|c| c.name == "bare-qemu")
            .unwrap_or(0)]
        .iter()
        .map(|s| s.secs)
        .collect::<Vec<_>>(),
    );
    let mut table = format!(
        "{name}: kernel {}, topology {}, accel {}, {} interleaved runs each, medians of whole-process wall time\n",
        o.kernel, o.topology, o.accel, o.runs
    );
    table += &format!(
        "{:<13} {:>9} {:>9} {:>9} {:>8}  {}\n",
        "contender", "median s", "min s", "max s", "x bare", "result"
    );
    let mut json_rows = Vec::new();
    for (c, s) in contenders.iter().zip(&samples) {
        let secs: Vec<f64> = s.iter().map(|x| x.secs).collect();
        let ok = s.iter().filter(|x| x.ok).count();
        let med = median(&secs);
        let min = secs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = secs.iter().copied().fold(0.0, f64::max);
        let result = if ok == s.len() {
            "result every run".to_string()
        } else {
            format!(
                "{ok}/{} runs produced a result; {}",
                s.len(),
                s.iter()
                    .find(|x| !x.ok)
                    .map(|x| x.note.clone())
                    .unwrap_or_default()
            )
        };
        table += &format!(
            "{:<13} {:>9.2} {:>9.2} {:>9.2} {:>7.2}x  {}\n",
            c.name,
            med,
            min,
            max,
            if floor > 0.0 { med / floor } else { 0.0 },
            result
        );
        json_rows.push(format!(
            "{{\"contender\":{:?},\"command\":{:?},\"median_s\":{med:.3},\"min_s\":{min:.3},\"max_s\":{max:.3},\
             \"ratio_to_bare\":{:.3},\"ok_runs\":{ok},\"runs\":{},\"samples_s\":{:?},\"note\":{:?}}}",
            c.name,
            c.what,
            if floor > 0.0 { med / floor } else { 0.0 },
            s.len(),
            secs,
            s.iter().find(|x| !x.ok).map(|x| x.note.clone()).unwrap_or_default()
        ));
    }
    // Other architectures against the x86-64 harness run of this invocation.
    let med_of = |n: &str| {
        contenders
            .iter()
            .position(|c| c.name == n)
            .map(|i| median(&samples[i].iter().map(|s| s.secs).collect::<Vec<_>>()))
    };
    let mut arch_ratio = String::new();
    if let (Some(x86), Some(arm)) = (med_of("harness"), med_of("harness-arm64")) {
        if x86 > 0.0 {
            table += &format!(
                "arm64 / x86_64 boot-to-result (harness-arm64 / harness medians): {:.2}x\n",
                arm / x86
            );
            arch_ratio = format!(",\"arm64_over_x86_64\":{:.3}", arm / x86);
        }
    }
    print!("{table}");
    std::fs::write(o.out.join(format!("{name}.txt")), &table)?;
    std::fs::write(
        o.out.join(format!("{name}.json")),
        format!(
            "{{\"kernel\":{:?},\"topology\":{:?},\"accel\":{:?},\"runs\":{}{arch_ratio},\"rows\":[\n{}\n]}}\n",
            o.kernel,
            o.topology,
            o.accel,
            o.runs,
            json_rows.join(",\n")
        ),
    )?;
    println!("written: {}", o.out.join(format!("{name}.json")).display());
    Ok(())
}

/// Prepares the harness, the bare boot and the kernel path; returns the contenders.
fn common(sh: &Shell, root: &Path, o: &Opts) -> Result<(Vec<Contender>, PathBuf)> {
    std::fs::create_dir_all(&o.out)?;
    let harness = build_harness(sh, root)?;
    let bare = o.out.join("bare");
    let status = Command::new(&harness)
        .args([
            "bench",
            "--kernel",
            &o.kernel,
            "--topology",
            &o.topology,
            "--accel",
            &o.accel,
        ])
        .arg("--emit-bare")
        .arg(&bare)
        .status()?;
    if !status.success() {
        bail!("harness bench --emit-bare failed: {status}");
    }
    let raw = std::fs::read(bare.join("argv"))?;
    let argv: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let kernel = argv
        .iter()
        .position(|a| a == "-kernel")
        .and_then(|i| argv.get(i + 1))
        .map(PathBuf::from)
        .context("no -kernel in the bare argv")?;
    let hout = o.out.join("harness-out");
    // Warm-up (kernel cached, guest binaries built), not counted.
    let warm = harness_contender(harness.clone(), o, hout.clone());
    let w = (warm.run)(&o.out.join("warmup.log"))?;
    if !w.ok {
        bail!("the harness warm-up run produced no result: {}", w.note);
    }
    Ok((
        vec![
            harness_contender(harness, o, hout),
            bare_contender(argv, bare),
        ],
        kernel,
    ))
}

/// `cargo xtask bench-boot|bench-peers [options]`.
pub fn run(sh: &Shell, which: &str, args: &[String]) -> Result<()> {
    let root = sh.current_dir();
    if which == "bench-boot" {
        boot(sh, &root, args)
    } else {
        peers(sh, &root, args)
    }
}

/// `cargo xtask bench-boot [options]`.
pub fn boot(sh: &Shell, root: &Path, args: &[String]) -> Result<()> {
    let mut o = opts(args, root)?;
    if o.runs < 5 {
        eprintln!("xtask: bench-boot uses at least 5 runs");
        o.runs = 5;
    }
    let (mut contenders, _) = common(sh, root, &o)?;
    if o.arches.iter().any(|a| a == "arm64") {
        let harness = root.join("target").join("release").join("harness");
        let arm = arch_contender(harness, &o, o.out.join("harness-out"), "arm64");
        // Warm-up: the arm64 kernel fetched, its guest binaries unpacked.
        let w = (arm.run)(&o.out.join("warmup-arm64.log"))?;
        if !w.ok {
            bail!("the arm64 warm-up run produced no result: {}", w.note);
        }
        contenders.push(arm);
    }
    measure(&o, &contenders, "boot")
}

/// `cargo xtask bench-peers [options]`.
pub fn peers(sh: &Shell, root: &Path, args: &[String]) -> Result<()> {
    let o = opts(args, root)?;
    let (mut contenders, kernel) = common(sh, root, &o)?;
    match vng_contender(kernel.clone(), &o) {
        Some(c) => contenders.push(c),
        None => eprintln!(
            "xtask: virtme-ng (vng) not found: pip install virtme-ng; apt-get install udev"
        ),
    }
    let wrapper = write_tcg_wrapper(&o.out)?;
    match vmtest_contender(kernel, wrapper) {
        Some(c) => contenders.push(c),
        None => eprintln!(
            "xtask: vmtest not found: cargo install vmtest; apt-get install qemu-guest-agent"
        ),
    }
    measure(&o, &contenders, "peers")
}

/// The JSON results file (`--json FILE`) of a harness run, as the harness's
/// own model reads it.
pub fn read_results(path: &Path) -> Result<harness::results::Results> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_reasons() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        let log = "boot\n[ 4.3] VFS: Cannot open root device \"\" or unknown-block(0,0): error -19\nKernel panic";
        assert!(reason(log).contains("Cannot open root device"));
        assert_eq!(reason("a\nlast line"), "last line");
        assert_eq!(cpus_of("nodes=2,cpus=3,mem=1G"), 6);
        assert_eq!(cpus_of("cpus=2"), 2);
    }
}
