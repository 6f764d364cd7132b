//! Shell-style globs over case, cell and kernel names (`globset`): `*`
//! any run of characters (including `/`), `?` one character.

/// Whether `name` matches `pattern`. `[...]` and `{a,b}` work as in
/// globset; a pattern globset cannot parse (an unclosed `[`) matches only
/// itself.
pub fn matches(pattern: &str, name: &str) -> bool {
    match globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
    {
        Ok(g) => g.compile_matcher().is_match(name),
        Err(_) => pattern == name,
    }
}

/// Why `pattern` is not a glob globset can parse (an unclosed `[`), if it
/// is not; for validating globs users write into files.
pub fn check(pattern: &str) -> Result<(), String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|_| ())
        .map_err(|e| e.kind().to_string())
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
            ("futex-{numa,mpol}/*", "futex-mpol/x", true),
            ("[unclosed", "[unclosed", true),
            ("[unclosed", "u", false),
        ] {
            assert_eq!(super::matches(p, n), want, "{p} vs {n}");
        }
        assert!(super::check("*racing SET 0: * (os error 16)").is_ok());
        assert!(super::check("[unclosed").unwrap_err().contains("unclosed"));
    }
}
