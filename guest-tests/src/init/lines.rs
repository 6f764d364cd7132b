//! Turning a child's raw output bytes into lines of the top-level KTAP
//! document: splitting with a length cap, sanitizing, deciding whether the
//! child speaks KTAP, and bounding the total. All pure.

/// Longest line forwarded, in bytes of child output; the rest of a longer
/// line is dropped and [`TRUNCATED_MARK`] appended.
pub const MAX_LINE_BYTES: usize = 4096;

/// Appended to a line cut at [`MAX_LINE_BYTES`].
pub const TRUNCATED_MARK: &str = " [line truncated]";

/// Makes raw child output safe for the results stream: invalid UTF-8 becomes
/// U+FFFD, control characters (C0, DEL, C1: NUL, ESC, CR, ...) except tab are
/// removed. The input should be one line without its `\n`.
pub fn sanitize_line(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .chars()
        .filter(|&c| c == '\t' || !c.is_control())
        .collect()
}

/// Whether a (first non-empty) line announces a KTAP or TAP document.
pub fn is_ktap_header(line: &str) -> bool {
    line.starts_with("KTAP version") || line.starts_with("TAP version")
}

/// One complete line produced by [`LineSplitter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLine {
    /// The kept bytes (at most [`MAX_LINE_BYTES`]), without the `\n`.
    pub bytes: Vec<u8>,
    /// Bytes the child wrote for this line, dropped part and `\n` included.
    pub raw_len: usize,
    /// Whether bytes beyond [`MAX_LINE_BYTES`] were dropped.
    pub cut: bool,
}

/// Splits a byte stream into lines incrementally, keeping at most
/// `max` bytes of each line so memory stays bounded whatever the child
/// writes.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    buf: Vec<u8>,
    raw_len: usize,
    cut: bool,
}

impl LineSplitter {
    /// A splitter keeping at most `max` bytes per line.
    pub fn new(max: usize) -> LineSplitter {
        LineSplitter {
            max,
            buf: Vec::new(),
            raw_len: 0,
            cut: false,
        }
    }

    /// Feeds bytes; returns the lines they complete.
    pub fn push(&mut self, mut data: &[u8]) -> Vec<RawLine> {
        let mut done = Vec::new();
        while !data.is_empty() {
            let (chunk, rest, newline) = match data.iter().position(|&b| b == b'\n') {
                Some(i) => (&data[..i], &data[i + 1..], true),
                None => (data, &data[data.len()..], false),
            };
            let room = self.max.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.cut |= chunk.len() > room;
            self.raw_len += chunk.len();
            if newline {
                self.raw_len += 1;
                done.push(self.take());
            }
            data = rest;
        }
        done
    }

    /// The unterminated last line, if any (call at end of stream).
    pub fn finish(&mut self) -> Option<RawLine> {
        (self.raw_len > 0).then(|| self.take())
    }

    fn take(&mut self) -> RawLine {
        let line = RawLine {
            bytes: std::mem::take(&mut self.buf),
            raw_len: self.raw_len,
            cut: self.cut,
        };
        self.raw_len = 0;
        self.cut = false;
        line
    }
}

/// What the output budget says about one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Forward it.
    Yes,
    /// The budget just ran out: drop it and print the truncation note.
    FirstDrop,
    /// Drop it silently (the note was printed).
    Drop,
}

/// The `max_output_bytes` limit of one binary, over stdout and stderr
/// together, counted in bytes the child wrote (newlines included).
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: u64,
    dropped: u64,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: 0,
            dropped: 0,
        }
    }

    /// Accounts for a line of `raw_len` bytes. Once one line is dropped,
    /// every later line is too, so the forwarded output is a prefix.
    pub fn admit(&mut self, raw_len: usize) -> Admit {
        let len = raw_len as u64;
        if self.dropped == 0 && self.used + len <= self.limit {
            self.used += len;
            return Admit::Yes;
        }
        let first = self.dropped == 0;
        // A zero-length drop still has to flip the state.
        self.dropped += len.max(1);
        if first {
            Admit::FirstDrop
        } else {
            Admit::Drop
        }
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Whether the child's stdout is a KTAP document, decided by its first
/// non-empty line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No non-empty line yet.
    Undecided,
    /// KTAP: lines are re-emitted indented as a nested document.
    Ktap,
    /// Anything else: lines become `# ` diagnostics.
    Plain,
}

