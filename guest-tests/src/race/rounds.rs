//! The rounds of a race case and what they report (re-exported by
//! `guest_tests::race`): when to stop ([`Rounds`]), what they saw ([`Tally`]), one
//! round's known race failures ([`Round`]), and [`run`], which reports in
//! one order for every race case: a failure of another kind (a new bug)
//! first, else the first known race failure with its message unchanged,
//! else a round's skip, else the rule that a race case which never
//! overlapped its two calls FAILS ([`Tally::require_overlap`]).

use super::serialized;
use super::SERIALIZE_ENV;
use crate::hash::{self, fail, Check};
use crate::ktap::Outcome;
use std::time::{Duration, Instant};

/// When a race case stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rounds {
    /// Run at least this many rounds.
    pub min: u64,
    /// Then stop once this many overlapped (default runs only).
    pub overlaps: u64,
    /// Never more rounds than this (default runs only).
    pub max: u64,
    /// Stop starting rounds after this long (default runs only).
    pub at_most: Duration,
    /// Keep starting rounds for at least this long (`--seconds`).
    pub at_least: Duration,
    /// `--iterations` was given: exactly `min` rounds (and `at_least`).
    pub fixed: bool,
    /// A case that raced nothing fails ([`Tally::require_overlap`]); off
    /// only where there is nothing to race ([`Rounds::once_unless`]).
    pub must_overlap: bool,
}

impl Rounds {
    /// The default: `min` rounds, then until `overlaps` overlapped, at most
    /// `max` rounds and `at_most` wall time; `--iterations N` and
    /// `--seconds S` (through the environment) replace it.
    pub fn from_env(min: u64, overlaps: u64, max: u64, at_most: Duration) -> Rounds {
        let at_least = Duration::from_secs(hash::stress_seconds(0));
        match std::env::var("FUTEX_STRESS_ITERATIONS").ok() {
            Some(_) => Rounds {
                min: hash::stress_iterations(1),
                overlaps: 0,
                max: u64::MAX,
                at_most: Duration::ZERO,
                at_least,
                fixed: true,
                must_overlap: true,
            },
            None => Rounds {
                min,
                overlaps,
                max,
                at_most,
                at_least,
                fixed: false,
                must_overlap: true,
            },
        }
    }

    /// Whether to start round number `done` (0-based) after `overlapped`
    /// overlapping rounds and `elapsed` time.
    pub fn another(&self, done: u64, overlapped: u64, elapsed: Duration) -> bool {
        if done < self.min || elapsed < self.at_least {
            return true;
        }
        !self.fixed && overlapped < self.overlaps && done < self.max && elapsed < self.at_most
    }

    /// One round where there is nothing to race (the kernel has no
    /// private hash: every call ends the one way the ABI says, e.g.
    /// EINVAL): the absent behaviour is checked once instead of for the
    /// default 2 s, and no overlap is asked for. `--iterations` and
    /// `--seconds` still run as asked.
    pub fn once_unless(self, racing: bool) -> Rounds {
        if racing {
            return self;
        }
        let rounds = Rounds {
            must_overlap: false,
            ..self
        };
        if self.fixed || !self.at_least.is_zero() {
            return rounds;
        }
        Rounds {
            min: 1,
            overlaps: 0,
            max: 1,
            ..rounds
        }
    }

    /// What bounded the rounds, for a message: `of at most 200, 2 s`,
    /// `exactly 5: --iterations`, `..., at least 30 s: --seconds`.
    pub fn bounds(&self) -> String {
        let mut b = if self.fixed {
            format!("exactly {}: --iterations", self.min)
        } else {
            format!("of at most {}, {} s", self.max, self.at_most.as_secs_f64())
        };
        if !self.at_least.is_zero() {
            b.push_str(&format!(
                "; at least {} s: --seconds",
                self.at_least.as_secs_f64()
            ));
        }
        b
    }

    /// A case timeout that fits these rounds (the default 60 s, plus
    /// `--seconds` twice, plus 200 ms a round for `--iterations`).
    pub fn timeout(&self) -> Duration {
        let per_round = if self.fixed {
            Duration::from_millis(200) * self.min.min(1 << 20) as u32
        } else {
            Duration::ZERO
        };
        Duration::from_secs(60) + 2 * self.at_least + per_round
    }
}

