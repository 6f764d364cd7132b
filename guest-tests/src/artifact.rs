//! What the `artifact` guest binary and the host agree on: the
//! deterministic byte stream it writes (so the host checks a 64 MiB file
//! without the guest sending a checksum of its own), FNV-1a 64, and the
//! `HARNESS_SHARES` environment variable.

/// Environment variable holding the artifacts share's guest path.
pub const ARTIFACTS_ENV: &str = "HARNESS_ARTIFACTS";
/// Environment variable listing the mounted shares: `PATH:ro,PATH:rw`.
pub const SHARES_ENV: &str = "HARNESS_SHARES";

/// xorshift64* bytes from a fixed seed.
#[derive(Debug, Clone)]
pub struct Stream {
    state: u64,
    word: u64,
    left: u8,
}

/// The stream every `artifact write` produces.
pub fn stream() -> Stream {
    Stream {
        state: 0x9E37_79B9_7F4A_7C15,
        word: 0,
        left: 0,
    }
}

impl Stream {
    /// The next byte.
    pub fn next_byte(&mut self) -> u8 {
        if self.left == 0 {
            let mut x = self.state;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.state = x;
            self.word = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
            self.left = 8;
        }
        let b = self.word as u8;
        self.word >>= 8;
        self.left -= 1;
        b
    }

    /// Fills `buf`.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next_byte();
        }
    }
}

/// FNV-1a, 64 bits.
#[derive(Debug, Clone)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv1a {
    /// The offset basis.
    pub fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// The hash.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// `[(guest path, read-only)]` -> `PATH:ro,PATH:rw`.
pub fn encode_shares(shares: &[(String, bool)]) -> String {
    shares
        .iter()
        .map(|(p, ro)| format!("{p}:{}", if *ro { "ro" } else { "rw" }))
        .collect::<Vec<_>>()
        .join(",")
}

/// The inverse of [`encode_shares`]; malformed items are skipped.
pub fn parse_shares(s: &str) -> Vec<(String, bool)> {
    s.split(',')
        .filter_map(|item| {
            let (p, mode) = item.rsplit_once(':')?;
            (p.starts_with('/') && (mode == "ro" || mode == "rw"))
                .then(|| (p.to_string(), mode == "ro"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_fixed() {
        let mut s = stream();
        let mut a = [0u8; 16];
        s.fill(&mut a);
        let mut t = stream();
        let b: Vec<u8> = (0..16).map(|_| t.next_byte()).collect();
        assert_eq!(&a[..], &b[..]);
        assert_ne!(a[..8], a[8..]);
        let mut h = Fnv1a::new();
        h.update(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn shares_env_round_trips() {
        let v = vec![
            ("/mnt/a".to_string(), true),
            ("/harness/artifacts".to_string(), false),
        ];
        let s = encode_shares(&v);
        assert_eq!(s, "/mnt/a:ro,/harness/artifacts:rw");
        assert_eq!(parse_shares(&s), v);
        assert!(parse_shares("").is_empty());
        assert_eq!(
            parse_shares("x:ro,/y:zz,/z:rw"),
            vec![("/z".to_string(), false)]
        );
    }
}
