//! Known failures over a whole run: which entries were exercised (a cell
//! they apply to reported a case they name, or, for a kernel-report case
//! such as `boot/kernel-warning`, ran the test it names) and which of those excused
//! nothing anywhere. Such an entry is stale, listed by the terminal summary
//! and the JSON results so an entry that outlived its bug is seen and
//! removed; unless it declares itself `intermittent:` (a race that fires in
//! some runs only, with how often it was seen), which one run cannot call
//! stale: it is listed apart, as unseen.
//!
//! Architecture invariant: the decision "this failure is that entry's" is
//! [`crate::verdict::cases`]'s alone; this module only counts its results.

use crate::events::CellOutcome;
use crate::result::KnownFailure;
use crate::verdict::CaseStatus;
use std::collections::{BTreeMap, BTreeSet};

/// The run's known-failure entries as cells finish.
#[derive(Debug, Clone, Default)]
pub struct Staleness {
    /// Entries a cell could have used, by position.
    exercised: BTreeMap<String, KnownFailure>,
    /// Positions of the entries that excused a failure.
    used: BTreeSet<String>,
}

impl Staleness {
    /// Takes in a finished cell.
    pub fn observe(&mut self, o: &CellOutcome) {
        let Some(result) = &o.result else { return };
        for c in &o.cases {
            if let CaseStatus::Xfail { entry, .. } = &c.status {
                self.used.insert(entry.clone());
            }
        }
        for k in result
            .known_failures
            .iter()
            .filter(|k| k.applies_to_accel(&result.accel))
        {
            if o.cases
                .iter()
                .any(|c| crate::glob::matches(&k.case, &c.name))
                || report_case_ran(&k.case, o)
            {
                self.exercised
                    .entry(k.at.clone())
                    .or_insert_with(|| k.clone());
            }
        }
    }

    /// Entries exercised by the run that excused no failure, in position
    /// order: the ones that are not intermittent.
    pub fn stale(&self) -> Vec<&KnownFailure> {
        self.unused().filter(|k| k.intermittent.is_none()).collect()
    }

    /// Intermittent entries exercised by the run that excused no failure
    /// (this run did not hit the race), in position order.
    pub fn unseen(&self) -> Vec<&KnownFailure> {
        self.unused().filter(|k| k.intermittent.is_some()).collect()
    }

    fn unused(&self) -> impl Iterator<Item = &KnownFailure> {
        self.exercised
            .iter()
            .filter(|(at, _)| !self.used.contains(*at))
            .map(|(_, k)| k)
    }
}

