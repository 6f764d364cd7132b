//! Shell-style globs over names: `*` any run of characters (including
//! `/`), `?` one character, everything else literal.

/// Whether `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether `name` matches any of `patterns` (each may be a comma-separated
/// list); an empty list matches everything.
pub fn any(patterns: &[String], name: &str) -> bool {
    patterns.is_empty()
        || patterns
            .iter()
            .flat_map(|p| p.split(','))
            .any(|p| matches(p.trim(), name))
}

#[cfg(test)]
mod tests {
    #[test]
    fn globs() {
        for (p, n, want) in [
            ("*", "", true),
            ("debian-7.*", "debian-7.3", true),
            ("debian-7.*", "debian-6.18", false),
            ("?n*", "2n-2c", true),
            ("futex-numa/*", "futex-numa/wake", true),
            ("*wake*", "smoke/futex-wait-wake", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("exact", "exact", true),
        ] {
            assert_eq!(super::matches(p, n), want, "{p} vs {n}");
        }
    }
}
