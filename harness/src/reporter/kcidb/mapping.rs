//! The naming rules of the KCIDB document (docs/kcidb.md): ids, the
//! patchset hash, test paths, the status mapping, kernel report
//! signatures, and the text, time and URL forms the schema accepts. Pure.

use super::results::{Bench, Case};
use sha2::{Digest, Sha256};

/// The first component of every test path.
pub const PATH_ROOT: &str = "futex_harness";

/// `<origin>:` and 32 hex digits of SHA-256 over the parts, each
/// length-prefixed (so `("ab", "c")` and `("a", "bc")` differ).
pub fn object_id(origin: &str, parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    format!("{origin}:{}", &hex::encode(h.finalize())[..32])
}

/// KCIDB's patchset hash: SHA-256 over the newline-terminated SHA-256s of
/// the patches, in order; empty without patches.
pub fn patchset_hash(patch_sha256s: &[&str]) -> String {
    if patch_sha256s.is_empty() {
        return String::new();
    }
    let mut h = Sha256::new();
    for s in patch_sha256s {
        h.update(s.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// One component of a test path: characters outside `[A-Za-z0-9_-]`
/// become `_` (one each), an empty name becomes `_`.
pub fn path_segment(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

/// `futex_harness.<suite>[.<binary>.<case>...]`: the case's `/`-separated
/// names, each through [`path_segment`].
pub fn test_path(suite: &str, case: Option<&str>) -> String {
    let mut p = format!("{PATH_ROOT}.{}", path_segment(suite));
    for part in case.into_iter().flat_map(|c| c.split('/')) {
        p.push('.');
        p.push_str(&path_segment(part));
    }
    p
}

/// A case's KCIDB status: `pass` is PASS (DONE when it measured a
/// benchmark), `skip` SKIP, `fail` FAIL, except a planned test that never
/// started because the guest died or guest-init gave no result (`did not
/// run: ...`), which is MISS. An `xfail` is FAIL too: the kernel did fail
/// the check, and KCIDB says "known" with an incident tying the test to
/// the known failure's issue (docs/kcidb.md), not with a status that
/// would read as a pass or as not run.
pub fn case_status(case: &Case, bench: Option<&Bench>) -> &'static str {
    match case.status.as_str() {
        "pass" if bench.is_some() => "DONE",
        "pass" => "PASS",
        "skip" => "SKIP",
        "xfail" => "FAIL",
        _ if case
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("did not run:")) =>
        {
            "MISS"
        }
        _ => "FAIL",
    }
}

/// A cell's KCIDB status: `passed` PASS, `failed` FAIL, `error` (the cell
/// could not run: kernel, QEMU, initramfs) ERROR, `interrupted` and
/// `not-run` MISS.
pub fn cell_status(status: &str) -> &'static str {
    match status {
        "passed" => "PASS",
        "failed" => "FAIL",
        "error" => "ERROR",
        _ => "MISS",
    }
}

/// What stays the same between two occurrences of one kernel report: the
/// title with the CPU, PID and task (`comm:`), hex numbers and free-standing
/// decimal numbers masked (file:line and symbol names are kept).
pub fn report_signature(kind: &str, title: &str) -> String {
    let mut words = Vec::new();
    let mut skip = false;
    for w in title.split_whitespace() {
        if std::mem::take(&mut skip) {
            continue;
        }
        if matches!(w, "CPU:" | "PID:" | "comm:") {
            skip = true;
            continue;
        }
        words.push(mask_numbers(w));
    }
    format!("{kind}: {}", words.join(" "))
}

fn mask_numbers(word: &str) -> String {
    let keep_decimal = word.contains('.') || word.contains('/');
    let mut out = String::new();
    let b = word.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'0' && b.get(i + 1) == Some(&b'x') {
            out.push_str("0x?");
            i += 2;
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
        } else if b[i].is_ascii_digit() && !keep_decimal {
            out.push('N');
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        } else {
            let c = word[i..].chars().next().unwrap_or('?');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `s` without NUL characters (the schema forbids them), cut to `max`
/// bytes on a character boundary.
pub(super) fn text(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].replace('\0', "\u{fffd}")
}

/// RFC 3339 of seconds since the epoch (`None` for no time).
pub(super) fn timestamp(secs: f64) -> Option<String> {
    if !secs.is_finite() || secs <= 0.0 {
        return None;
    }
    let whole = secs.floor();
    let nanos = ((secs - whole) * 1e9) as u32;
    chrono::DateTime::from_timestamp(whole as i64, nanos.min(999_999_999))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, false))
}

