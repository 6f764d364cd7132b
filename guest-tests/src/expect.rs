//! What the kernel under test is expected to support (from `matrix.yaml`),
//! passed to test binaries as `--expect key=value,...`.
//!
//! A test that finds a feature missing where it is expected FAILS; where the
//! expectation says it is absent, the test checks the absent behaviour
//! (e.g. EINVAL) instead of skipping. See `docs/futex-abi.md` section 4.
//!
//! `version=` names the kernel version whose row (or pinned features) the
//! expectations describe; `futex-prctl/kernel-version-matches` checks the
//! booted kernel against it ([`release_matches`]).

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
    /// Every trigger, in kernel order.
    pub const ALL: [Growth; 4] = [
        Growth::None,
        Growth::Thread,
        Growth::VmNotVfork,
        Growth::AnyVm,
    ];

    /// The name `--expect growth=` and `matrix.yaml` use.
    pub fn name(self) -> &'static str {
        match self {
            Growth::None => "none",
            Growth::Thread => "thread",
            Growth::VmNotVfork => "vm-not-vfork",
            Growth::AnyVm => "any-vm",
        }
    }
}

/// An expected feature without the feature it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contradiction {
    /// The key expected on (`immutable`).
    pub key: &'static str,
    /// The key it needs, expected off (`private_hash`).
    pub needs: &'static str,
    /// Why no kernel has the one without the other.
    pub why: &'static str,
}

impl std::fmt::Display for Contradiction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} expected without {}: {} (set {}=0 too, or {}=1)",
            self.key, self.needs, self.why, self.key, self.needs
        )
    }
}

/// The keys of `--expect` ([`Expect::set`]); `growth` takes a
/// [`Growth`] name, `version` a kernel version (7.3.4, 7.3), the others
/// 1/0 (yes/no, true/false).
pub const KEYS: &[&str] = &[
    "prctl",
    "private_hash",
    "immutable",
    "numa",
    "mpol",
    "growth",
    "requeue_same_flags",
    "robust_pending_owned",
    "version",
];

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
    /// futex_requeue rejects entries whose flags differ (EINVAL): "futex:
    /// Require sys_futex_requeue() to have identical flags" (19f94b390586,
    /// 7.0, backported to stable). Without it a mismatched pair is accepted.
    pub requeue_same_flags: bool,
    /// A thread that exits with a robust futex as `list_op_pending` whose
    /// word another task owns without FUTEX_WAITERS wakes one waiter
    /// (`handle_futex_death()`: `!owner || !(uval & FUTEX_WAITERS)`, with
    /// FUTEX_ROBUST_UNLOCK in 7.3; before, `!owner` alone). Measured: yes
    /// on 7.3.4, no on 6.16.12, 6.18.15, 6.18.44 and 7.0.13.
    pub robust_pending_owned: bool,
    /// The kernel version these expectations were written for (the row
    /// they come from, `7.3.4` or `7.3`); `None` when nobody said (a
    /// binary run by hand). Not a feature: nothing is derived from it.
    pub version: Option<String>,
}

impl Expect {
    /// Encodes as `key=value,...` (the inverse of [`Expect::parse`]);
    /// `version=` last, and only when known.
    pub fn encode(&self) -> String {
        let b = |v: bool| if v { "1" } else { "0" };
        let mut s = format!(
            "prctl={},private_hash={},immutable={},numa={},mpol={},growth={},requeue_same_flags={},robust_pending_owned={}",
            b(self.prctl),
            b(self.private_hash),
            b(self.immutable),
            b(self.numa),
            b(self.mpol),
            self.growth.name(),
            b(self.requeue_same_flags),
            b(self.robust_pending_owned)
        );
        if let Some(v) = &self.version {
            s.push_str(",version=");
            s.push_str(v);
        }
        s
    }

    /// Parses `key=value,...`; keys not given keep the value of the
    /// running kernel's defaults ([`Expect::for_running_kernel`]), and
    /// `version` stays unknown.
    pub fn parse(s: &str) -> Result<Expect, String> {
        let mut e = Expect::for_running_kernel();
        e.apply(s)?;
        Ok(e)
    }