/// Whether an entry for a kernel-report case (`<test>/kernel-<kind>`,
/// reported only when the kernel prints one) had its chance in this cell:
/// its test ran, or for `boot/`, a VM booted. Without this, an entry for a
/// report that did not fire would be neither stale nor unseen.
fn report_case_ran(case: &str, o: &CellOutcome) -> bool {
    let Some((test, kind)) = case.rsplit_once('/') else {
        return false;
    };
    if !kind.starts_with("kernel-") {
        return false;
    }
    test == "boot"
        || o.cases.iter().any(|c| {
            c.name
                .split('/')
                .next()
                .is_some_and(|t| crate::glob::matches(test, t))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::CellStatus;
    use crate::verdict::Case;

    fn entry(at: &str, case: &str) -> KnownFailure {
        KnownFailure {
            case: case.into(),
            reason: "r".into(),
            message: "m".into(),
            kernels: vec!["k".into()],
            suite: "s".into(),
            at: at.into(),
            accel: None,
            intermittent: None,
        }
    }

    fn outcome(cases: Vec<Case>, known: Vec<KnownFailure>, accel: &str) -> CellOutcome {
        let meta = crate::events::tests_support::meta();
        let mut o = CellOutcome::without_result(meta, CellStatus::Passed);
        o.cases = cases;
        let mut r = crate::result::tests_support::cell_result();
        r.known_failures = known;
        r.accel = accel.into();
        o.result = Some(Box::new(r));
        o
    }

    #[test]
    fn an_entry_that_excused_nothing_where_its_case_ran_is_stale() {
        let pass = |n: &str| Case {
            name: n.into(),
            status: CaseStatus::Pass,
        };
        let xfail = Case {
            name: "b/x".into(),
            status: CaseStatus::Xfail {
                message: "m".into(),
                text: String::new(),
                reason: "r".into(),
                entry: "m.yaml:2:5".into(),
            },
        };
        let known = vec![
            entry("m.yaml:1:5", "a/*"),
            entry("m.yaml:2:5", "b/x"),
            entry("m.yaml:3:5", "c/never-ran"),
        ];
        let mut s = Staleness::default();
        s.observe(&outcome(vec![pass("a/y"), xfail], known.clone(), "tcg"));
        let stale: Vec<&str> = s.stale().iter().map(|k| k.at.as_str()).collect();
        assert_eq!(stale, ["m.yaml:1:5"]);
        // Used in another cell: no longer stale.
        let used = Case {
            name: "a/y".into(),
            status: CaseStatus::Xfail {
                message: "m".into(),
                text: String::new(),
                reason: "r".into(),
                entry: "m.yaml:1:5".into(),
            },
        };
        s.observe(&outcome(vec![used], known, "tcg"));
        assert!(s.stale().is_empty());
    }

    #[test]
    fn a_kernel_report_entry_is_exercised_where_its_test_ran_or_a_vm_booted() {
        let pass = |n: &str| Case {
            name: n.into(),
            status: CaseStatus::Pass,
        };
        let mut boot = entry("m.yaml:1:5", "boot/kernel-warning");
        boot.intermittent = Some("1 of 9 full tiers".into());
        let known = vec![
            boot,
            entry("m.yaml:2:5", "a/kernel-warning"),
            entry("m.yaml:3:5", "z/kernel-oops"),
            entry("m.yaml:4:5", "a/kernel"),
        ];
        let mut s = Staleness::default();
        s.observe(&outcome(vec![pass("a/y")], known, "tcg"));
        let at =
            |v: Vec<&KnownFailure>| -> Vec<String> { v.iter().map(|k| k.at.clone()).collect() };
        // `a` ran: its report entry had its chance; `z` never ran, and
        // `a/kernel` is an ordinary case that was not reported.
        assert_eq!(at(s.stale()), ["m.yaml:2:5"]);
        assert_eq!(at(s.unseen()), ["m.yaml:1:5"]);
    }

    #[test]
    fn an_intermittent_entry_that_excused_nothing_is_unseen_not_stale() {
        let mut racy = entry("m.yaml:2:5", "a/*");
        racy.intermittent = Some("2 of 6 full tiers".into());
        let known = vec![entry("m.yaml:1:5", "a/*"), racy];
        let mut s = Staleness::default();
        let pass = Case {
            name: "a/y".into(),
            status: CaseStatus::Pass,
        };
        s.observe(&outcome(vec![pass], known, "tcg"));
        let at =
            |v: Vec<&KnownFailure>| -> Vec<String> { v.iter().map(|k| k.at.clone()).collect() };
        assert_eq!(at(s.stale()), ["m.yaml:1:5"]);
        assert_eq!(at(s.unseen()), ["m.yaml:2:5"]);
        // Once it fires, it is neither.
        let fired = Case {
            name: "a/y".into(),
            status: CaseStatus::Xfail {
                message: "m".into(),
                text: String::new(),
                reason: "r".into(),
                entry: "m.yaml:2:5".into(),
            },
        };
        let mut racy = entry("m.yaml:2:5", "a/*");
        racy.intermittent = Some("2 of 6 full tiers".into());
        s.observe(&outcome(vec![fired], vec![racy], "tcg"));
        assert!(s.unseen().is_empty());
    }

    #[test]
    fn an_entry_for_the_other_accelerator_is_not_exercised() {
        let mut k = entry("m.yaml:1:5", "a/*");
        k.accel = Some("kvm".into());
        let mut s = Staleness::default();
        let pass = Case {
            name: "a/y".into(),
            status: CaseStatus::Pass,
        };
        s.observe(&outcome(vec![pass], vec![k], "tcg"));
        assert!(s.stale().is_empty());
    }
}