/// The default rounds of a SET race case: 10, then until 10 overlapped,
/// at most 200 rounds or 2 s (`--iterations` / `--seconds` replace it).
pub fn set_race_rounds() -> Rounds {
    Rounds::from_env(10, 10, 200, Duration::from_secs(2))
}

/// What a race loop saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Rounds run.
    pub rounds: u64,
    /// Rounds whose calls overlapped.
    pub overlapped: u64,
    /// Rounds with a known race failure ([`Round::known_race`]).
    pub known: u64,
}

impl Tally {
    /// The `# rounds: N, overlapped: M` diagnostic line.
    pub fn line(&self) -> String {
        format!("rounds: {}, overlapped: {}", self.rounds, self.overlapped)
    }

    /// The rule every race case ends with: at least one round overlapped,
    /// unless `rounds` has nothing to race; else the case FAILS with the
    /// tally (a pass must have raced).
    pub fn require_overlap(&self, rounds: &Rounds) -> Check {
        if !rounds.must_overlap || self.overlapped > 0 {
            return Ok(());
        }
        Err(fail(format!(
            "no round overlapped in {} rounds ({}): the race was not exercised",
            self.rounds,
            rounds.bounds()
        )))
    }
}

/// One round as its checks see it.
#[derive(Debug)]
pub struct Round {
    /// Its number (0-based).
    pub r: u64,
    /// Set by the round: whether its two calls overlapped (before it
    /// checks the results, so a failing round counts too).
    pub overlapped: bool,
    known: Vec<String>,
}

impl Round {
    fn new(r: u64) -> Round {
        Round {
            r,
            overlapped: false,
            known: Vec::new(),
        }
    }

    /// A failure that is the known kernel race the case is named for
    /// (`docs/findings.md`), with its exact message: recorded, and the
    /// round's later checks still run.
    pub fn known_race(&mut self, msg: impl Into<String>) {
        self.known.push(msg.into());
    }

    /// `check`, except that a failure is a [`Round::known_race`] when
    /// `known` says it is the known race (then `Ok`).
    pub fn known_if(&mut self, known: bool, check: Check) -> Check {
        match check {
            Err(Outcome::Fail(w)) if known => {
                self.known_race(w);
                Ok(())
            }
            c => c,
        }
    }
}

/// At most this many `# round R: ...` failure lines a case prints.
pub const FAILURE_LINES: usize = 20;

/// The `# round R: ...` lines of a case's failures, at most [`FAILURE_LINES`].
#[derive(Debug, Default)]
struct FailureLines {
    shown: usize,
    hidden: usize,
}

impl FailureLines {
    /// The line for failure `msg` of round `r`, while there is room.
    fn line(&mut self, r: u64, msg: &str) -> Option<String> {
        if self.shown == FAILURE_LINES {
            self.hidden += 1;
            return None;
        }
        self.shown += 1;
        Some(format!("round {r}: {msg}"))
    }

    /// The closing line when some were left out.
    fn rest(&self) -> Option<String> {
        (self.hidden > 0).then(|| format!("... and {} more round failures", self.hidden))
    }
}

/// What the rounds found, in the order the case reports it: a failure of
/// any other kind (a new bug, the round `r: ` in front) first, else the
/// first known race failure (`round r: ` and its message, unchanged),
/// else a round's skip, else the overlap rule.
fn verdict(
    t: Tally,
    rounds: &Rounds,
    other: Option<Outcome>,
    first_known: Option<(u64, String)>,
) -> Result<Tally, Outcome> {
    match (other, first_known) {
        (Some(Outcome::Fail(w)), _) if t.known > 0 => Err(fail(format!(
            "{w} (and the known race failure in {} round(s): the # round lines)",
            t.known
        ))),
        (Some(o @ Outcome::Fail(_)), _) => Err(o),
        (_, Some((r, w))) => Err(fail(format!("round {r}: {w}"))),
        (Some(o), None) => Err(o),
        (None, None) => t.require_overlap(rounds).map(|()| t),
    }
}