/// The line to print for one sanitized stdout line of a subtest (indented
/// one level), or `None` for blank lines. Decides `mode` on the first
/// non-empty line.
pub fn render_stdout(mode: &mut Mode, line: &str) -> Option<String> {
    if line.trim().is_empty() {
        return None;
    }
    if *mode == Mode::Undecided {
        *mode = if is_ktap_header(line) {
            Mode::Ktap
        } else {
            Mode::Plain
        };
    }
    Some(match mode {
        Mode::Ktap => format!("  {line}"),
        _ => format!("  # {line}"),
    })
}

/// The line to print for one sanitized stderr line, or `None` if blank.
pub fn render_stderr(line: &str) -> Option<String> {
    (!line.trim().is_empty()).then(|| format!("  # stderr: {line}"))
}

/// The sanitized text of a [`RawLine`], with [`TRUNCATED_MARK`] if it was cut.
pub fn line_text(line: &RawLine) -> String {
    let mut s = sanitize_line(&line.bytes);
    if line.cut {
        s.push_str(TRUNCATED_MARK);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_strips_controls_keeps_tab_and_text() {
        let cases: &[(&[u8], &str)] = &[
            (b"plain", "plain"),
            (b"a\tb", "a\tb"),
            (b"nul\0byte", "nulbyte"),
            (b"\x1b[31mred\x1b[0m", "[31mred[0m"),
            (b"cr\r", "cr"),
            (b"del\x7f", "del"),
            (b"bad \xff\xfe utf8", "bad \u{fffd}\u{fffd} utf8"),
            ("c1 \u{85}x".as_bytes(), "c1 x"),
            ("<>&\"' ]]> ünï".as_bytes(), "<>&\"' ]]> ünï"),
        ];
        for (raw, want) in cases {
            assert_eq!(sanitize_line(raw), *want, "{raw:?}");
        }
    }

    #[test]
    fn ktap_header_detection() {
        assert!(is_ktap_header("KTAP version 1"));
        assert!(is_ktap_header("TAP version 13"));
        assert!(!is_ktap_header("  KTAP version 1"));
        assert!(!is_ktap_header("# KTAP version 1"));
        assert!(!is_ktap_header("hello"));
    }

    #[test]
    fn splitter_joins_chunks_and_caps_lines() {
        let mut s = LineSplitter::new(4);
        assert_eq!(s.push(b"ab"), vec![]);
        let got = s.push(b"c\nabcdefg\n\nxy");
        let want = vec![
            RawLine {
                bytes: b"abc".to_vec(),
                raw_len: 4,
                cut: false,
            },
            RawLine {
                bytes: b"abcd".to_vec(),
                raw_len: 8,
                cut: true,
            },
            RawLine {
                bytes: vec![],
                raw_len: 1,
                cut: false,
            },
        ];
        assert_eq!(got, want);
        let last = s.finish().unwrap();
        assert_eq!((last.bytes.as_slice(), last.raw_len), (&b"xy"[..], 2));
        assert_eq!(s.finish(), None);
        assert_eq!(
            line_text(&RawLine {
                bytes: b"ab".to_vec(),
                raw_len: 9,
                cut: true
            }),
            format!("ab{TRUNCATED_MARK}")
        );
    }

    #[test]
    fn budget_forwards_a_prefix_then_drops_everything() {
        let mut b = Budget::new(10);
        assert_eq!(b.admit(6), Admit::Yes);
        assert_eq!(b.admit(4), Admit::Yes);
        assert_eq!(b.admit(1), Admit::FirstDrop);
        // Fits by size, but output after a drop would not be a prefix.
        assert_eq!(b.admit(0), Admit::Drop);
        assert_eq!(b.admit(5), Admit::Drop);
        assert_eq!(b.dropped(), 7);
        assert_eq!(Budget::new(0).admit(0), Admit::Yes);
        assert_eq!(Budget::new(0).admit(1), Admit::FirstDrop);
    }

    #[test]
    fn mode_is_decided_by_first_non_empty_line() {
        let mut m = Mode::Undecided;
        assert_eq!(render_stdout(&mut m, "  "), None);
        assert_eq!(m, Mode::Undecided);
        assert_eq!(
            render_stdout(&mut m, "KTAP version 1").as_deref(),
            Some("  KTAP version 1")
        );
        assert_eq!(render_stdout(&mut m, "ok 1 a").as_deref(), Some("  ok 1 a"));
        assert_eq!(m, Mode::Ktap);

        let mut m = Mode::Undecided;
        assert_eq!(render_stdout(&mut m, "hello").as_deref(), Some("  # hello"));
        assert_eq!(
            render_stdout(&mut m, "KTAP version 1").as_deref(),
            Some("  # KTAP version 1")
        );
        assert_eq!(m, Mode::Plain);
        assert_eq!(render_stderr("oops").as_deref(), Some("  # stderr: oops"));
        assert_eq!(render_stderr(""), None);
    }
}
