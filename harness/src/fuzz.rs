//! Stable-Rust fuzzing support for the parsers of guest output: a small
//! mutator (byte flips, splices, line duplication, deep nesting, hostile
//! tokens) and the oracles that say what must hold for ANY input.
//!
//! Used by `cargo xtask fuzz --seconds N` (random mutations of the corpus
//! in `harness/tests/fuzz-corpus/`) and by the corpus replay test in
//! `harness/tests/faults.rs`. The oracles check: no panic (the caller
//! catches it), bounded output, and JUnit that parses as XML and carries
//! no control characters.

use crate::console::{self, ConsoleScan};
use crate::ktap;
use crate::result::{CellResult, VmEnd};
use std::time::{Duration, SystemTime};

/// Inputs larger than this are cut before mutation (keeps runs fast).
pub const MAX_INPUT: usize = 256 << 10;

/// A small deterministic PRNG (xorshift64*): no dependency, reproducible
/// from the seed printed by the fuzzer.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Tokens that mean something to the KTAP parser, the console scanner or
/// an XML writer.
pub const TOKENS: &[&[u8]] = &[
    b"KTAP version 1\n",
    b"TAP version 13\n",
    b"1..",
    b"ok ",
    b"not ok ",
    b"# Subtest: ",
    b" # SKIP ",
    b" # TODO ",
    b" # XFAIL ",
    b" # TIMEOUT ",
    b" # ERROR ",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999",
    b"-1",
    b"0",
    b"\0",
    b"\xff\xfe",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\x1b[31m",
    b"\r",
    b"\t",
    b"<",
    b">",
    b"&",
    b"\"",
    b"]]>",
    b"<![CDATA[",
    b"&#0;",
    b"harness: begin 1 smoke\n",
    b"harness: end 1 smoke\n",
    b"[    1.234567] ",
    b"Kernel panic - not syncing: fuzz\n",
    b"------------[ cut here ]------------\n",
    b"WARNING: CPU: 0 PID: 1 at kernel/fuzz.c:1 fuzz+0x0/0x10\n",
    b"BUG: kernel NULL pointer dereference, address: 0000000000000000\n",
    b"Oops: 0000 [#1] PREEMPT SMP NOPTI\n",
    b"watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [fuzz:1]\n",
    b"INFO: task fuzz:1 blocked for more than 120 seconds.\n",
    b"BUG: KASAN: slab-out-of-bounds in fuzz+0x0/0x10\n",
    b"---[ end trace 0000000000000000 ]---\n",
    b"---[ end Kernel panic - not syncing: fuzz ]---\n",
    b" </TASK>\n",
    b"==================================================================\n",
    b"futex hash table entries: 99999999999999999999 (order: 1)\n",
    b"    ",
    b"\n",
];

/// Applies 1 to 4 random mutations to `input`, sometimes splicing in
/// `other` (another corpus entry).
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input[..input.len().min(MAX_INPUT)].to_vec();
    for _ in 0..1 + rng.below(4) {
        mutate_once(rng, &mut v, other);
        v.truncate(MAX_INPUT);
    }
    v
}