/// Runs rounds while `rounds` says so: `round(&mut Round)` sets whether
/// round `r` overlapped, records its known race failures and returns any
/// other failure, which ends the rounds. The tally is printed either way,
/// each failure as a `# round R: ...` line; the case's outcome is
/// [`verdict`]'s (a pass needs an overlap: [`Tally::require_overlap`]).
pub fn run(rounds: &Rounds, mut round: impl FnMut(&mut Round) -> Check) -> Result<Tally, Outcome> {
    if serialized() {
        crate::cases::diag(&format!(
            "{SERIALIZE_ENV}=1: each round's two calls run one after the other"
        ));
    }
    let start = Instant::now();
    let mut t = Tally::default();
    let mut lines = FailureLines::default();
    let mut first_known = None;
    let mut other = None;
    while rounds.another(t.rounds, t.overlapped, start.elapsed()) {
        let mut rd = Round::new(t.rounds);
        let checked = round(&mut rd);
        t.rounds += 1;
        t.overlapped += rd.overlapped as u64;
        t.known += u64::from(!rd.known.is_empty());
        let failed = match &checked {
            Err(Outcome::Fail(w)) => Some(w.as_str()),
            _ => None,
        };
        for w in rd.known.iter().map(String::as_str).chain(failed) {
            if let Some(l) = lines.line(rd.r, w) {
                crate::cases::diag(&l);
            }
        }
        if first_known.is_none() {
            first_known = rd.known.into_iter().next().map(|w| (rd.r, w));
        }
        if let Err(o) = checked {
            other = Some(match o {
                Outcome::Fail(w) => fail(format!("round {}: {w}", rd.r)),
                o => o,
            });
            break;
        }
    }
    if let Some(l) = lines.rest() {
        crate::cases::diag(&l);
    }
    crate::cases::diag(&t.line());
    if t.known > 0 {
        crate::cases::diag(&format!("rounds with the known race failure: {}", t.known));
    }
    verdict(t, rounds, other, first_known)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::skip;

    #[test]
    fn nothing_to_race_is_one_round_unless_asked_for_more() {
        let d = default_rounds();
        assert_eq!(d.once_unless(true), d);
        let once = d.once_unless(false);
        assert!(once.another(0, 0, Duration::ZERO));
        assert!(!once.another(1, 0, Duration::ZERO));
        // Nothing to race: no overlap asked for, however many rounds.
        assert!(!once.must_overlap);
        let fixed = Rounds { fixed: true, ..d };
        let quiet = |r: Rounds| Rounds {
            must_overlap: false,
            ..r
        };
        assert_eq!(fixed.once_unless(false), quiet(fixed));
        let seconds = Rounds {
            at_least: Duration::from_secs(5),
            ..d
        };
        assert_eq!(seconds.once_unless(false), quiet(seconds));
    }

    #[test]
    fn rounds_stop_on_overlaps_or_caps_unless_told_a_number() {
        let r = Rounds {
            min: 20,
            overlaps: 10,
            max: 300,
            at_most: Duration::from_secs(3),
            at_least: Duration::ZERO,
            fixed: false,
            must_overlap: true,
        };
        let s = Duration::from_millis(1);
        assert!(r.another(19, 50, s));
        assert!(r.another(20, 9, s));
        assert!(!r.another(20, 10, s));
        assert!(!r.another(300, 0, s));
        assert!(!r.another(25, 0, Duration::from_secs(3)));
        let n = Rounds {
            min: 5,
            fixed: true,
            overlaps: 0,
            max: u64::MAX,
            at_most: Duration::ZERO,
            at_least: Duration::from_secs(2),
            must_overlap: true,
        };
        assert!(n.another(4, 0, s) && n.another(9, 0, s));
        assert!(!n.another(5, 0, Duration::from_secs(2)));
        assert_eq!(n.timeout(), Duration::from_secs(65));
    }

    fn default_rounds() -> Rounds {
        Rounds {
            min: 10,
            overlaps: 10,
            max: 200,
            at_most: Duration::from_secs(2),
            at_least: Duration::ZERO,
            fixed: false,
            must_overlap: true,
        }
    }

    fn tally(rounds: u64, overlapped: u64, known: u64) -> Tally {
        Tally {
            rounds,
            overlapped,
            known,
        }
    }

    #[test]
    fn a_race_that_never_overlapped_fails_with_its_tally() {
        let d = default_rounds();
        assert_eq!(
            tally(10, 0, 0).require_overlap(&d),
            Err(fail(
                "no round overlapped in 10 rounds (of at most 200, 2 s): the race was not exercised"
            ))
        );
        assert_eq!(tally(10, 1, 0).require_overlap(&d), Ok(()));
        // A count asked for changes nothing: exactly 3 rounds, none overlapped.
        let fixed = Rounds {
            min: 3,
            fixed: true,
            at_least: Duration::from_secs(30),
            ..d
        };
        assert_eq!(
            tally(3, 0, 0).require_overlap(&fixed),
            Err(fail(
                "no round overlapped in 3 rounds (exactly 3: --iterations; at least 30 s: \
                 --seconds): the race was not exercised"
            ))
        );
        // Nothing to race (no private hash): the one round is not a race.
        assert_eq!(
            tally(1, 0, 0).require_overlap(&d.once_unless(false)),
            Ok(())
        );
    }

    #[test]
    fn another_failure_comes_first_then_the_known_race_then_the_overlap_rule() {
        let d = default_rounds();
        let known = Some((
            2,
            "racing SET 0: thread 4 failed to spawn: EBUSY".to_string(),
        ));
        // A new bug wins, and says the known race came too.
        assert_eq!(
            verdict(
                tally(5, 3, 1),
                &d,
                Some(fail(
                    "round 4: SET 16 after the race: expected Err(EBUSY), got Ok(0)"
                )),
                known.clone()
            ),
            Err(fail(
                "round 4: SET 16 after the race: expected Err(EBUSY), got Ok(0) (and the known \
                 race failure in 1 round(s): the # round lines)"
            ))
        );
        // The known race alone: its exact message, the first round's.
        assert_eq!(
            verdict(tally(200, 0, 3), &d, None, known.clone()),
            Err(fail(
                "round 2: racing SET 0: thread 4 failed to spawn: EBUSY"
            ))
        );
        // A skip does not hide it.
        assert_eq!(
            verdict(tally(3, 1, 1), &d, Some(skip("no memory")), known),
            Err(fail(
                "round 2: racing SET 0: thread 4 failed to spawn: EBUSY"
            ))
        );
        assert_eq!(
            verdict(tally(3, 1, 0), &d, Some(skip("no memory")), None),
            Err(skip("no memory"))
        );
        assert!(matches!(
            verdict(tally(10, 0, 0), &d, None, None),
            Err(Outcome::Fail(w)) if w.starts_with("no round overlapped in 10 rounds")
        ));
        assert_eq!(
            verdict(tally(10, 4, 0), &d, None, None),
            Ok(tally(10, 4, 0))
        );
    }

    #[test]
    fn a_known_race_is_recorded_and_anything_else_returned() {
        let mut r = Round::new(3);
        let f = || Err(fail("GET: expected Ok(64), got Ok(32)"));
        assert_eq!(r.known_if(true, f()), Ok(()));
        assert_eq!(r.known_if(false, f()), f());
        assert_eq!(r.known_if(true, Ok(())), Ok(()));
        assert_eq!(r.known_if(true, Err(skip("s"))), Err(skip("s")));
        assert_eq!(r.known, ["GET: expected Ok(64), got Ok(32)"]);
    }

    #[test]
    fn failure_lines_are_bounded_and_say_how_many_were_left_out() {
        let mut l = FailureLines::default();
        let shown: Vec<String> = (0..25).filter_map(|r| l.line(r, "x")).collect();
        assert_eq!(shown.len(), FAILURE_LINES);
        assert_eq!(shown[0], "round 0: x");
        assert_eq!(l.rest().as_deref(), Some("... and 5 more round failures"));
        assert_eq!(FailureLines::default().rest(), None);
    }
}
