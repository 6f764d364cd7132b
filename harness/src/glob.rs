//! Shell-style globs over case, cell and kernel names (`globset`): `*`
//! any run of characters (including `/`), `?` one character.

use globset::GlobMatcher;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Whether `name` matches `pattern`. `[...]` and `{a,b}` work as in
/// globset; a pattern globset cannot parse (an unclosed `[`) matches only
/// itself.
pub fn matches(pattern: &str, name: &str) -> bool {
    // Compiling a glob costs far more than matching it, and the planner
    // matches the same few patterns against thousands of names (every
    // case of every cell against every known-failure entry): each pattern
    // is compiled once per process.
    static COMPILED: LazyLock<Mutex<HashMap<String, Option<GlobMatcher>>>> =
        LazyLock::new(Default::default);
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    let matcher = compiled
        .entry(pattern.to_string())
        .or_insert_with(|| glob(pattern).ok().map(|g| g.compile_matcher()));
    match matcher {
        Some(m) => m.is_match(name),
        None => pattern == name,
    }
}

/// Why `pattern` is not a glob globset can parse (an unclosed `[`), if it
/// is not; for validating globs users write into files.
pub fn check(pattern: &str) -> Result<(), String> {
    glob(pattern).map(|_| ()).map_err(|e| e.kind().to_string())
}

/// `pattern` as our globs read it: `*` crosses `/`, `\` escapes.
fn glob(pattern: &str) -> Result<globset::Glob, globset::Error> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
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
