//! Parsers for apt's formats: source lists (one-line and deb822), the
//! `InRelease` file of a suite, `Packages` stanzas, and dpkg version
//! comparison. No I/O beyond reading local files; no network: the archive
//! client around it ([`super::DebianMirror`]) does the fetching.

use std::cmp::Ordering;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// One active `deb` source entry (one URI; suites and components as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    /// The repository URI, without trailing slash.
    pub uri: String,
    /// Suites (`bookworm`, `bookworm-updates`, ...).
    pub suites: Vec<String>,
    /// Components (`main`, ...).
    pub components: Vec<String>,
    /// The `Signed-By` / `signed-by=` value, if any (a path or an inline key).
    pub signed_by: Option<String>,
    /// The file this entry came from.
    pub file: PathBuf,
}

impl AptSource {
    fn path_last_segment(&self) -> &str {
        let after_scheme = self.uri.split_once("://").map_or("", |(_, r)| r);
        let path = after_scheme.split_once('/').map_or("", |(_, p)| p);
        path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
    }

    fn is_http(&self) -> bool {
        self.uri.starts_with("http://") || self.uri.starts_with("https://")
    }

    /// How well this entry looks like Debian's main archive: 2 if its URI path
    /// ends in `/debian`, 1 if it is signed by a Debian archive keyring and
    /// its path is not one of the side archives (`debian-security`,
    /// `debian-debug`, ...), 0 if it is not the main archive.
    pub fn main_archive_score(&self) -> u8 {
        if !self.is_http() {
            return 0;
        }
        if self.suites.iter().all(|s| s.ends_with("-security")) && !self.suites.is_empty() {
            return 0;
        }
        let last = self.path_last_segment();
        if last == "debian" {
            return 2;
        }
        if last.starts_with("debian-") || last.contains("security") {
            return 0;
        }
        let debian_key = self
            .signed_by
            .as_deref()
            .is_some_and(|k| k.contains("debian-archive-") && k.ends_with(".gpg"));
        u8::from(debian_key)
    }
}

/// The apt configuration files to read under `root` (normally `/`):
/// `etc/apt/sources.list`, then `etc/apt/sources.list.d/*.list` and
/// `*.sources` in name order (files with other suffixes are ignored by apt
/// and so here too).
pub fn apt_source_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("etc/apt/sources.list")];
    let dir = root.join("etc/apt/sources.list.d");
    let mut more: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources"))
        .collect();
    more.sort();
    files.extend(more);
    files
}

/// Reads the active `deb` entries of one apt sources file, choosing the
/// parser by suffix (`.sources` = deb822, otherwise one-line).
/// A missing or unreadable file yields no entries.
pub fn read_sources_file(path: &Path) -> Vec<AptSource> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    if path.extension().is_some_and(|e| e == "sources") {
        parse_deb822_sources(&text, path)
    } else {
        parse_one_line_sources(&text, path)
    }
}

/// Parses the one-line format: `deb [opt=val ...] URI suite [component...]`.
/// Comments (`#` to end of line), `deb-src` lines and malformed lines are
/// skipped.
pub fn parse_one_line_sources(text: &str, file: &Path) -> Vec<AptSource> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = line.strip_prefix("deb") else {
            continue;
        };
        if !rest.starts_with([' ', '\t']) {
            continue; // deb-src, or garbage
        }
        let mut rest = rest.trim_start();
        let mut signed_by = None;
        if let Some(r) = rest.strip_prefix('[') {
            let Some((opts, after)) = r.split_once(']') else {
                continue;
            };
            for opt in opts.split_whitespace() {
                if let Some(v) = opt.strip_prefix("signed-by=") {
                    signed_by = Some(v.to_string());
                }
            }
            rest = after.trim_start();
        }
        let mut words = rest.split_whitespace();
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            continue;
        };
        out.push(AptSource {
            uri: uri.trim_end_matches('/').to_string(),
            suites: vec![suite.to_string()],
            components: words.map(str::to_string).collect(),
            signed_by,
            file: file.to_path_buf(),
        });
    }
    out
}