    /// Applies `key=value,...` over `self`, left to right, later keys
    /// winning. Switching a feature off switches off what needs it
    /// (`prctl=0` -> no private hash; `private_hash=0` -> not immutable, no
    /// growth; `numa=0` -> no MPOL), so `--expect private_hash=0` over a 6.18 row means what it
    /// says; a later key that turns a dependent back on contradicts it and
    /// is an error ([`Expect::contradiction`]).
    pub fn apply(&mut self, s: &str) -> Result<(), String> {
        for kv in s.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("{kv:?}: expected key=value"))?;
            self.set(k, v)?;
        }
        match self.contradiction() {
            Some(c) => Err(c.to_string()),
            None => Ok(()),
        }
    }

    /// Sets one key (see [`Expect::apply`] for the cascade).
    pub fn set(&mut self, k: &str, v: &str) -> Result<(), String> {
        let flag = || match v {
            "1" | "yes" | "true" => Ok(true),
            "0" | "no" | "false" => Ok(false),
            _ => Err(format!("{k}={v:?}: expected 1/0, yes/no or true/false")),
        };
        match k {
            "prctl" => {
                self.prctl = flag()?;
                if !self.prctl {
                    self.set("private_hash", "0")?;
                }
            }
            "private_hash" => {
                self.private_hash = flag()?;
                if !self.private_hash {
                    self.immutable = false;
                    self.growth = Growth::None;
                }
            }
            "immutable" => self.immutable = flag()?,
            "numa" => {
                self.numa = flag()?;
                if !self.numa {
                    self.mpol = false;
                }
            }
            "mpol" => self.mpol = flag()?,
            "version" => {
                let ok = v.starts_with(|c: char| c.is_ascii_digit())
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".+~_-".contains(c));
                if !ok {
                    return Err(format!(
                        "version={v:?}: expected a kernel version such as 7.3.4 or 7.3"
                    ));
                }
                self.version = Some(v.to_string());
            }
            "requeue_same_flags" => self.requeue_same_flags = flag()?,
            "robust_pending_owned" => self.robust_pending_owned = flag()?,
            "growth" => {
                self.growth = Growth::ALL
                    .into_iter()
                    .find(|g| g.name() == v)
                    .ok_or_else(|| {
                        format!("growth={v:?}: expected none, thread, vm-not-vfork or any-vm")
                    })?
            }
            _ => return Err(format!("unknown key {k:?}; known: {}", KEYS.join(", "))),
        }
        Ok(())
    }

    /// A combination no kernel can have: a feature expected without the
    /// one it is built on (the private hash is reached through the prctl;
    /// immutability and automatic growth are properties of the private
    /// hash; FUTEX2_MPOL came with FUTEX2_NUMA). Tests of such an
    /// expectation could only fail or, worse, check one half and pass.
    pub fn contradiction(&self) -> Option<Contradiction> {
        let same = "no kernel has one without the other";
        let c = |key, needs, why| Some(Contradiction { key, needs, why });
        if self.private_hash && !self.prctl {
            c("private_hash", "prctl", same)
        } else if self.immutable && !self.private_hash {
            c("immutable", "private_hash", same)
        } else if self.growth != Growth::None && !self.private_hash {
            c("growth", "private_hash", same)
        } else if self.mpol && !self.numa {
            c(
                "mpol",
                "numa",
                "FUTEX2_MPOL needs FUTEX2_NUMA: both came in 6.16, and a kernel that refuses FUTEX2_NUMA (EINVAL) refuses FUTEX2_MPOL too",
            )
        } else {
            None
        }
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
        // Where in 6.18.y the backports landed is not known exactly: 6.18.15
        // (Debian) has neither, 6.18.44 has both. The matrix pins each kernel.
        let late_6_18 = (v.0, v.1) == (6, 18) && v.2 > 15;
        Expect {
            prctl: at_least(6, 16),
            private_hash: at_least(6, 17),
            immutable: false,
            numa: at_least(6, 16),
            mpol: at_least(6, 16),
            // Measured: Debian 6.16.12, 6.17.13, 6.18.15 lack the fix;
            // 7.0.13, 7.3.4 and 6.18.44 have it.
            requeue_same_flags: at_least(7, 0) || late_6_18,
            // 7.1 and 7.2 not measured: the FUTEX_ROBUST_UNLOCK release.
            robust_pending_owned: at_least(7, 3),
            growth: if (v.0, v.1) >= (7, 3) || ((v.0, v.1) == (7, 2) && v.2 >= 8) {
                Growth::AnyVm
            } else if at_least(7, 0) || late_6_18 {
                // Measured: 7.0.13 and 6.18.44 allocate on clone(CLONE_VM)
                // without CLONE_THREAD (the 7.1 rule, backported).
                Growth::VmNotVfork
            } else if at_least(6, 17) {
                // Measured on Debian 6.17.13 and 6.18.15.
                Growth::Thread
            } else {
                Growth::None
            },
            version: None,
        }
    }

    /// [`Expect::for_release`] of the running kernel.
    pub fn for_running_kernel() -> Expect {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Expect::for_release(release.trim())
    }
}

/// The leading `N.N.N` numbers of a version or release string (`7.3-rc1`
/// -> `[7, 3]`, `7.3.4+deb13-cloud-amd64` -> `[7, 3, 4]`).
fn leading_numbers(s: &str) -> Vec<u64> {
    let end = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    s[..end].split('.').map_while(|n| n.parse().ok()).collect()
}

