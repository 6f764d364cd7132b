//! What the kernel under test is expected to support (from `matrix.yaml`),
//! passed to test binaries as `--expect key=value,...`.
//!
//! A test that finds a feature missing where it is expected FAILS; where the
//! expectation says it is absent, the test checks the absent behaviour
//! (e.g. EINVAL) instead of skipping. See `futex-abi.md` section 4.

/// Which clones trigger automatic private-hash allocation/growth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// No automatic allocation (no private hash).
    None,
    /// 6.17: `CLONE_THREAD & CLONE_VM`.
    Thread,
    /// 7.1, late 6.18.y / 7.0.y: `CLONE_VM & !CLONE_VFORK`.
    VmNotVfork,
    /// 7.2.8+, 7.3: any `CLONE_VM` (vfork and posix_spawn allocate too).
    AnyVm,
}

impl Growth {
    fn name(self) -> &'static str {
        match self {
            Growth::None => "none",
            Growth::Thread => "thread",
            Growth::VmNotVfork => "vm-not-vfork",
            Growth::AnyVm => "any-vm",
        }
    }
}

/// Expected kernel features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// `prctl(PR_FUTEX_HASH)` is known (6.16+); else every call is EINVAL.
    pub prctl: bool,
    /// The private hash works (SET succeeds): 6.17+ with CONFIG_FUTEX_PRIVATE_HASH.
    pub private_hash: bool,
    /// `FH_FLAG_IMMUTABLE` / `PR_FUTEX_HASH_GET_IMMUTABLE` work (patched kernels only).
    pub immutable: bool,
    /// FUTEX2_NUMA accepted.
    pub numa: bool,
    /// FUTEX2_MPOL honoured (CONFIG_FUTEX_MPOL).
    pub mpol: bool,
    /// Automatic sizing trigger.
    pub growth: Growth,
}

impl Expect {
    /// Encodes as `key=value,...` (the inverse of [`Expect::parse`]).
    pub fn encode(&self) -> String {
        let b = |v: bool| if v { "1" } else { "0" };
        format!(
            "prctl={},private_hash={},immutable={},numa={},mpol={},growth={}",
            b(self.prctl),
            b(self.private_hash),
            b(self.immutable),
            b(self.numa),
            b(self.mpol),
            self.growth.name()
        )
    }

    /// Parses `key=value,...`; keys not given keep the value of the
    /// running kernel's defaults ([`Expect::for_running_kernel`]).
    pub fn parse(s: &str) -> Result<Expect, String> {
        let mut e = Expect::for_running_kernel();
        for kv in s.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("{kv:?}: expected key=value"))?;
            let flag = || match v {
                "1" | "yes" | "true" => Ok(true),
                "0" | "no" | "false" => Ok(false),
                _ => Err(format!("{k}={v:?}: expected 1/0, yes/no or true/false")),
            };
            match k {
                "prctl" => e.prctl = flag()?,
                "private_hash" => e.private_hash = flag()?,
                "immutable" => e.immutable = flag()?,
                "numa" => e.numa = flag()?,
                "mpol" => e.mpol = flag()?,
                "growth" => {
                    e.growth = match v {
                        "none" => Growth::None,
                        "thread" => Growth::Thread,
                        "vm-not-vfork" => Growth::VmNotVfork,
                        "any-vm" => Growth::AnyVm,
                        _ => {
                            return Err(format!(
                                "growth={v:?}: expected none, thread, vm-not-vfork or any-vm"
                            ))
                        }
                    }
                }
                _ => return Err(format!(
                    "unknown key {k:?}; known: prctl, private_hash, immutable, numa, mpol, growth"
                )),
            }
        }
        Ok(e)
    }

    /// Defaults from the version table for a kernel release string
    /// (`uname -r`), for running a binary by hand without `--expect`.
    pub fn for_release(release: &str) -> Expect {
        let mut nums = release
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().unwrap_or(0));
        let v = (
            nums.next().unwrap_or(0),
            nums.next().unwrap_or(0),
            nums.next().unwrap_or(0),
        );
        let at_least = |a: u32, b: u32| (v.0, v.1) >= (a, b);
        Expect {
            prctl: at_least(6, 16),
            private_hash: at_least(6, 17),
            immutable: false,
            numa: at_least(6, 16),
            mpol: at_least(6, 16),
            growth: if (v.0, v.1) >= (7, 3) || ((v.0, v.1) == (7, 2) && v.2 >= 8) {
                Growth::AnyVm
            } else if at_least(7, 1) {
                Growth::VmNotVfork
            } else if at_least(6, 17) {
                // Late 6.18.y / 7.0.y backported VmNotVfork; the matrix says which.
                Growth::Thread
            } else {
                Growth::None
            },
        }
    }

    /// [`Expect::for_release`] of the running kernel.
    pub fn for_running_kernel() -> Expect {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Expect::for_release(release.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_table() {
        let e = Expect::for_release("6.16.12+deb13-cloud-amd64");
        assert!(e.prctl && !e.private_hash && e.numa);
        assert_eq!(Expect::for_release("7.3.4+deb13").growth, Growth::AnyVm);
        assert_eq!(Expect::for_release("7.2.8").growth, Growth::AnyVm);
        assert_eq!(Expect::for_release("7.2.6").growth, Growth::VmNotVfork);
        assert_eq!(Expect::for_release("6.17.8").growth, Growth::Thread);
        assert!(!Expect::for_release("6.12.1").prctl);
    }

    #[test]
    fn parse_round_trips_and_rejects_junk() {
        let e = Expect::for_release("7.3.4");
        assert_eq!(Expect::parse(&e.encode()).unwrap(), e);
        assert!(Expect::parse("numa=maybe").unwrap_err().contains("numa"));
        assert!(Expect::parse("bogus=1")
            .unwrap_err()
            .contains("unknown key"));
        assert!(Expect::parse("growth=sometimes").is_err());
    }
}