/// Parses deb822 `.sources` text. Stanzas with `Enabled: no` or without
/// `deb` in `Types` are skipped; a stanza with several URIs yields one entry
/// per URI. Comment lines (`#`) are ignored, continuation lines folded.
pub fn parse_deb822_sources(text: &str, file: &Path) -> Vec<AptSource> {
    let without_comments: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut out = Vec::new();
    for stanza in parse_stanzas(&without_comments) {
        let get = |k: &str| stanza.get(k).map(str::trim);
        let words = |k: &str| -> Vec<String> {
            get(k)
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        if get("Enabled").is_some_and(|v| v.eq_ignore_ascii_case("no")) {
            continue;
        }
        if !words("Types").iter().any(|t| t == "deb") {
            continue;
        }
        let signed_by = get("Signed-By").map(str::to_string);
        for uri in words("URIs") {
            out.push(AptSource {
                uri: uri.trim_end_matches('/').to_string(),
                suites: words("Suites"),
                components: words("Components"),
                signed_by: signed_by.clone(),
                file: file.to_path_buf(),
            });
        }
    }
    out
}

/// Picks the URI of Debian's main archive among `sources`: the first entry
/// with the best [`AptSource::main_archive_score`] above zero.
pub fn pick_debian_mirror(sources: &[AptSource]) -> Option<&AptSource> {
    let best = sources.iter().map(AptSource::main_archive_score).max()?;
    (best > 0).then(|| {
        sources
            .iter()
            .find(|s| s.main_archive_score() == best)
            .expect("max exists")
    })
}

/// One RFC822-style stanza: field names are matched case-insensitively.
#[derive(Debug, Clone, Default)]
pub struct Stanza {
    fields: Vec<(String, String)>,
}

impl Stanza {
    /// The value of field `name` (case-insensitive); continuation lines are
    /// joined with `\n`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn push_line(&mut self, line: &str) {
        if line.starts_with([' ', '\t']) {
            if let Some((_, v)) = self.fields.last_mut() {
                v.push('\n');
                v.push_str(line.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            self.fields
                .push((k.trim().to_string(), v.trim().to_string()));
        }
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// Splits RFC822-style text into stanzas (blank-line separated).
pub fn parse_stanzas(text: &str) -> Vec<Stanza> {
    let mut out = Vec::new();
    let mut cur = Stanza::default();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push_line(line);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Extracts the signed text of a clearsigned message (undoing dash
/// escaping). Text outside the signed part is never returned. A message that
/// is not clearsigned is returned as is.
pub fn clearsigned_body(text: &str) -> &str {
    const BEGIN: &str = "-----BEGIN PGP SIGNED MESSAGE-----";
    const SIG: &str = "\n-----BEGIN PGP SIGNATURE-----";
    let Some(start) = text.find(BEGIN) else {
        return text;
    };
    let after = &text[start + BEGIN.len()..];
    // Armor headers ("Hash: SHA512") end at the first empty line.
    let body_start = after.find("\n\n").map_or(after.len(), |i| i + 2);
    let body = &after[body_start..];
    match body.find(SIG) {
        Some(end) => &body[..end + 1],
        None => body,
    }
}

/// One entry of an InRelease checksum list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFile {
    /// Path relative to `dists/<suite>/` (`main/binary-amd64/Packages.xz`).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Lower-case hex SHA-256.
    pub sha256: String,
}

/// Parses the `SHA256:` list of an InRelease (or Release) file. Only the
/// signed part of a clearsigned file is read.
pub fn parse_release_sha256(text: &str) -> Vec<IndexFile> {
    let body = clearsigned_body(text);
    let mut out = Vec::new();
    let mut in_sha = false;
    for line in body.lines() {
        let line = line.strip_prefix("- ").unwrap_or(line);
        if !line.starts_with([' ', '\t']) {
            in_sha = line.trim_end() == "SHA256:";
            continue;
        }
        if !in_sha {
            continue;
        }
        let mut w = line.split_whitespace();
        if let (Some(h), Some(s), Some(p), None) = (w.next(), w.next(), w.next(), w.next()) {
            if let Ok(size) = s.parse() {
                if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    out.push(IndexFile {
                        path: p.to_string(),
                        size,
                        sha256: h.to_ascii_lowercase(),
                    });
                }
            }
        }
    }
    out
}

/// The fields of a `Packages` stanza this crate uses.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PackageEntry {
    /// `Package:`
    pub package: String,
    /// `Version:` (Debian version, e.g. `7.3.4-1~bpo13+1`).
    pub version: String,
    /// `Filename:`, relative to the mirror root.
    pub filename: String,
    /// `Size:` in bytes.
    pub size: u64,
    /// `SHA256:` of the `.deb`.
    pub sha256: String,
}

/// Streams a `Packages` file and keeps the stanzas whose package name
/// satisfies `keep`. Only the five fields of [`PackageEntry`] are kept, so
/// memory stays proportional to the kept stanzas. Stanzas lacking a field are
/// skipped.
pub fn scan_packages(
    reader: impl BufRead,
    keep: impl Fn(&str) -> bool,
) -> std::io::Result<Vec<PackageEntry>> {
    #[derive(Default)]
    struct Cur {
        package: Option<String>,
        version: Option<String>,
        filename: Option<String>,
        size: Option<u64>,
        sha256: Option<String>,
        skip: bool,
    }
    fn finish(cur: Cur, out: &mut Vec<PackageEntry>) {
        if cur.skip {
            return;
        }
        if let (Some(package), Some(version), Some(filename), Some(size), Some(sha256)) =
            (cur.package, cur.version, cur.filename, cur.size, cur.sha256)
        {
            out.push(PackageEntry {
                package,
                version,
                filename,
                size,
                sha256: sha256.to_ascii_lowercase(),
            });
        }
    }
    let mut out = Vec::new();
    let mut cur = Cur::default();
    let mut reader = reader;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end_matches(['\n', '\r']);
        if l.is_empty() {
            finish(std::mem::take(&mut cur), &mut out);
            continue;
        }
        if cur.skip || l.starts_with([' ', '\t']) {
            continue;
        }
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k {
            "Package" => {
                cur.skip = !keep(v);
                cur.package = Some(v.to_string());
            }
            "Version" => cur.version = Some(v.to_string()),
            "Filename" => cur.filename = Some(v.to_string()),
            "Size" => cur.size = v.parse().ok(),
            "SHA256" => cur.sha256 = Some(v.to_string()),
            _ => {}
        }
    }
    finish(cur, &mut out);
    Ok(out)
}

/// Compares two Debian version strings the way dpkg does
/// (`[epoch:]upstream[-revision]`, `~` sorts before everything).
pub fn dpkg_version_cmp(a: &str, b: &str) -> Ordering {
    fn split(v: &str) -> (u64, &str, &str) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, r)) if e.bytes().all(|c| c.is_ascii_digit()) => (e.parse().unwrap_or(0), r),
            _ => (0, v),
        };
        match rest.rsplit_once('-') {
            Some((u, r)) => (epoch, u, r),
            None => (epoch, rest, ""),
        }
    }
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb)
        .then_with(|| verrevcmp(ua, ub))
        .then_with(|| verrevcmp(ra, rb))
}