fn line_bounds(v: &[u8], rng: &mut Rng) -> (usize, usize) {
    if v.is_empty() {
        return (0, 0);
    }
    let at = rng.below(v.len());
    let start = v[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let end = v[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(v.len(), |p| at + p + 1);
    (start, end)
}

fn mutate_once(rng: &mut Rng, v: &mut Vec<u8>, other: &[u8]) {
    let len = v.len();
    match rng.below(11) {
        // Flip a bit.
        0 if len > 0 => {
            let i = rng.below(len);
            v[i] ^= 1 << rng.below(8);
        }
        // Replace a byte by a random one.
        1 if len > 0 => {
            let i = rng.below(len);
            v[i] = rng.next_u64() as u8;
        }
        // Delete a range.
        2 if len > 0 => {
            let a = rng.below(len);
            let b = (a + 1 + rng.below(64)).min(len);
            v.drain(a..b);
        }
        // Insert a token.
        3 | 4 => {
            let t = TOKENS[rng.below(TOKENS.len())];
            let at = rng.below(len + 1);
            v.splice(at..at, t.iter().copied());
        }
        // Splice a piece of another input.
        5 if !other.is_empty() => {
            let a = rng.below(other.len());
            let b = (a + 1 + rng.below(4096)).min(other.len());
            let at = rng.below(len + 1);
            v.splice(at..at, other[a..b].iter().copied());
        }
        // Duplicate a line many times.
        6 => {
            let (s, e) = line_bounds(v, rng);
            let line = v[s..e].to_vec();
            let max = if rng.below(8) == 0 { 5000 } else { 20 };
            let n = 1 + rng.below(max);
            let n = n.min(MAX_INPUT / line.len().max(1));
            let mut rep = Vec::with_capacity(line.len() * n);
            for _ in 0..n {
                rep.extend_from_slice(&line);
            }
            v.splice(e..e, rep);
        }
        // Deep nesting: indent the rest of the input under many subtests.
        7 => {
            let depth = 1 + rng.below(40);
            let (s, _) = line_bounds(v, rng);
            let mut head = Vec::new();
            let mut tail = Vec::new();
            for d in 0..depth {
                let ind = b" ".repeat(4 * d);
                head.extend_from_slice(&ind);
                head.extend_from_slice(format!("# Subtest: n{d}\n").as_bytes());
                head.extend_from_slice(&ind);
                head.extend_from_slice(b"    KTAP version 1\n");
                head.extend_from_slice(&ind);
                head.extend_from_slice(b"    1..1\n");
            }
            for d in (0..depth).rev() {
                tail.extend_from_slice(&b" ".repeat(4 * d));
                tail.extend_from_slice(format!("ok 1 n{d}\n").as_bytes());
            }
            let indent = b" ".repeat(4 * depth);
            let rest: Vec<u8> = v[s..]
                .split(|&b| b == b'\n')
                .flat_map(|l| [indent.as_slice(), l, b"\n"].concat())
                .collect();
            v.truncate(s);
            v.extend_from_slice(&head);
            v.extend_from_slice(&rest);
            v.extend_from_slice(&tail);
        }
        // A huge number or a huge line.
        8 => {
            let at = rng.below(len + 1);
            let t: Vec<u8> = if rng.below(2) == 0 {
                b"9".repeat(1 + rng.below(400))
            } else {
                vec![b'x'; 1 + rng.below(20_000)]
            };
            v.splice(at..at, t);
        }
        // Truncate.
        9 if len > 0 => v.truncate(rng.below(len)),
        // Swap two lines.
        _ => {
            let (a, b) = line_bounds(v, rng);
            let (c, d) = line_bounds(v, rng);
            if b <= c {
                let l2 = v[c..d].to_vec();
                let l1 = v[a..b].to_vec();
                v.splice(c..d, l1);
                v.splice(a..b, l2);
            }
        }
    }
}

/// What an oracle found wrong (a panic is caught by the caller).
pub type Violation = String;

/// Checks the KTAP parser and everything downstream of it on `input`.
pub fn check_ktap(input: &[u8]) -> Result<(), Violation> {
    let doc = ktap::parse(input);
    check_doc_bounds(&doc)?;
    check_report(doc, ConsoleScan::default(), input.len())
}

/// Checks the console scanner and everything downstream of it on `input`.
pub fn check_console(input: &[u8]) -> Result<(), Violation> {
    let scan = console::scan(input);
    if scan.reports.len() > console::MAX_REPORTS {
        return Err(format!("{} reports kept", scan.reports.len()));
    }
    for r in &scan.reports {
        // An excerpt may end with one line beyond the byte bound.
        let max = console::MAX_EXCERPT_BYTES + 4 * 4096 + 64;
        if r.excerpt.len() > max {
            return Err(format!("excerpt of {} bytes", r.excerpt.len()));
        }
        if r.title.len() > 4 * 4096 {
            return Err(format!("title of {} bytes", r.title.len()));
        }
    }
    if scan.tail.len() > console::MAX_TAIL_BYTES + 4 * 4096 {
        return Err(format!("tail of {} bytes", scan.tail.len()));
    }
    if scan
        .running_at_end
        .as_ref()
        .is_some_and(|t| t.len() > 4 * 4096)
    {
        return Err("running_at_end unbounded".into());
    }
    check_report(ktap::parse(b""), scan, input.len())
}

fn check_doc_bounds(doc: &ktap::Document) -> Result<(), Violation> {
    if doc.problems.len() > ktap::MAX_PROBLEMS + 1 {
        return Err(format!("{} problems kept", doc.problems.len()));
    }
    fn walk(n: &ktap::TestNode, depth: usize, count: &mut usize) -> Result<(), Violation> {
        *count += 1;
        if depth > ktap::MAX_DEPTH + 1 {
            return Err(format!("nesting depth {depth}"));
        }
        if n.name.len() > 4 * ktap::MAX_LINE_BYTES {
            return Err(format!("name of {} bytes", n.name.len()));
        }
        if n.diagnostics
            .iter()
            .any(|d| d.len() > 4 * ktap::MAX_LINE_BYTES)
        {
            return Err("diagnostic line unbounded".into());
        }
        for s in &n.subtests {
            walk(s, depth + 1, count)?;
        }
        Ok(())
    }
    let mut count = 0;
    for t in &doc.tests {
        walk(t, 1, &mut count)?;
    }
    if count > ktap::MAX_LINES {
        return Err(format!(
            "{count} tests from at most {} lines",
            ktap::MAX_LINES
        ));
    }
    Ok(())
}

/// A cell with this KTAP and console, ended in each way a VM can end,
/// through the verdict and the JUnit writer.
fn check_report(doc: ktap::Document, scan: ConsoleScan, input_len: usize) -> Result<(), Violation> {
    let ends = [
        VmEnd::Finished,
        VmEnd::KernelPanic,
        VmEnd::QemuExited {
            status: -9,
            stderr: "qemu: <&>\u{1}".into(),
        },
    ];
    for end in ends {
        let cell = CellResult {
            name: "fuzz/cell".into(),
            kernel: "path:/fuzz".into(),
            topology: "nodes=1".into(),
            suite: "fuzz".into(),
            accel: "tcg".into(),
            qemu_version: "7.2".into(),
            planned: vec!["smoke".into(), "topology".into()],
            end,
            ktap: doc.clone(),
            console: scan.clone(),
            console_log: None,
            duration: Duration::from_millis(1),
            qemu_cpu: None,
            started: SystemTime::UNIX_EPOCH,
            notes: vec![],
            known_failures: Vec::new(),
            boot_retries: Vec::new(),
            qemu_command: String::new(),
            profile: Default::default(),
        };
        let cases = crate::verdict::cases(&cell);
        let report = crate::junit::report("fuzz", std::slice::from_ref(&cell));
        let xml = report
            .to_string()
            .map_err(|e| format!("JUnit serialisation failed: {e}"))?;
        let bound = 2 * crate::junit::MAX_TEXT + 4096 * (cases.len() + 8) + 8 * input_len;
        if xml.len() > bound {
            return Err(format!("JUnit of {} bytes (bound {bound})", xml.len()));
        }
        if let Some(c) = xml
            .chars()
            .find(|&c| (c as u32) < 0x20 && !"\t\n\r".contains(c))
        {
            return Err(format!("control character {:#x} in the JUnit", c as u32));
        }
        let parsed = roxmltree::Document::parse(&xml)
            .map_err(|e| format!("JUnit does not parse as XML: {e}"))?;
        let n = parsed
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .count();
        if n != cases.len() {
            return Err(format!(
                "{} cases but {n} testcases in the XML",
                cases.len()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_oracles_hold_on_a_few() {
        let seed = b"KTAP version 1\n1..2\nok 1 a\nnot ok 2 b # SKIP x\n";
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..200 {
            let x = mutate(&mut a, seed, b"# other\n");
            assert_eq!(x, mutate(&mut b, seed, b"# other\n"));
            check_ktap(&x).unwrap();
            check_console(&x).unwrap();
        }
    }
}