/// Whether a kernel release (`uname -r`: `7.3.4+deb13-cloud-amd64`) is
/// of `version` (`7.3.4`, or `7.3` for any 7.3.y): the version's numbers
/// are the first numbers of the release. `6.18.15` is not `6.18.44`.
pub fn release_matches(version: &str, release: &str) -> bool {
    let (want, got) = (leading_numbers(version), leading_numbers(release));
    !want.is_empty() && got.starts_with(&want)
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
        assert_eq!(Expect::for_release("6.18.15").growth, Growth::Thread);
        assert_eq!(Expect::for_release("6.18.44").growth, Growth::VmNotVfork);
        assert_eq!(Expect::for_release("7.0.13").growth, Growth::VmNotVfork);
        assert!(!Expect::for_release("6.18.15").requeue_same_flags);
        assert!(Expect::for_release("7.0.13").requeue_same_flags);
        assert!(!Expect::for_release("7.0.13").robust_pending_owned);
        assert!(Expect::for_release("7.3.4").robust_pending_owned);
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
        let v = Expect::parse("version=7.3.4").unwrap();
        assert_eq!(v.version.as_deref(), Some("7.3.4"));
        assert!(v.encode().ends_with(",version=7.3.4"), "{}", v.encode());
        assert_eq!(Expect::parse(&v.encode()).unwrap(), v);
        assert_eq!(Expect::for_release("7.3.4").version, None);
        assert!(!Expect::for_release("7.3.4").encode().contains("version"));
        for bad in ["version=", "version=latest", "version=7.3 4"] {
            assert!(
                Expect::parse(bad)
                    .unwrap_err()
                    .contains("expected a kernel version"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_release_matches_the_version_it_was_written_for() {
        assert!(release_matches("7.3.4", "7.3.4+deb13-cloud-amd64"));
        assert!(release_matches("7.3", "7.3.4+deb13-cloud-amd64"));
        assert!(release_matches("7.3.4+deb13", "7.3.4+deb13-cloud-amd64"));
        assert!(release_matches("7.3-rc1", "7.3.0-rc1"));
        assert!(!release_matches("6.18.15", "6.18.44+deb13-cloud-amd64"));
        assert!(!release_matches("7.3", "7.30.1"));
        assert!(!release_matches("7.3.4", "7.3"));
        assert!(!release_matches("x", "7.3.4"));
    }

    #[test]
    fn keys_are_what_set_takes_and_encode_writes() {
        let mut with_version = Expect::for_release("7.3");
        with_version.version = Some("7.3".into());
        let encoded: Vec<String> = with_version
            .encode()
            .split(',')
            .map(|kv| kv.split_once('=').unwrap().0.to_string())
            .collect();
        assert_eq!(encoded, KEYS);
        let mut e = Expect::for_release("7.3");
        for k in KEYS.iter().filter(|k| !["growth", "version"].contains(k)) {
            e.set(k, "1").unwrap();
        }
        e.set("version", "7.3.4").unwrap();
        assert_eq!(e.version.as_deref(), Some("7.3.4"));
        for g in Growth::ALL {
            e.set("growth", g.name()).unwrap();
            assert_eq!(e.growth, g);
        }
    }

    #[test]
    fn switching_a_feature_off_switches_off_what_needs_it() {
        let mut e = Expect::for_release("7.3.4");
        e.apply("immutable=1,prctl=0").unwrap();
        assert!(!e.prctl && !e.private_hash && !e.immutable);
        assert_eq!(e.growth, Growth::None);
        // Layered over a version row (what the harness does): fine.
        let mut e = Expect::for_release("6.18.15");
        e.apply(&format!("{},private_hash=0", e.encode())).unwrap();
        assert_eq!((e.private_hash, e.growth), (false, Growth::None));
        assert!(e.prctl && e.numa);
    }

    #[test]
    fn a_dependent_turned_back_on_is_a_contradiction() {
        let mut e = Expect::for_release("7.3.4");
        let err = e.apply("private_hash=0,immutable=1").unwrap_err();
        assert_eq!(
            err,
            "immutable expected without private_hash: no kernel has one without the other (set immutable=0 too, or private_hash=1)"
        );
        let mut e = Expect::for_release("7.3.4");
        assert!(e
            .apply("prctl=0,growth=thread")
            .unwrap_err()
            .starts_with("growth expected without private_hash"));
        let mut e = Expect::for_release("6.12.1");
        assert!(e
            .apply("private_hash=1")
            .unwrap_err()
            .starts_with("private_hash expected without prctl"));
        // FUTEX2_MPOL needs FUTEX2_NUMA; `numa=0` alone also means no MPOL.
        let err = Expect::parse("numa=0,mpol=1").unwrap_err();
        assert_eq!(
            err,
            "mpol expected without numa: FUTEX2_MPOL needs FUTEX2_NUMA: both came in 6.16, and a kernel that refuses FUTEX2_NUMA (EINVAL) refuses FUTEX2_MPOL too (set mpol=0 too, or numa=1)"
        );
        let e = Expect::parse("mpol=1,numa=0").unwrap();
        assert!(!e.numa && !e.mpol);
        // Each contradiction is named; consistent rows have none.
        for r in ["6.12.1", "6.16.12", "6.17.13", "6.18.15", "7.0.13", "7.3.4"] {
            assert_eq!(Expect::for_release(r).contradiction(), None, "{r}");
        }
    }
}