fn order(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(b'~') => -1,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

fn verrevcmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let mut first_diff = 0;
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let ac = order(a.get(i).copied());
            let bc = order(b.get(j).copied());
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        while i < a.len() && a[i] == b'0' {
            i += 1;
        }
        while j < b.len() && b[j] == b'0' {
            j += 1;
        }
        while i < a.len() && a[i].is_ascii_digit() && j < b.len() && b[j].is_ascii_digit() {
            if first_diff == 0 {
                first_diff = i32::from(a[i]) - i32::from(b[j]);
            }
            i += 1;
            j += 1;
        }
        if i < a.len() && a[i].is_ascii_digit() {
            return Ordering::Greater;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            return Ordering::Less;
        }
        if first_diff != 0 {
            return first_diff.cmp(&0);
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::super::testmirror::fixture;
    use super::*;

    #[test]
    fn deb822_sources() {
        let p = fixture("aptroot/etc/apt/sources.list.d/debian.sources");
        let s = read_sources_file(&p);
        let uris: Vec<_> = s.iter().map(|s| s.uri.as_str()).collect();
        // The disabled stanza and the deb-src-only stanza are skipped; the
        // commented-out URIs line is not read.
        assert_eq!(
            uris,
            [
                "http://mirror.example/debian",
                "http://mirror.example/debian-security"
            ]
        );
        assert_eq!(s[0].suites, ["bookworm", "bookworm-updates"]);
        assert_eq!(s[0].components, ["main"]);
        assert_eq!(
            s[0].signed_by.as_deref(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg")
        );
        assert_eq!(s[0].main_archive_score(), 2);
        assert_eq!(s[1].main_archive_score(), 0);
    }

    #[test]
    fn one_line_sources() {
        let text = "\
# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/nodesource.gpg] https://thirdparty.example/node_20.x nodistro main
deb-src http://src.example/debian bookworm main
deb http://one.example/debian/ bookworm main contrib # trailing comment
deb http://one.example/debian-security bookworm-security main
debx http://bad.example/debian bookworm main
deb http://incomplete.example/debian
";
        let s = parse_one_line_sources(text, Path::new("x.list"));
        let uris: Vec<_> = s.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "https://thirdparty.example/node_20.x",
                "http://one.example/debian",
                "http://one.example/debian-security"
            ]
        );
        assert_eq!(
            s[0].signed_by.as_deref(),
            Some("/usr/share/keyrings/nodesource.gpg")
        );
        assert_eq!(s[1].components, ["main", "contrib"]);
        let scores: Vec<_> = s.iter().map(AptSource::main_archive_score).collect();
        assert_eq!(scores, [0, 2, 0]);
        assert_eq!(
            pick_debian_mirror(&s).unwrap().uri,
            "http://one.example/debian"
        );
    }

    #[test]
    fn keyring_only_match_and_priority() {
        let text = "\
Types: deb
URIs: https://proxy.example/apt/deb-main
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: https://proxy.example/apt/debian-debug
Suites: trixie-debug
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";
        let s = parse_deb822_sources(text, Path::new("x.sources"));
        assert_eq!(s[0].main_archive_score(), 1);
        assert_eq!(s[1].main_archive_score(), 0);
        assert_eq!(
            pick_debian_mirror(&s).unwrap().uri,
            "https://proxy.example/apt/deb-main"
        );
        assert!(pick_debian_mirror(&s[1..]).is_none());
    }

    #[test]
    fn apt_root_files_and_pick() {
        let root = fixture("aptroot");
        let files = apt_source_files(&root);
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        // `.disabled-by-x` files are not apt sources.
        assert_eq!(names, ["sources.list", "debian.sources", "thirdparty.list"]);
        let all: Vec<_> = files.iter().flat_map(|f| read_sources_file(f)).collect();
        let m = pick_debian_mirror(&all).unwrap();
        assert_eq!(m.uri, "http://mirror.example/debian");
        assert!(m.file.ends_with("debian.sources"));
    }

    #[test]
    fn inrelease_sha256() {
        let text = std::fs::read_to_string(fixture("InRelease")).unwrap();
        let files = parse_release_sha256(&text);
        let xz = files
            .iter()
            .find(|f| f.path == "main/binary-amd64/Packages.xz")
            .unwrap();
        assert_eq!(
            xz.sha256,
            "6b1cc58f3b22954946a3f3a1561592fd87cdc3ddb9271640f4dd2758a8b072f5"
        );
        assert_eq!(xz.size, 318368);
        // MD5Sum lines (32 hex digits) are not taken for SHA256.
        assert!(files.iter().all(|f| f.sha256.len() == 64));
        assert_eq!(files.len(), 3);
        // Nothing after the signature block is read.
        assert!(files.iter().all(|f| !f.path.contains("unsigned")));
    }

    #[test]
    fn stanzas_and_scan() {
        let text = std::fs::read_to_string(fixture("Packages")).unwrap();
        let kept = scan_packages(text.as_bytes(), |p| p.starts_with("linux-binary-")).unwrap();
        assert_eq!(kept.len(), 4);
        let k = kept
            .iter()
            .find(|e| e.package == "linux-binary-7.3.4+deb13-cloud-amd64")
            .unwrap();
        assert_eq!(k.version, "7.3.4-1~bpo13+1");
        assert!(k.filename.contains('~'));
        assert_eq!(k.size, 13604064);
        let all = scan_packages(text.as_bytes(), |_| true).unwrap();
        assert_eq!(all.len(), parse_stanzas(&text).len() - 1); // one lacks SHA256
    }

    #[test]
    fn dpkg_versions() {
        use Ordering::*;
        let cases = [
            ("7.0.10-1", "7.0.9-1", Greater),
            ("7.3.4-1~bpo13+1", "7.3.4-1", Less),
            ("1:1.0", "2.0", Greater),
            ("6.12.90+deb12.1", "6.12.90+deb12", Greater),
            ("1.0~rc1", "1.0", Less),
            ("1.0a", "1.0", Greater),
            ("1.0", "1.0", Equal),
            ("1.01", "1.1", Equal),
        ];
        for (a, b, want) in cases {
            assert_eq!(dpkg_version_cmp(a, b), want, "{a} vs {b}");
            assert_eq!(dpkg_version_cmp(b, a), want.reverse(), "{b} vs {a}");
        }
    }
}
