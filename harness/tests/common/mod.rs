//! Shared by the real-VM test files (and the results file's schema check).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Whether the real-VM tests run: `HARNESS_VM_TESTS` set. Under `CI`
/// without it they fail instead of passing silently.
#[allow(dead_code)]
pub fn enabled() -> bool {
    if std::env::var_os("HARNESS_VM_TESTS").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but HARNESS_VM_TESTS is not: the VM tests must run in CI"
    );
    eprintln!("skipping VM test: set HARNESS_VM_TESTS=1 to boot real VMs");
    false
}

/// The kernel the VM tests boot: `$HARNESS_TEST_KERNEL`, default
/// `debian:7.3.4`.
#[allow(dead_code)]
pub fn kernel() -> String {
    std::env::var("HARNESS_TEST_KERNEL").unwrap_or_else(|_| "debian:7.3.4".into())
}

/// One VM at a time: the machine has two cores, and two guests at once
/// only make both slower (and turn timing-sensitive upstream cases into
/// failures). Each test file is its own binary, so each has its own lock.
static VM_LOCK: Mutex<()> = Mutex::new(());

/// Holds [`VM_LOCK`]; a test that panicked holding it does not stop the
/// others.
#[allow(dead_code)]
pub fn vm_lock() -> MutexGuard<'static, ()> {
    VM_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// SIGKILLs a child process when dropped: whatever happens, the harness
/// under test does not outlive its test.
#[allow(dead_code)]
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on the test's own child (ESRCH once it is gone).
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// Waits until a matrix run with `-j 1` finished its first cell (its
/// `first_junit` written) and booted its second (a QEMU whose command line
/// has `marker`), then sends the harness `pid` the signal `sig`: a run
/// stopped in the middle of a cell.
#[allow(dead_code)]
pub fn signal_during_second_cell(pid: u32, first_junit: &Path, marker: &str, sig: i32) {
    wait_for("the first cell's JUnit", Duration::from_secs(300), || {
        first_junit.is_file()
    });
    // With -j 1 the first cell's QEMU is gone: a QEMU now is the second
    // cell's, which takes seconds to boot under TCG.
    wait_for("the second cell's QEMU", Duration::from_secs(120), || {
        !processes_with(marker).is_empty()
    });
    // SAFETY: plain kill(2) on the test's own child.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Polls `f` every 100 ms until it holds; panics after `limit`.
#[allow(dead_code)]
pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every file below `dir`, recursively.
#[allow(dead_code)]
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// One `<testcase>` of a JUnit report, as the tests look at it.
#[derive(Debug, Clone)]
#[allow(dead_code)] // not every test file uses every helper
pub struct Case {
    /// `binary/case`.
    pub name: String,
    /// `(message, text)` of a `<failure>` or `<error>`.
    pub failure: Option<(String, String)>,
    /// The message of its `<skipped>`, if it has one.
    pub skipped: Option<String>,
}

/// Every `<testcase>` of a JUnit document (which must be well-formed XML).
#[allow(dead_code)]
pub fn parse_junit(xml: &str) -> Vec<Case> {
    let doc = roxmltree::Document::parse(xml).expect("JUnit is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| Case {
            name: n.attribute("name").unwrap_or("").to_string(),
            failure: n
                .children()
                .find(|c| c.has_tag_name("failure") || c.has_tag_name("error"))
                .map(|f| {
                    (
                        f.attribute("message").unwrap_or("").to_string(),
                        f.text().unwrap_or("").to_string(),
                    )
                }),
            skipped: n
                .children()
                .find(|c| c.has_tag_name("skipped"))
                .map(|c| c.attribute("message").unwrap_or("").to_string()),
        })
        .collect()
}

/// The case named `name`; panics listing the names there are.
#[allow(dead_code)]
pub fn case<'a>(cases: &'a [Case], name: &str) -> &'a Case {
    cases.iter().find(|c| c.name == name).unwrap_or_else(|| {
        panic!(
            "no testcase {name:?} in {:#?}",
            cases.iter().map(|c| &c.name).collect::<Vec<_>>()
        )
    })
}

/// The source-built kernel the VM tests boot next to Debian's
/// (`$HARNESS_SOURCE_KERNEL`, which `cargo xtask ci` sets to
/// `source:7.3-gdb` after building it: the `7.3` guest fragment with LKDTM,
/// virtiofs, IA32 compat, plus DWARF, so the gdb test needs no second build;
/// `source:7.3` serves every other test as well).
/// Unset: `None` and a note; under `CI` unset is an error, so those tests
/// never pass silently there.
#[allow(dead_code)]
pub fn source_kernel() -> Option<String> {
    if let Some(k) = std::env::var("HARNESS_SOURCE_KERNEL")
        .ok()
        .filter(|k| !k.is_empty())
    {
        return Some(k);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but HARNESS_SOURCE_KERNEL is not: `cargo xtask ci` builds source:7.3-gdb and sets it"
    );
    eprintln!(
        "skipping the source-kernel part: set HARNESS_SOURCE_KERNEL=source:7.3 \
         (`harness kernel build 7.3` first), as `cargo xtask ci` does"
    );
    None
}

/// Processes (other than this one) whose command line contains `marker`:
/// how the tests check that no QEMU or virtiofsd outlived the harness.
#[allow(dead_code)]
pub fn processes_with(marker: &str) -> Vec<u32> {
    processes_with_cmdline(marker)
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

/// [`processes_with`], each with its command line (arguments joined by
/// spaces).
#[allow(dead_code)]
pub fn processes_with_cmdline(marker: &str) -> Vec<(u32, String)> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd);
            if cmd.contains(marker) && pid != std::process::id() {
                pids.push((pid, cmd.replace('\0', " ")));
            }
        }
    }
    pids
}

/// What `docs/results.schema.json` (the JSON results file's schema, draft
/// 2020-12) says is wrong with `doc`, one line per error: empty when valid.
/// The schema itself is checked against its meta-schema first.
#[allow(dead_code)]
pub fn results_schema_errors(doc: &serde_json::Value) -> Vec<String> {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results.schema.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        if let Err(e) = jsonschema::meta::validate(&schema) {
            panic!("{} is no draft 2020-12 schema: {e}", path.display());
        }
        jsonschema::draft202012::new(&schema).unwrap()
    });
    validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Debian's 7.3 source — the `7.3` definition's base, a commit of the
/// cache's `kbuild/git/bases.git` (imported once: downloads
/// `linux-source-7.3` the first time) — as a git work tree of its own at
/// `dest` (`git clone --shared`: the objects stay in the cache), on a
/// branch `main` at that commit. Returns the commit.
#[allow(dead_code)]
pub fn linux_73_clone(dest: &Path) -> String {
    use harness::kernel::{cache::Cache, definition, source};
    use std::process::Command;
    let def = definition::load(&definition::kernels_dir().unwrap(), "7.3").unwrap();
    let cache = Cache::from_env().unwrap();
    let mirror = || harness::kernel::debian::DebianMirror::discover(None);
    let base = source::prepare(&def.base, &cache, &mirror, &|m| eprintln!("{m}")).unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git").args(args).status().unwrap();
        assert!(status.success(), "git {args:?}");
    };
    let (repo, dest_s) = (base.repo.to_str().unwrap(), dest.to_str().unwrap());
    git(&["clone", "-q", "--shared", "--no-checkout", repo, dest_s]);
    git(&["-C", dest_s, "checkout", "-q", "-B", "main", &base.commit]);
    base.commit
}

/// A finished command's exit status, stdout and stderr, for assertion messages.
#[allow(dead_code)]
pub fn text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
