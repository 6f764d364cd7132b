//! The kernel's CPU and node list format, as sysfs prints it in
//! `cpu/online`, `cpu/possible`, `node/possible`, `node/online`,
//! `node/has_memory` and `nodeN/cpulist`: `0-3,8,10-11`, an empty line for
//! none. One parser and one formatter for every guest binary.

use std::collections::BTreeSet;

/// A set of CPU (or node) numbers.
pub type CpuSet = BTreeSet<u32>;

/// Parses a list such as `0-1,4` (blank or empty: no CPUs).
pub fn parse(s: &str) -> Result<CpuSet, String> {
    let mut set = CpuSet::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(set);
    }
    for item in s.split(',') {
        let num = |x: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| format!("bad cpu list {s:?}: {x:?} is not a cpu number"))
        };
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(item)?, num(item)?),
        };
        if lo > hi {
            return Err(format!("bad cpu list {s:?}: range {item:?} runs backwards"));
        }
        // A bound on what one bad line can allocate.
        if hi - lo >= 65536 {
            return Err(format!("bad cpu list {s:?}: range {item:?} is too large"));
        }
        set.extend(lo..=hi);
    }
    Ok(set)
}

/// Formats a set in the kernel's list format (`0-1,4`; `(none)` if empty).
pub fn format(set: &CpuSet) -> String {
    let mut parts = Vec::new();
    let mut it = set.iter().copied().peekable();
    while let Some(lo) = it.next() {
        let mut hi = lo;
        while it.peek() == Some(&(hi + 1)) {
            hi += 1;
            it.next();
        }
        parts.push(if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        });
    }
    if parts.is_empty() {
        "(none)".into()
    } else {
        parts.join(",")
    }
}

/// How many numbers a list holds (`None` if it does not parse).
pub fn count(s: &str) -> Option<usize> {
    parse(s).ok().map(|set| set.len())
}

/// Reads and parses a sysfs list file; errors name the file.
pub fn read(path: &str) -> Result<CpuSet, String> {
    let s = std::fs::read_to_string(path).map_err(|e| format!("read {path}: {e}"))?;
    parse(&s).map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip() {
        let table: &[(&str, &[u32], &str)] = &[
            ("0-1,4", &[0, 1, 4], "0-1,4"),
            ("3", &[3], "3"),
            ("0\n", &[0], "0"),
            ("0-3\n", &[0, 1, 2, 3], "0-3"),
            ("0-3,8,10-11", &[0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
            ("0-2,5,7-8\n", &[0, 1, 2, 5, 7, 8], "0-2,5,7-8"),
            ("", &[], "(none)"),
            ("\n", &[], "(none)"),
            ("  \n", &[], "(none)"),
            (" 0-1 , 4 \n", &[0, 1, 4], "0-1,4"),
            ("5,0-1,2", &[0, 1, 2, 5], "0-2,5"),
        ];
        for (input, cpus, formatted) in table {
            let s = parse(input).unwrap();
            assert_eq!(s.iter().copied().collect::<Vec<_>>(), *cpus, "{input:?}");
            assert_eq!(format(&s), *formatted);
            assert_eq!(count(input), Some(cpus.len()), "{input:?}");
        }
    }

    #[test]
    fn bad_lists() {
        for bad in ["0-", "3-1", "x", "0,,1", "0-4294967295"] {
            assert!(parse(bad).is_err(), "{bad:?}");
            assert_eq!(count(bad), None, "{bad:?}");
        }
        assert_eq!(
            parse("3-1").unwrap_err(),
            "bad cpu list \"3-1\": range \"3-1\" runs backwards"
        );
    }

    #[test]
    fn read_names_the_file() {
        let e = read("/nonexistent/cpulist").unwrap_err();
        assert!(e.starts_with("read /nonexistent/cpulist: "), "{e}");
    }
}
