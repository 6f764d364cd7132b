//! JUnit writer: one testsuite per cell, one testcase per leaf KTAP test.
//!
//! Every string put into the XML goes through [`xml_safe`] first: guest
//! output is untrusted and XML 1.0 cannot carry NUL and most other control
//! characters at all, not even escaped.

use crate::result::CellResult;
use crate::verdict::{self, Case, CaseStatus};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Bytes kept of a name, message or property value.
pub const MAX_SHORT: usize = 1024;
/// Bytes kept of a failure text or system-out.
pub const MAX_TEXT: usize = 64 * 1024;

/// Appended to a string cut by [`xml_safe`].
const TRUNCATED: &str = " [...truncated]";

/// Writing the report failed.
#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    /// The temporary file next to the destination could not be created.
    #[error("cannot create a temporary file next to {}", path.display())]
    Create {
        /// The report's destination.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Serializing into the temporary file failed.
    #[error("cannot write the JUnit report for {}", path.display())]
    Serialize {
        /// The report's destination.
        path: PathBuf,
        /// Why.
        #[source]
        source: quick_junit::SerializeError,
    },
    /// Flushing or syncing the temporary file failed.
    #[error("cannot write the JUnit report for {}", path.display())]
    Write {
        /// The report's destination.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Renaming the temporary file over the destination failed.
    #[error("cannot move the JUnit report into place at {}", path.display())]
    Persist {
        /// The report's destination.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Builds the report of a run: one testsuite per cell.
pub fn report(name: &str, cells: &[CellResult]) -> Report {
    let mut report = Report::new(xml_safe(name, MAX_SHORT));
    if let Some(first) = cells.iter().map(|c| c.started).min() {
        report.set_timestamp(timestamp(first));
    }
    report.set_time(cells.iter().map(|c| c.duration).sum());
    for cell in cells {
        report.add_test_suite(testsuite(cell, &verdict::cases(cell)));
    }
    report
}

/// A cell's testsuite: its facts as properties, `cases` (the verdict's,
/// possibly filtered by `--test`) as testcases, artifacts and problems in
/// system-out.
pub fn testsuite(cell: &CellResult, cases: &[Case]) -> TestSuite {
    let short = |s: &str| xml_safe(s, MAX_SHORT);
    let mut suite = TestSuite::new(short(&cell.name));
    suite.set_timestamp(timestamp(cell.started));
    suite.set_time(cell.duration);
    let mut properties = vec![
        ("kernel", cell.kernel.clone()),
        ("topology", cell.topology.clone()),
        ("suite", cell.suite.clone()),
        ("accel", cell.accel.clone()),
        ("qemu_version", cell.qemu_version.clone()),
        ("vm_end", verdict::describe(&cell.end)),
    ];
    if let Some(n) = cell.console.futex_hash_entries {
        properties.push(("futex_hash_entries", n.to_string()));
    }
    if let Some(log) = &cell.console_log {
        properties.push(("console_log", log.display().to_string()));
    }
    for note in &cell.notes {
        properties.push(("note", note.clone()));
    }
    for r in &cell.boot_retries {
        let value = format!("{} attempt {}: {}", r.signature, r.attempt, r.line);
        properties.push(("boot_retry", value));
    }
    for (name, value) in properties {
        suite.add_property(Property::new(name, short(&value)));
    }
    // Where the time went (`time_boot_s`, ...; one `test_s` per binary).
    for (phase, d) in &cell.profile.phases {
        let name = format!("time_{}_s", phase.word().replace('-', "_"));
        suite.add_property(Property::new(name, format!("{:.3}", d.as_secs_f64())));
    }
    for t in &cell.profile.tests {
        let value = format!("{} {:.3}", t.name, t.duration.as_secs_f64());
        suite.add_property(Property::new("test_s", short(&value)));
    }

    let mut failed = false;
    for case in cases {
        let mut xfail = None;
        let status = match &case.status {
            CaseStatus::Pass => TestCaseStatus::success(),
            CaseStatus::Skip(reason) => {
                let mut s = TestCaseStatus::skipped();
                if !reason.is_empty() {
                    s.set_message(short(reason));
                }
                s
            }
            CaseStatus::Fail { message, text } => {
                failed = true;
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(short(message));
                if !text.is_empty() {
                    s.set_description(xml_safe(text, MAX_TEXT));
                }
                s
            }
            // JUnit has no expected failure: a skip whose message starts
            // `xfail:` (what CI pages show), the entry as properties.
            CaseStatus::Xfail {
                message,
                text,
                reason,
                entry,
            } => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(short(&format!("xfail: {message}")));
                s.set_type("xfail");
                if !text.is_empty() {
                    s.set_description(xml_safe(text, MAX_TEXT));
                }
                xfail = Some((reason, entry));
                s
            }
        };
        let mut tc = TestCase::new(short(&case.name), status);
        tc.set_classname(short(&cell.name));
        if let Some((reason, entry)) = xfail {
            tc.add_property(Property::new("status", "xfail"));
            tc.add_property(Property::new("known_failure", short(entry)));
            tc.add_property(Property::new("known_failure_reason", short(reason)));
        }
        suite.add_test_case(tc);
    }

    let out = system_out(cell, failed);
    if !out.is_empty() {
        suite.set_system_out(xml_safe(&out, MAX_TEXT));
    }
    suite
}

/// What a human needs beside the cases: the cell's artifacts as
/// `[[ATTACHMENT|path]]` lines (the convention Jenkins and GitLab read),
/// KTAP problems and stray diagnostics, and for a failing cell the end of
/// the console.
fn system_out(cell: &CellResult, failed: bool) -> String {
    let mut out = String::new();
    for note in cell.notes.iter().filter(|n| n.starts_with("[[ATTACHMENT|")) {
        out.push_str(note);
        out.push('\n');
    }
    let mut section = |title: &str, lines: &mut dyn Iterator<Item = &str>| {
        let mut lines = lines.peekable();
        if lines.peek().is_none() {
            return;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(title);
        out.push('\n');
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    };
    section(
        "KTAP problems:",
        &mut cell.ktap.problems.iter().map(String::as_str),
    );
    section(
        "KTAP diagnostics outside any test:",
        &mut cell.ktap.diagnostics.iter().map(String::as_str),
    );
    let truncated = truncation_notes(cell);
    section(
        "Output truncated in the guest:",
        &mut truncated.iter().map(String::as_str),
    );
    if cell.console.omitted_reports > 0 {
        let note = format!(
            "{} more kernel reports not listed",
            cell.console.omitted_reports
        );
        section("Console:", &mut std::iter::once(note.as_str()));
    }
    if failed {
        section("Console tail:", &mut cell.console.tail.lines());
    }
    out
}

/// `test: output truncated after N bytes; dropped M bytes of output` for
/// every test whose output guest-init cut (else a passing test's report
/// would not say so).
fn truncation_notes(cell: &CellResult) -> Vec<String> {
    fn walk(n: &crate::ktap::TestNode, path: &str, out: &mut Vec<String>) {
        let notes: Vec<&str> = n
            .diagnostics
            .iter()
            .map(|d| d.trim())
            .filter(|d| d.starts_with("output truncated after ") || d.starts_with("dropped "))
            .collect();
        if !notes.is_empty() && out.len() < 100 {
            out.push(format!("{path}: {}", notes.join("; ")));
        }
        for s in &n.subtests {
            walk(s, &format!("{path}/{}", s.name), out);
        }
    }
    let mut out = Vec::new();
    for t in &cell.ktap.tests {
        walk(t, &t.name, &mut out);
    }
    out
}

fn timestamp(t: SystemTime) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::<chrono::Utc>::from(t)
}

/// Writes the report to `path` atomically: readers see the old file or the
/// whole new one, never a partial report from a killed run.
pub fn write_atomic(report: &Report, path: &Path) -> Result<(), JunitError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".junit-")
        .suffix(".xml.tmp")
        .tempfile_in(dir)
        .map_err(|source| JunitError::Create {
            path: path.to_path_buf(),
            source,
        })?;
    let write_err = |source| JunitError::Write {
        path: path.to_path_buf(),
        source,
    };
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        report
            .serialize(&mut w)
            .map_err(|source| JunitError::Serialize {
                path: path.to_path_buf(),
                source,
            })?;
        w.flush().map_err(write_err)?;
    }
    // Temporary files are private (0600); a report is for CI to read.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(write_err)?;
    }
    tmp.as_file().sync_all().map_err(write_err)?;
    tmp.persist(path).map_err(|e| JunitError::Persist {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}

/// `s` without what XML 1.0 cannot carry (NUL and the other C0 controls
/// except tab, newline and CR; DEL and C1 controls; U+FFFE/U+FFFF) and
/// without ANSI escape sequences, cut to at most `max` bytes (marking the cut).
pub fn xml_safe(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max));
    let mut chars = s.chars().peekable();
    let mut cut = false;
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters intermediates final (0x40..=0x7e);
            // anything else: ESC and one character.
            if chars.next_if_eq(&'[').is_some() {
                while let Some(n) = chars.next_if(|n| (' '..='~').contains(n)) {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        let allowed = matches!(c,
            '\t' | '\n' | '\r'
            | ' '..='~'
            | '\u{a0}'..='\u{d7ff}'
            | '\u{e000}'..='\u{fffd}'
            | '\u{10000}'..);
        if !allowed {
            continue;
        }
        if out.len() + c.len_utf8() > max {
            cut = true;
            break;
        }
        out.push(c);
    }
    if cut && max >= TRUNCATED.len() {
        while out.len() + TRUNCATED.len() > max {
            out.pop();
        }
        out.push_str(TRUNCATED);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::VmEnd;
    use crate::{console, ktap};
    use std::time::{Duration, SystemTime};

    const GOLDEN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/junit/golden.xml"
    );

    fn cell(
        name: &str,
        ktap_text: &[u8],
        console_text: &[u8],
        end: VmEnd,
        planned: &[&str],
    ) -> CellResult {
        CellResult {
            name: name.into(),
            kernel: "debian:7.3.4".into(),
            topology: "nodes2".into(),
            suite: "smoke".into(),
            accel: "tcg".into(),
            qemu_version: "QEMU emulator version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u13)".into(),
            planned: planned.iter().map(|s| s.to_string()).collect(),
            end,
            ktap: ktap::parse(ktap_text),
            console: console::scan(console_text),
            console_log: None,
            duration: Duration::from_millis(6400),
            qemu_cpu: None,
            // 2026-07-01T12:00:00Z: fixed so the golden file is stable.
            started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_782_907_200),
            notes: vec![],
            known_failures: vec![],
            boot_retries: Vec::new(),
            qemu_command: String::new(),
            profile: Default::default(),
        }
    }

    #[test]
    fn truncated_output_is_said_even_when_the_test_passes() {
        let doc = b"KTAP version 1\n1..1\n    # flood line 1\n    # output truncated after 8388608 bytes\n    # dropped 306184192 bytes of output\nok 1 flood\n";
        let c = cell("t", doc, b"", VmEnd::Finished, &["flood"]);
        let xml = report("r", &[c]).to_string().unwrap();
        assert!(
            xml.contains(
                "flood: output truncated after 8388608 bytes; dropped 306184192 bytes of output"
            ),
            "{xml}"
        );
    }

    #[test]
    fn each_boot_retry_is_a_property() {
        let mut c = cell("t", b"", b"", VmEnd::Finished, &[]);
        c.boot_retries = vec![
            crate::result::BootRetry {
                signature: "qemu7-tcg-debian-6.12".into(),
                attempt: 1,
                line: "traps: PANIC: double fault, error_code: 0x0 <&>".into(),
            },
            crate::result::BootRetry {
                signature: "qemu7-tcg-debian-6.12".into(),
                attempt: 2,
                line: "init[1]: segfault at 8".into(),
            },
        ];
        let xml = report("r", &[c]).to_string().unwrap();
        for p in [
            r#"<property name="boot_retry" value="qemu7-tcg-debian-6.12 attempt 1: traps: PANIC: double fault, error_code: 0x0 &lt;&amp;&gt;"/>"#,
            r#"<property name="boot_retry" value="qemu7-tcg-debian-6.12 attempt 2: init[1]: segfault at 8"/>"#,
        ] {
            assert!(xml.contains(p), "{p} in {xml}");
        }
    }

    #[test]
    fn the_profile_is_in_properties() {
        use crate::profile::{CellProfile, Phase, TestTime};
        let mut c = cell("t", b"", b"", VmEnd::Finished, &[]);
        c.profile = CellProfile {
            phases: vec![
                (Phase::QemuStart, Duration::from_millis(250)),
                (Phase::Boot, Duration::from_millis(4100)),
            ],
            tests: vec![TestTime {
                number: Some(1),
                name: "futex-wake".into(),
                duration: Duration::from_millis(1910),
            }],
        };
        let xml = report("r", &[c]).to_string().unwrap();
        for p in [
            r#"<property name="time_qemu_start_s" value="0.250"/>"#,
            r#"<property name="time_boot_s" value="4.100"/>"#,
            r#"<property name="test_s" value="futex-wake 1.910"/>"#,
        ] {
            assert!(xml.contains(p), "{p} in {xml}");
        }
    }

    #[test]
    fn golden() {
        let cells = [
            cell(
                "debian-7.3.4/nodes2/smoke",
                include_bytes!("../tests/fixtures/junit/ktap.txt"),
                include_bytes!("../tests/fixtures/junit/console.log"),
                VmEnd::KernelPanic,
                &["smoke", "topology", "resize", "waitv"],
            ),
            cell(
                "debian-7.3.4/nodes1/smoke",
                b"KTAP version 1\n1..1\nok 1 smoke\n",
                b"[    0.2] futex hash table entries: 256 (16384 bytes on 1 NUMA nodes, total 16 KiB, linear).\n",
                VmEnd::Finished,
                &["smoke"],
            ),
        ];
        let xml = report("futex-matrix", &cells).to_string().unwrap();
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(GOLDEN, &xml).unwrap();
        }
        let golden = std::fs::read_to_string(GOLDEN).unwrap();
        assert_eq!(
            xml, golden,
            "rerun with UPDATE_GOLDEN=1 to accept the new output"
        );
    }

    #[test]
    fn hostile_output_still_parses() {
        let ktap_text = b"KTAP version 1\n1..2\n# \x00nul \x1b[31mred\x1b[0m \xff\xfe bad \x07bell \xef\xbf\xbf\nnot ok 1 a\x01b\nnot ok 2 \xc3\n";
        let console_text = b"harness: begin 1 a\x01b\nBUG: \x00\x1b]0;title\x07 \xef\xbf\xbe\xff\n";
        let cells = [cell(
            "cell\u{0}\u{1b}[1m<&>\"'",
            ktap_text,
            console_text,
            VmEnd::QemuExited {
                status: 1,
                stderr: "\u{0}\u{ffff}boom\n".into(),
            },
            &["a\u{1}b", "\u{fffe}"],
        )];
        let xml = report("r\u{0}", &cells).to_string().unwrap();
        // quick-xml does not check the Char production of XML 1.0: do it here.
        let legal = |c: char| matches!(c, '\t' | '\n' | '\r' | ' '..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..);
        assert!(xml.chars().all(legal), "{xml:?}");
        assert!(!xml.contains('\u{1b}'));
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut elements = 0;
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)) => {
                    for a in e.attributes() {
                        a.unwrap()
                            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                            .unwrap();
                    }
                    elements += 1;
                }
                Ok(quick_xml::events::Event::Text(t)) => {
                    t.decode().unwrap();
                }
                Ok(_) => {}
                Err(e) => panic!("{e} at {}:\n{xml}", reader.buffer_position()),
            }
        }
        assert!(elements > 5, "{xml}");
    }

    #[test]
    fn xml_safe_strips_and_bounds() {
        assert_eq!(
            xml_safe(
                "a\u{0}b\u{1b}[1;31mc\u{1b}[0m\td\r\n\u{7f}\u{85}\u{fffe}\u{ffff}é😀",
                100
            ),
            "abc\td\r\né😀"
        );
        assert_eq!(xml_safe("\u{1b}]0;t\u{7}x", 100), "0;tx");
        let long = "x".repeat(100);
        let cut = xml_safe(&long, 40);
        assert_eq!(cut.len(), 40);
        assert!(cut.ends_with(TRUNCATED));
        assert_eq!(xml_safe("ééé", 5), "éé");
        assert_eq!(xml_safe(&long, 100), long);
    }

    #[test]
    fn writes_atomically_and_names_the_path_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        std::fs::write(&path, "old").unwrap();
        let r = report("run", &[]);
        write_atomic(&r, &path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r.to_string().unwrap()
        );
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1);

        let missing = dir.path().join("no/such/dir/junit.xml");
        let e = write_atomic(&r, &missing).unwrap_err();
        assert!(matches!(e, JunitError::Create { .. }));
        assert!(e.to_string().contains("no/such/dir/junit.xml"), "{e}");
    }
}
