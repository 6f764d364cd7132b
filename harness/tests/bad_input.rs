//! Bad input, row by row: each command line gets its exact message and
//! exit status (2 for the user's input, 69 for the host), and is refused
//! before anything is downloaded, built or booted (no QEMU is needed: the
//! rows that reach the host name a QEMU that does not exist). Quick tier.

use std::process::Command;

struct Row {
    args: &'static [&'static str],
    code: i32,
    /// What stderr must contain (the whole message where it is ours).
    message: &'static str,
}

const ROWS: &[Row] = &[
    Row { args: &["report", "markdown", "/nonexistent.json"], code: 2,
          message: "harness: error: /nonexistent.json: No such file or directory (os error 2)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--markdown", "/etc/passwd/summary.md"], code: 2,
          message: "harness: error: --markdown /etc/passwd/summary.md: /etc/passwd is a file, not a directory" },
    Row { args: &["run", "--kernel", "debian:7.3", "--fresh-boot"], code: 2,
          message: "harness: error: --fresh-boot needs --repeat N or --until-fail" },
    Row { args: &["run", "--kernel", "debian:7.3", "--max", "5"], code: 2,
          message: "error: the following required arguments were not provided:\n  --until-fail" },
    Row { args: &["run", "--kernel", "debian:7.3", "--repeat", "0"], code: 2,
          message: "error: invalid value '0' for '--repeat <N>': 0 is not in 1..=100000" },
    Row { args: &["run", "--kernel", "debian:7.3", "--repeat", "3", "--until-fail"], code: 2,
          message: "error: the argument '--repeat <N>' cannot be used with '--until-fail'" },
    Row { args: &["run", "--kernel", "debian:7.3", "--repeat", "3", "--shell"], code: 2,
          message: "harness: error: --repeat/--until-fail cannot be combined with --shell or --gdb (a person in the loop is not an iteration)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--arch", "riscv64"], code: 2,
        message: "error: invalid value 'riscv64' for '--arch <ARCH>'" },
    Row { args: &["run", "--kernel", "debian:7.3", "--arch", "arm64", "--topology", "nodes=2,offline=1"], code: 2,
        message: "harness: error: --topology nodes=2,offline=1: arm64 guests cannot have possible-but-offline nodes (offline=)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--arch", "arm64", "--share", "/tmp"], code: 2,
        message: "harness: error: --arch arm64: --share is x86-64 only so far" },
    Row { args: &["run", "--kernel", "debian:7.3", "--arch", "arm64", "--shell"], code: 2,
        message: "harness: error: --arch arm64: --shell and --gdb are x86-64 only so far" },
    Row { args: &["run", "--kernel", "debian:abc"], code: 2,
        message: r#"harness: error: kernel "debian:abc": expected a Debian kernel version such as debian:7.3.4, debian:7.3 or debian:7.3.4+deb13"# },
    Row { args: &["run", "--kernel", "foo:1"], code: 2,
        message: r#"harness: error: kernel "foo:1": expected debian:<version> (e.g. debian:7.3.4), path:<bzImage>, source:<name> (kernels/<name>.yaml) or tree:<dir> (your kernel tree)"# },
    Row { args: &["run", "--kernel", "path:/nonexistent/bzImage"], code: 2,
        message: r#"harness: error: kernel "path:/nonexistent/bzImage": /nonexistent/bzImage is not a file"# },
    Row { args: &["run", "--kernel", "source:nonexistent"], code: 2,
        message: r#"no kernel definition "nonexistent" in "# },
    Row { args: &["run", "--kernel", "source:a/b"], code: 2,
        message: r#"harness: error: kernel "source:a/b": expected debian:<version>"# },
    Row { args: &["run", "--kernel", "tree:/nonexistent"], code: 2,
        message: r#"harness: error: kernel "tree:/nonexistent": /nonexistent: no such directory"# },
    Row { args: &["run", "--kernel", "CONFIGURED"], code: 2,
        message: "is configured in place (it has .config): the harness builds out of tree" },
    Row { args: &["run", "--kernel", "debian:7.3", "--kernel-config", "/nonexistent.config"], code: 2,
        message: "harness: error: --kernel-config /nonexistent.config: only a tree:<dir> kernel is built from a config file" },
    Row { args: &["run", "--kernel", "TREE", "--kernel-config", "/nonexistent.config"], code: 2,
        message: "harness: error: --kernel-config /nonexistent.config: no such file" },
    Row { args: &["bench", "--kernel", "debian:7.3", "--kernel-config", "/nonexistent.config"], code: 2,
        message: "harness: error: --kernel-config /nonexistent.config: only a tree:<dir> kernel is built from a config file, and no --kernel is one" },
    Row { args: &["run", "--kernel", "debian:7.3", "--suite", "typo"], code: 2,
        message: r#"harness: error: unknown suite "typo"; known suites: smoke, futex, none, fault-panic, fault-hang, fault-garbage, kselftest-futex, bench"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--expect", "numa=2"], code: 2,
        message: r#"harness: error: --expect "numa=2": numa="2": expected 1/0, yes/no or true/false"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--expect", "bogus=1"], code: 2,
        message: r#"harness: error: --expect "bogus=1": unknown key "bogus"; known: prctl, private_hash, immutable, numa, mpol, growth, requeue_same_flags, robust_pending_owned, version"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--expect", "private_hash=0,immutable=1"], code: 2,
        message: r#"harness: error: --expect "private_hash=0,immutable=1": immutable expected without private_hash"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--expect", "numa=0,mpol=1"], code: 2,
        message: r#"harness: error: --expect "numa=0,mpol=1": mpol expected without numa: FUTEX2_MPOL needs FUTEX2_NUMA: both came in 6.16, and a kernel that refuses FUTEX2_NUMA (EINVAL) refuses FUTEX2_MPOL too (set mpol=0 too, or numa=1)"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--expect", "version=latest"], code: 2,
        message: r#"harness: error: --expect "version=latest": version="latest": expected a kernel version such as 7.3.4 or 7.3"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=0"], code: 2,
        message: "harness: error: invalid topology: nodes=0; expected 1..=64" },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=2,nodes=3"], code: 2,
        message: r#"harness: error: topology spec "nodes=2,nodes=3": nodes given twice"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=2,foo=1"], code: 2,
        message: r#"harness: error: topology spec "nodes=2,foo=1": unknown key "foo" (known: nodes, cpus, mem, distance, offline)"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "cpus=x"], code: 2,
        message: r#"harness: error: topology spec "cpus=x": cpus="x": vCPUs per node such as 2"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes"], code: 2,
        message: r#"harness: error: topology spec "nodes": "nodes" is not key=value (expected e.g. nodes=2,cpus=2,mem=512M)"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "mem=0"], code: 2,
        message: "harness: error: invalid topology: node 0 must have memory (the kernel boots from it)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=2,offline=2"], code: 2,
        message: "harness: error: invalid topology: 2 offline nodes; expected 0..=1 (QEMU gives its hot-pluggable memory range to the last node only, so only one node can be possible but offline)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=2,distance=20,offline=1"], code: 2,
        message: "harness: error: invalid topology: an offline node cannot be combined with a distance matrix (QEMU would need its distances too)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=2,offline=yes"], code: 2,
        message: r#"harness: error: topology spec "nodes=2,offline=yes": offline="yes": a number of possible-but-offline nodes such as 1"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", ""], code: 2,
        message: "harness: error: topology spec is empty (expected e.g. nodes=2,cpus=2,mem=512M; leave --topology out for the default)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--timeout-scale", "0"], code: 2,
        message: "invalid value '0' for '--timeout-scale <TIMEOUT_SCALE>': expected a factor in (0, 100], e.g. 2.5 (got \"0\")" },
    Row { args: &["run", "--kernel", "debian:7.3", "--timeout-scale", "nan"], code: 2,
        message: "invalid value 'nan' for '--timeout-scale <TIMEOUT_SCALE>': expected a factor in (0, 100]" },
    Row { args: &["run", "--kernel", "debian:7.3", "--suite", "futex", "--test", "nosuch/*"], code: 2,
        message: r#"harness: error: --test "nosuch/*" selects no case; suite futex has topology, futex-prctl, futex-resize"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--test", "futex/futex-prctl/*"], code: 2,
        message: r#"(suite futex is not in this run: select it with --suite futex)"# },
    // bisect's suite/binary/case form selects on run too: past the checks,
    // the missing QEMU is the first thing wrong.
    Row { args: &["run", "--kernel", "debian:7.3", "--suite", "futex", "--test", "futex/futex-prctl/*"], code: 69,
        message: "/nonexistent/qemu-system-x86_64 not found" },
    Row { args: &["run", "--kernel", "debian:7.3", "--test", "futex-prctl/["], code: 2,
        message: r#"harness: error: --test "futex-prctl/[": unclosed character class; missing ']'"# },
    Row { args: &["matrix", "--matrix", "MATRIX", "--test", "nosuch/*", "--list"], code: 2,
        message: r#"harness: error: --test "nosuch/*" selects no case; suite smoke has topology, smoke"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--guest-bin", "/nonexistent"], code: 2,
        message: "harness: error: /nonexistent: cannot read: No such file or directory (os error 2); guest binaries must be static x86-64 executables" },
    Row { args: &["run", "--kernel", "debian:7.3", "--guest-bin", "/bin/sh"], code: 2,
        message: "harness: error: /bin/sh: dynamically linked (has an ELF interpreter)" },
    Row { args: &["run", "--kernel", "debian:7.3", "--guest-env", "FUTEX_RACE_SERIALIZE"], code: 2,
        message: r#"harness: error: --guest-env "FUTEX_RACE_SERIALIZE": expected KEY=VALUE"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--guest-env", "HARNESS_TIMEOUT_SCALE=9"], code: 2,
        message: r#"harness: error: --guest-env "HARNESS_TIMEOUT_SCALE=9": PATH and HARNESS_* are set by the harness"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--share", "/nonexistent:/mnt/x"], code: 2,
        message: "harness: error: /nonexistent: No such file or directory (os error 2)\n" },
    Row { args: &["run", "--kernel", "debian:7.3", "--share", "/tmp:relative"], code: 2,
        message: r#"harness: error: bad share "/tmp:relative": guest path "relative" must be absolute (expected HOST_DIR[:GUEST_PATH[:ro|rw]])"# },
    Row { args: &["run", "--kernel", "debian:7.3", "--accel", "bogus"], code: 2,
        message: "invalid value 'bogus' for '--accel <ACCEL>'" },
    Row { args: &["run", "--topology", "nodes=1"], code: 2,
        message: "the following required arguments were not provided:\n  --kernel <KERNEL>" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--list", "--dry-run"], code: 2,
        message: "error: the argument '--list' cannot be used with '--dry-run'" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--dry-run", "--test", "nosuch/*"], code: 2,
        message: "harness: error: --test \"nosuch/*\" selects no case; suite smoke has" },
    Row { args: &["bisect", "--dry-run", "--tree", "NOTLINUX", "--good", "v1", "--bad", "v2", "--test", "futex/futex-prctl/*"], code: 2,
        message: "has no top-level Makefile: not a Linux kernel tree" },
    Row { args: &["matrix", "--matrix", "/nonexistent.yaml"], code: 2,
        message: "harness: error: /nonexistent.yaml: cannot read: No such file or directory (os error 2)\n" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--kernel", "typo"], code: 2,
        message: "matrix.yaml matches --kernel typo; kernels: debian-6.12, debian-6.16," },
    Row { args: &["matrix", "--matrix", "MATRIX", "-j", "vcpu"], code: 2,
        message: "invalid value 'vcpu' for '--jobs <auto|vcpus|N>': expected auto, vcpus or a number of cells >= 1" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--tcg-thread", "rr"], code: 2,
        message: "invalid value 'rr' for '--tcg-thread <auto|multi|single>': expected auto, multi or single" },
    Row { args: &["run", "--kernel", "debian:7.3", "--tcg-thread", "rr"], code: 2,
        message: "invalid value 'rr' for '--tcg-thread <TCG_THREAD>'" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--shard", "5/4"], code: 2,
        message: "invalid value '5/4' for '--shard <I/N>': expected I/N with 1 <= I <= N, e.g. 2/4" },
    Row { args: &["matrix", "--matrix", "MATRIX", "-j", "0"], code: 2,
        message: "invalid value '0' for '--jobs <auto|vcpus|N>': expected auto, vcpus or a number of cells >= 1" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--json"], code: 2,
        message: "harness: error: --json needs a FILE for the results (or --list for a JSON listing)" },
    Row { args: &["bench", "--kernel", "debian:7.3", "--set", "nope"], code: 2,
        message: r#"harness: error: --set "nope": known sets: standard, seed, numa"# },
    Row { args: &["bench", "--kernel", "debian:abc"], code: 2,
        message: r#"harness: error: kernel "debian:abc": expected a Debian kernel version"# },
    Row { args: &["bench", "--kernel", "debian:7.3", "--rounds", "0"], code: 2,
        message: "harness: error: --rounds must be 1..=1000 and --runtime in (0, 3600] seconds" },
    Row { args: &["junit", "merge", "OUT", "/nonexistent.xml"], code: 2,
        message: "harness: error: /nonexistent.xml: cannot read: No such file or directory (os error 2)\n" },
    // Output paths (issue 34): checked before any work.
    Row { args: &["run", "--kernel", "debian:7.3", "--junit", "."], code: 2,
        message: "harness: error: --junit .: is a directory; expected a file path" },
    Row { args: &["run", "--kernel", "debian:7.3", "--json", "afile/r.json"], code: 2,
        message: "harness: error: --json afile/r.json: afile is a file, not a directory" },
    Row { args: &["run", "--kernel", "debian:7.3", "--out", "afile"], code: 2,
        message: "harness: error: --out afile: exists and is not a directory" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--json", "afile/m.json"], code: 2,
        message: "harness: error: --json afile/m.json: afile is a file, not a directory" },
    Row { args: &["bench", "--kernel", "debian:7.3", "--json", "afile/b.json"], code: 2,
        message: "harness: error: --json afile/b.json: afile is a file, not a directory" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--costs", "."], code: 2,
        message: "harness: error: --costs .: is a directory; expected a file path" },
    Row { args: &["run", "--kernel", "debian:7.3", "--history", "afile/h.sqlite"], code: 2,
        message: "harness: error: --history afile/h.sqlite: afile is a file, not a directory" },
    Row { args: &["matrix", "--matrix", "MATRIX", "--history", "."], code: 2,
        message: "harness: error: --history .: is a directory; expected a file path" },
    Row { args: &["compare", "nonsense", "last"], code: 2,
        message: "harness: error: nonsense: neither a JSON results file nor a run of the history (an id, last, previous)" },
    Row { args: &["compare", "last", "previous", "--db", "/nonexistent/h.sqlite"], code: 2,
        message: "harness: error: history /nonexistent/h.sqlite: no such file" },
    Row { args: &["history", "--out", "/nonexistent"], code: 2,
        message: "harness: error: history /nonexistent/history.sqlite: no such file" },
    Row { args: &["run", "--kernel", "debian:7.3", "--topology", "nodes=1,mem=99999999G"], code: 2,
        message: "harness: error: --topology: 102399998976 MiB of guest memory is more than this host has (" },
    Row { args: &["run", "--kernel", "debian:7.3", "--debian-mirror", "notaurl"], code: 2,
        message: "harness: error: --debian-mirror: invalid Debian mirror URL \"notaurl\": only http:// and https:// are supported" },
    Row { args: &["bench", "--kernel", "debian:7.3", "--debian-mirror", "notaurl"], code: 2,
        message: "harness: error: --debian-mirror: invalid Debian mirror URL \"notaurl\"" },
    Row { args: &["run", "--kernel", "debian:7.3", "--suite", "kselftest-futex", "--kselftest-tree", "/nonexistent"], code: 2,
        message: "harness: error: --kselftest-tree: kselftest source \"/nonexistent\": not a kernel source tree (no Makefile or tools/testing/selftests/futex/functional/Makefile)" },
    Row { args: &["kernel", "path", "nope"], code: 2,
        message: "harness: error: no kernel definition \"nope\" in the harness's built-in kernels/ (known: 7.3," },
    Row { args: &["kernel", "build", "nope"], code: 2,
        message: "harness: error: no kernel definition \"nope\" in the harness's built-in kernels/ (known: 7.3," },
    Row { args: &["kernel", "clean", "nope"], code: 2,
        message: "harness: error: no kernel definition \"nope\" in the harness's built-in kernels/ (known: 7.3," },
    Row { args: &["kernel", "clean"], code: 2,
        message: "harness: error: kernel clean: name the definitions to clean, or give --all" },
    Row { args: &["kselftest", "compare", "notxml.xml"], code: 2,
        message: "harness: error: notxml.xml:2:4: not a JUnit document: expected 'a' tag, not 'b'" },
    Row { args: &["kselftest", "compare", "/nonexistent.xml"], code: 2,
        message: "harness: error: /nonexistent.xml: No such file or directory (os error 2)" },
    Row { args: &["bench", "--kernel", "debian:7.3", "--baseline", "nosuch"], code: 2,
        message: "harness: error: --baseline \"nosuch\": not a configuration this run measures (global, " },
    Row { args: &["bench", "--kernel", "debian:7.3", "--expect", "immutable=2"], code: 2,
        message: "harness: error: --expect \"immutable=2\": immutable=\"2\": expected 1/0, yes/no or true/false" },
    Row { args: &["bench", "--kernel", "debian:7.3", "--emit-bare", "bare", "--bare-suite", "nope"], code: 2,
        message: "harness: error: unknown suite \"nope\"; known suites: smoke, futex," },
    Row { args: &["bisect", "--tree", "NOTLINUX", "--good", "v1", "--bad", "v2", "--test", "futex/futex-prctl/*"], code: 2,
        message: "has no top-level Makefile: not a Linux kernel tree" },
    Row { args: &["matrix", "--matrix", "BADSPEC", "--list"], code: 2,
        message: "harness: error: badspec.yaml:3:5: kernel \"k\": no kernel definition \"nope\" in the harness's built-in kernels/" },
    // The host's fault, not the user's: 69.
    Row { args: &["run", "--kernel", "debian:7.3"], code: 69,
        message: "/nonexistent/qemu-system-x86_64 not found" },
    Row { args: &["host"], code: 69,
        message: "/nonexistent/qemu-system-x86_64 not found" },
];

#[test]
fn every_bad_input_gets_its_message_and_exit_status_before_any_work() {
    let matrix = concat!(env!("CARGO_MANIFEST_DIR"), "/../matrix.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.xml");
    // A kernel tree (the build tests' stand-in), and one configured in place.
    let tree = format!(
        "tree:{}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kbuild/tree")
    );
    let configured = dir.path().join("configured");
    std::fs::create_dir_all(&configured).unwrap();
    for f in ["Makefile", "Kconfig", ".config"] {
        std::fs::write(configured.join(f), "").unwrap();
    }
    let configured = format!("tree:{}", configured.display());
    // A file where an output path needs a directory.
    std::fs::write(dir.path().join("afile"), "").unwrap();
    // A JUnit file that is not XML.
    std::fs::write(dir.path().join("notxml.xml"), "<testsuites>\n<a></b>\n").unwrap();
    // A git repository with two commits that is not a kernel tree.
    let notlinux = dir.path().join("notlinux");
    std::fs::create_dir(&notlinux).unwrap();
    for step in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "a",
        ],
        &["tag", "v1"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "b",
        ],
        &["tag", "v2"],
    ] {
        let st = Command::new("git")
            .args(step)
            .current_dir(&notlinux)
            .status()
            .unwrap();
        assert!(st.success(), "git {step:?}");
    }
    // A matrix whose only kernel names a definition that does not exist.
    std::fs::write(
        dir.path().join("badspec.yaml"),
        "kernels:\n  - name: k\n    spec: source:nope\n    features: {prctl: true, private_hash: true, immutable: false, numa: true, mpol: true, growth: any-vm, requeue_same_flags: true, robust_pending_owned: true}\ntopologies:\n  - name: t\n    nodes:\n      - {cpus: 1, mem: 512M}\nsuites:\n  - name: smoke\n    builtin: smoke\n",
    )
    .unwrap();
    let mut bad = Vec::new();
    assert!(ROWS.len() >= 20, "the issue asks for at least 20 rows");
    for row in ROWS {
        let args: Vec<&str> = row
            .args
            .iter()
            .map(|a| match *a {
                "MATRIX" => matrix,
                "OUT" => out.to_str().unwrap(),
                "TREE" => tree.as_str(),
                "CONFIGURED" => configured.as_str(),
                "NOTLINUX" => notlinux.to_str().unwrap(),
                "BADSPEC" => "badspec.yaml",
                a => a,
            })
            .collect();
        let o = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(&args)
            .current_dir(dir.path())
            // Nothing may be fetched: a mirror that does not answer, a
            // cache of its own, and no QEMU.
            .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
            .env("HARNESS_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
            .env("HARNESS_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(row.code) || !stderr.contains(row.message) {
            bad.push(format!(
                "harness {}: exit {:?}, want {}; stderr:\n{stderr}",
                args.join(" "),
                o.status.code(),
                row.code
            ));
        }
        // A cause is printed once.
        let line = stderr.lines().find(|l| l.starts_with("harness: error: "));
        if let Some(l) = line {
            let parts: Vec<&str> = l.split(": ").collect();
            let mut seen = std::collections::BTreeSet::new();
            for p in parts.iter().filter(|p| p.len() > 12) {
                if !seen.insert(*p) {
                    bad.push(format!("harness {}: repeats {p:?}: {l}", args.join(" ")));
                }
            }
        }
    }
    assert!(
        !dir.path().join("cache").exists(),
        "something was cached before the input was refused"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// A `.config` with everything the guest needs.
const GOOD_CONFIG: &str = "CONFIG_BLK_DEV_INITRD=y\nCONFIG_BINFMT_ELF=y\nCONFIG_DEVTMPFS=y\n\
    CONFIG_PROC_FS=y\nCONFIG_SYSFS=y\nCONFIG_TTY=y\nCONFIG_SERIAL_8250=y\n\
    CONFIG_SERIAL_8250_CONSOLE=y\nCONFIG_SERIAL_8250_RUNTIME_UARTS=4\n\
    CONFIG_X86_IOPL_IOPERM=y\nCONFIG_FUTEX=y\nCONFIG_SMP=y\nCONFIG_NUMA=y\n\
    CONFIG_ACPI=y\nCONFIG_ACPI_NUMA=y\nCONFIG_PCI=y\nCONFIG_X86_64_ACPI_NUMA=y\n";

/// A `path:` image whose `.config` lacks what the guest needs is refused
/// before QEMU starts (QEMU here does not exist: a 69 would mean the check
/// came too late), naming each option and the line that fixes it.
#[test]
fn a_path_kernel_lacking_guest_options_is_refused_before_boot() {
    let d = tempfile::tempdir().unwrap();
    let mut img = vec![0u8; 8192];
    img[0x1fe] = 0x55;
    img[0x1ff] = 0xaa;
    img[0x202..0x206].copy_from_slice(b"HdrS");
    img[0x1f1] = 1;
    let run = |config: &str, topology: &str| {
        let dir = tempfile::tempdir_in(d.path()).unwrap();
        std::fs::write(dir.path().join("bzImage"), &img).unwrap();
        std::fs::write(dir.path().join(".config"), config).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["run", "--kernel"])
            .arg(format!("path:{}", dir.path().join("bzImage").display()))
            .args(["--topology", topology, "--suite", "smoke"])
            .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let no_ioperm = GOOD_CONFIG.replace(
        "CONFIG_X86_IOPL_IOPERM=y\n",
        "# CONFIG_X86_IOPL_IOPERM is not set\n",
    );
    let (code, err) = run(&no_ioperm, "nodes=1,cpus=1,mem=256M");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("lacks what an x86_64 guest needs for 1 node(s) x 1 vCPU(s)")
            && err.contains(
                "CONFIG_X86_IOPL_IOPERM=y    # guest-init ends QEMU through isa-debug-exit (ioperm) (is not set)"
            ),
        "{err}"
    );
    let no_acpi_numa = GOOD_CONFIG.replace("CONFIG_ACPI_NUMA=y\n", "");
    let (code, err) = run(&no_acpi_numa, "nodes=2,cpus=1,mem=256M");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("CONFIG_ACPI_NUMA=y    # the kernel reads the nodes from SRAT (is not set)"),
        "{err}"
    );
    // One node does not need ACPI_NUMA: past the check, to the host (69).
    let (code, err) = run(&no_acpi_numa, "nodes=1,cpus=1,mem=256M");
    assert_eq!(code, Some(69), "{err}");
    assert!(err.contains("qemu-system-x86_64 not found"), "{err}");
}

#[test]
fn help_names_the_scheduler_and_profile_options() {
    let help = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(args)
            .output()
            .expect("harness runs");
        assert!(o.status.success(), "{args:?}: {:?}", o.status);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let matrix = help(&["matrix", "--help"]);
    for want in ["auto|vcpus|N", "--costs <FILE>", "--profile"] {
        assert!(
            matrix.contains(want),
            "matrix --help lacks {want:?}:\n{matrix}"
        );
    }
    assert!(help(&["run", "--help"]).contains("--profile"));
}

/// `matrix --list --json FILE` writes the listing to FILE (its directories
/// created), as `--json FILE` does for results, and nothing to stdout.
#[test]
fn a_matrix_listing_goes_to_the_json_file_given() {
    let matrix = concat!(env!("CARGO_MANIFEST_DIR"), "/../matrix.yaml");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("new/dir/cells.json");
    let o = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["matrix", "--matrix", matrix, "--list", "--json"])
        .arg(&file)
        .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
        .env("HARNESS_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let listing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let text = listing.to_string();
    assert!(
        text.contains("debian-7.3") && text.contains("2n2c"),
        "{text}"
    );
}

/// `run --dry-run` with no QEMU and an empty cache: exit 0, the plan with
/// what would be fetched or built, QEMU's words shell-quoted; the cache
/// and `--out` are never created.
#[test]
fn a_dry_run_does_nothing_and_says_what_would_be_done() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--kernel", "debian:7.3", "--suite", "futex", "--topology", "nodes=2,cpus=1"],
            &[
                "dry run: nothing was fetched, built, written or started\n",
                "would download the package index of http://127.0.0.1:9/debian and the newest 7.3 cloud-amd64 kernel into ",
                "would unpack the guest binaries into ",
                "  futex-numa: /harness/bin/futex-numa --expect prctl=1,private_hash=1,immutable=0,numa=1,mpol=1,growth=any-vm,requeue_same_flags=1,robust_pending_owned=1,version=7.3 (timeout 600 s)\n",
                "qemu: qemu-system-x86_64 -nodefaults ",
                "note: QEMU is not usable here",
            ],
        ),
        (
            &["--kernel", "debian:7.3", "--suite", "kselftest-futex"],
            &["would build the upstream futex selftests (from Debian's linux-source of the kernel's series)"],
        ),
        (
            &["--kernel", "source:7.3-immutable", "--suite", "futex"],
            &[
                "would build kernels/7.3-immutable.yaml (its base fetched first) into ",
                "--expect prctl=1,private_hash=1,immutable=1,",
            ],
        ),
        (
            &["--kernel", "debian:7.3", "--exec", "echo 'a b'"],
            &[
                "would fetch Debian's busybox-static (the guest's shell) into the cache\n",
                "  exec-1: /bin/sh -c 'echo '\\''a b'\\''' (timeout 120 s)\n",
            ],
        ),
    ];
    for (args, wants) in cases {
        let o = Command::new(env!("CARGO_BIN_EXE_harness"))
            .arg("run")
            .args(*args)
            .args(["--dry-run", "--out", "out"])
            .current_dir(dir.path())
            .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
            .env("HARNESS_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
            .env("HARNESS_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}\n{out}\n{err}");
        for w in *wants {
            assert!(out.contains(w), "{args:?}: {w:?} not in\n{out}");
        }
        // QEMU's line is what a shell splits into QEMU's words: the
        // command line is one word.
        let line = out.lines().find_map(|l| l.strip_prefix("qemu: ")).unwrap();
        let words = shlex::split(line).unwrap();
        assert_eq!(words[0], "qemu-system-x86_64", "{line}");
        let append = words.iter().position(|w| w == "-append").unwrap();
        assert!(words[append + 1].contains(" rdinit=/init "), "{line}");
        assert!(
            !dir.path().join("cache").exists(),
            "{args:?}: the cache was written"
        );
        assert!(
            !dir.path().join("out").exists(),
            "{args:?}: --out was created"
        );
    }
}

/// `matrix --dry-run` and `bisect --dry-run` with no QEMU and an empty
/// cache: exit 0, each cell's plan (the shared kernel work said once) and
/// the bisection's range, step command and step cell; the cache, `--out`
/// and the bisected tree (its HEAD, index and refs) are left as they were.
#[test]
fn matrix_and_bisect_dry_runs_do_nothing_and_say_what_would_be_done() {
    let dir = tempfile::tempdir().unwrap();
    let harness = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(args)
            .current_dir(dir.path())
            .env("HARNESS_QEMU", "/nonexistent/qemu-system-x86_64")
            .env("HARNESS_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
            .env("HARNESS_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap()
    };
    // The built-in matrix (no matrix.yaml here), two kernels x one topology.
    let o = harness(&[
        "matrix",
        "--dry-run",
        "--kernel",
        "debian-7.3,source-7.3",
        "--topology",
        "2n2c",
        "--suite",
        "futex",
        "--out",
        "out",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for w in [
        "dry run: nothing was fetched, built, written or started\n2 cells\n",
        "would download the package index of http://127.0.0.1:9/debian and the newest 7.3 cloud-amd64 kernel into ",
        "would build kernels/7.3.yaml (its base fetched first) into ",
        "would write: out/junit.xml (the aggregate JUnit), out/costs.json (learned costs), out/history.sqlite (the results history)\n",
        "\nwould write: out/cells/debian-7.3/2n2c/futex (",
        "cell: debian-7.3/2n2c/futex\n",
        "cell: source-7.3/2n2c/futex\n",
    ] {
        assert!(out.contains(w), "{w:?} not in\n{out}");
    }
    let qemu_lines: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("qemu: "))
        .collect();
    assert_eq!(qemu_lines.len(), 2, "{out}");
    for line in qemu_lines {
        let words = shlex::split(line).unwrap();
        let numa = words
            .iter()
            .filter(|w| w.starts_with("node,nodeid="))
            .count();
        assert_eq!(numa, 2, "{line}");
    }
    // A bisection of a three-commit tree.
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&tree)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    git(&["init", "-q"]);
    for (i, f) in ["Makefile", "Kconfig", "init.c"].iter().enumerate() {
        std::fs::write(tree.join(f), format!("{i}\n")).unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", f]);
    }
    let before = (
        git(&["rev-parse", "HEAD"]),
        std::fs::read(tree.join(".git/index")).unwrap(),
        std::fs::metadata(tree.join(".git/index"))
            .unwrap()
            .modified()
            .unwrap(),
    );
    let o = harness(&[
        "bisect",
        "--dry-run",
        "--tree",
        "tree",
        "--good",
        "HEAD~1",
        "--bad",
        "HEAD",
        "--test",
        "futex/futex-prctl/*",
        "--out",
        "bout",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for w in [
        "dry run: nothing was checked out, built, written or started; the tree is as it was\n",
        "would bisect 1 commit(s) in ",
        " bisect-step --phase bisect --tree ",
        " --test 'futex/futex-prctl/*' ",
        "with kernels/7.3.yaml's config base, fragments and required options",
        "  futex-prctl: /harness/bin/futex-prctl --expect prctl=1,private_hash=1,",
    ] {
        assert!(out.contains(w), "{w:?} not in\n{out}");
    }
    let qemu = out.lines().find_map(|l| l.strip_prefix("qemu: ")).unwrap();
    let words = shlex::split(qemu).unwrap();
    let kernel = words.iter().position(|w| w == "-kernel").unwrap();
    assert!(
        words[kernel + 1].ends_with("bout/obj/arch/x86/boot/bzImage"),
        "{qemu}"
    );
    let after = (
        git(&["rev-parse", "HEAD"]),
        std::fs::read(tree.join(".git/index")).unwrap(),
        std::fs::metadata(tree.join(".git/index"))
            .unwrap()
            .modified()
            .unwrap(),
    );
    assert!(before == after, "the tree changed");
    assert!(!tree.join(".git/BISECT_START").exists());
    for p in ["cache", "out", "bout"] {
        assert!(!dir.path().join(p).exists(), "{p} was created");
    }
}
