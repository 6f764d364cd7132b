//! A step's verdict: one repetition's from the cell's cases, a step's from
//! its repetitions under `--bad-if`, and `git bisect run`'s exit status for it.

use super::TestSel;
use crate::error::exit;
use serde::{Deserialize, Serialize};

/// When a step that ran `--repeat` times is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BadIf {
    /// Bad if any repetition is bad (catches flaky regressions).
    Any,
    /// Bad only if every repetition that said something is bad.
    All,
}

/// A step's (or one repetition's) verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The test passed.
    Good,
    /// The test failed.
    Bad,
    /// Cannot say (build or boot failure, nothing selected ran).
    Skip,
}

impl Verdict {
    /// `git bisect run`'s exit status.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Good => exit::OK,
            Verdict::Bad => exit::TESTS_FAILED,
            Verdict::Skip => exit::BISECT_SKIP,
        }
    }

    /// From a step command's exit status (`None`: killed by a signal).
    pub fn from_exit(code: Option<i32>) -> Verdict {
        match code {
            Some(0) => Verdict::Good,
            Some(125) | None => Verdict::Skip,
            Some(c) if (1..128).contains(&c) => Verdict::Bad,
            Some(_) => Verdict::Skip,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
            Verdict::Skip => "skip",
        }
    }
}

/// One repetition's verdict from the cell's cases: bad if a selected case
/// failed, good if one passed and none failed, else skip (with why).
pub fn verdict_from_cases(cases: &[crate::verdict::Case], sel: &TestSel) -> (Verdict, String) {
    use crate::verdict::CaseStatus;
    let chosen: Vec<_> = cases
        .iter()
        .filter(|c| sel.case_selected(&c.name))
        .collect();
    let failed: Vec<&str> = chosen
        .iter()
        .filter(|c| matches!(c.status, CaseStatus::Fail { .. }))
        .map(|c| c.name.as_str())
        .collect();
    let passed = chosen
        .iter()
        .filter(|c| c.status == CaseStatus::Pass)
        .count();
    if !failed.is_empty() {
        let more = failed.len().saturating_sub(5);
        let mut why = format!("failed: {}", failed[..failed.len().min(5)].join(", "));
        if more > 0 {
            why.push_str(&format!(" and {more} more"));
        }
        (Verdict::Bad, why)
    } else if passed > 0 {
        (Verdict::Good, format!("{passed} case(s) passed"))
    } else if chosen.is_empty() {
        (
            Verdict::Skip,
            "no selected case ran (boot failure?)".to_string(),
        )
    } else {
        (Verdict::Skip, "every selected case was skipped".to_string())
    }
}

/// A step's verdict from its repetitions under `policy`.
pub fn combine(reps: &[Verdict], policy: BadIf) -> Verdict {
    let bad = reps.iter().filter(|v| **v == Verdict::Bad).count();
    let good = reps.iter().filter(|v| **v == Verdict::Good).count();
    match policy {
        BadIf::Any if bad > 0 => Verdict::Bad,
        BadIf::All if bad > 0 && good == 0 => Verdict::Bad,
        _ if good > 0 => Verdict::Good,
        _ => Verdict::Skip,
    }
}

/// Whether more repetitions can still change the verdict under `policy`.
pub fn decided(reps: &[Verdict], policy: BadIf) -> bool {
    match policy {
        BadIf::Any => reps.contains(&Verdict::Bad),
        BadIf::All => reps.contains(&Verdict::Good),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Case, CaseStatus};

    fn case(name: &str, status: CaseStatus) -> Case {
        Case {
            name: name.into(),
            status,
        }
    }

    fn fail() -> CaseStatus {
        CaseStatus::Fail {
            message: "m".into(),
            text: String::new(),
        }
    }

    #[test]
    fn verdicts_from_cases() {
        let sel = TestSel::parse("futex/futex-prctl/*").unwrap();
        let v = |cases: &[Case]| verdict_from_cases(cases, &sel).0;
        assert_eq!(
            v(&[
                case("futex-prctl/a", CaseStatus::Pass),
                case("futex-numa/b", fail())
            ]),
            Verdict::Good
        );
        assert_eq!(
            v(&[
                case("futex-prctl/a", CaseStatus::Pass),
                case("futex-prctl/<incomplete>", fail())
            ]),
            Verdict::Bad
        );
        let (verdict, why) = verdict_from_cases(&[case("futex-prctl/slots", fail())], &sel);
        assert_eq!(verdict, Verdict::Bad);
        assert!(why.contains("futex-prctl/slots"));
        let many: Vec<Case> = (0..8)
            .map(|i| case(&format!("futex-prctl/c{i}"), fail()))
            .collect();
        let (_, why) = verdict_from_cases(&many, &sel);
        assert_eq!(why, "failed: futex-prctl/c0, futex-prctl/c1, futex-prctl/c2, futex-prctl/c3, futex-prctl/c4 and 3 more");
        // Boot failure: only boot/vm cases.
        assert_eq!(
            v(&[case("boot/kernel-panic", fail()), case("vm", fail())]),
            Verdict::Skip
        );
        assert_eq!(v(&[]), Verdict::Skip);
        assert_eq!(
            v(&[case("futex-prctl/a", CaseStatus::Skip("no".into()))]),
            Verdict::Skip
        );
    }

    #[test]
    fn repeat_policy() {
        use Verdict::*;
        assert_eq!(combine(&[Good, Bad, Good], BadIf::Any), Bad);
        assert_eq!(combine(&[Good, Bad, Good], BadIf::All), Good);
        assert_eq!(combine(&[Bad, Bad, Skip], BadIf::All), Bad);
        assert_eq!(combine(&[Bad, Bad, Bad], BadIf::All), Bad);
        assert_eq!(combine(&[Skip, Skip], BadIf::Any), Skip);
        assert_eq!(combine(&[Skip, Good], BadIf::Any), Good);
        assert_eq!(combine(&[Good], BadIf::Any), Good);
        assert!(decided(&[Good, Bad], BadIf::Any));
        assert!(!decided(&[Good, Good], BadIf::Any));
        assert!(decided(&[Bad, Good], BadIf::All));
        assert!(!decided(&[Bad, Skip], BadIf::All));
        assert_eq!(Verdict::from_exit(Some(0)), Good);
        assert_eq!(Verdict::from_exit(Some(1)), Bad);
        assert_eq!(Verdict::from_exit(Some(127)), Bad);
        assert_eq!(Verdict::from_exit(Some(125)), Skip);
        assert_eq!(Verdict::from_exit(Some(130)), Skip);
        assert_eq!(Verdict::from_exit(None), Skip);
        assert_eq!([Good, Bad, Skip].map(Verdict::exit_code), [0, 1, 125]);
    }
}