/// Percent-encodes one URL path segment (RFC 3986 unreserved kept).
pub(super) fn url_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `base/seg1/seg2...`, each segment encoded.
pub(super) fn url(base: &str, segments: &[&str]) -> String {
    let mut u = base.trim_end_matches('/').to_string();
    for s in segments {
        u.push('/');
        u.push_str(&url_segment(s));
    }
    u
}

/// A resource name: no `/` and no NUL.
pub(super) fn path_safe_name(name: &str) -> String {
    let n = name.replace(['/', '\0'], "_");
    if n.is_empty() {
        "_".into()
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_keep_names_readable_and_match_the_schema() {
        assert_eq!(
            test_path("futex", Some("futex-numa/flag-accepted")),
            "futex_harness.futex.futex-numa.flag-accepted"
        );
        assert_eq!(
            test_path(
                "kselftest-futex",
                Some("futex_requeue_pi/args.t_5000 é/<exit>")
            ),
            "futex_harness.kselftest-futex.futex_requeue_pi.args_t_5000__._exit_"
        );
        assert_eq!(test_path("s", Some("a//b")), "futex_harness.s.a._.b");
        assert_eq!(test_path("smoke", None), "futex_harness.smoke");
    }

    #[test]
    fn statuses_follow_the_verdict() {
        let case = |status: &str, message: Option<&str>| Case {
            name: "b/c".into(),
            status: status.into(),
            message: message.map(String::from),
            known_failure: None,
            repeat: None,
        };
        let bench = Bench::default();
        assert_eq!(case_status(&case("pass", None), None), "PASS");
        assert_eq!(case_status(&case("pass", None), Some(&bench)), "DONE");
        assert_eq!(case_status(&case("skip", Some("no NUMA")), None), "SKIP");
        // Known, but a failure of the kernel all the same: FAIL with an
        // incident tying it to the known failure's issue.
        assert_eq!(
            case_status(&case("xfail", Some("round 3: x")), None),
            "FAIL"
        );
        assert_eq!(case_status(&case("fail", Some("expected 0")), None), "FAIL");
        assert_eq!(
            case_status(&case("fail", Some("did not run: kernel panic")), None),
            "MISS"
        );
        assert_eq!(
            case_status(&case("fail", Some("did not finish: kernel panic")), None),
            "FAIL"
        );
        for (cell, kcidb) in [
            ("passed", "PASS"),
            ("failed", "FAIL"),
            ("error", "ERROR"),
            ("interrupted", "MISS"),
            ("not-run", "MISS"),
        ] {
            assert_eq!(cell_status(cell), kcidb);
        }
    }

    #[test]
    fn ids_and_hashes_are_deterministic_and_unambiguous() {
        assert_eq!(object_id("o", &["a", "b"]), object_id("o", &["a", "b"]));
        assert_ne!(object_id("o", &["ab", "c"]), object_id("o", &["a", "bc"]));
        assert!(object_id("o", &["a"]).starts_with("o:"));
        assert_eq!(object_id("o", &["a"]).len(), 2 + 32);
        assert_eq!(patchset_hash(&[]), "");
        // `printf 'x\n' | sha256sum`, the schema's recipe over one hash "x".
        let one = patchset_hash(&["x"]);
        assert_eq!(one, hex::encode(Sha256::digest(b"x\n")));
    }

    #[test]
    fn report_signatures_drop_what_varies_between_occurrences() {
        let a = report_signature(
            "warning",
            "WARNING: CPU: 1 PID: 77 at kernel/futex/core.c:123 futex_hash+0x1a/0x40",
        );
        let b = report_signature(
            "warning",
            "WARNING: CPU: 0 PID: 1 at kernel/futex/core.c:123 futex_hash+0x2b/0x40",
        );
        assert_eq!(a, b);
        assert_eq!(
            a,
            "warning: WARNING: at kernel/futex/core.c:123 futex_hash+0x?/0x?"
        );
        let c = report_signature(
            "soft-lockup",
            "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [x:12]",
        );
        assert_eq!(
            c,
            "soft-lockup: watchdog: BUG: soft lockup - CPU#N stuck for Ns! [x:N]"
        );
    }

    #[test]
    fn times_are_rfc3339_and_texts_have_no_nul() {
        assert_eq!(
            timestamp(1_764_583_200.5).as_deref(),
            Some("2025-12-01T10:00:00.500000+00:00")
        );
        assert_eq!(timestamp(0.0), None);
        assert_eq!(text("a\0b", 100), "a\u{fffd}b");
        assert_eq!(text("éé", 3), "é");
        assert_eq!(
            url("http://h/x/", &["a b", "c.log"]),
            "http://h/x/a%20b/c.log"
        );
    }
}
