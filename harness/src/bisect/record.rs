//! `steps.jsonl`: one JSON line per step, what the report and the next
//! step's number are read from.

use super::Verdict;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One line of `steps.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 1-based step number.
    pub step: usize,
    /// check-good, check-bad or bisect.
    pub phase: String,
    /// Full commit id.
    pub commit: String,
    /// Its subject line.
    pub subject: String,
    /// The step's verdict.
    pub verdict: Verdict,
    /// Each repetition's verdict.
    pub reps: Vec<Verdict>,
    /// Why (failed cases, build error, ...).
    pub reason: String,
    /// Build seconds (0 with --step-command).
    pub build_seconds: f64,
    /// Boot + test seconds, all repetitions.
    pub run_seconds: f64,
    /// Where the step's logs are.
    pub dir: PathBuf,
    /// `--metric` (performance bisection only, like the fields below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// `--threshold`, normalised (`<1200000` for `<1.2M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<String>,
    /// Each repetition's metric value (null: that repetition gave none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Option<f64>>,
    /// The median of `values`: what the verdict compares with the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

impl StepRecord {
    /// The JSON line (with the newline).
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The records of `<out>/steps.jsonl` (bad lines ignored).
pub fn read_steps(out: &Path) -> Vec<StepRecord> {
    std::fs::read_to_string(out.join("steps.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_jsonl_lines_round_trip() {
        let r = StepRecord {
            step: 3,
            phase: "bisect".into(),
            commit: "0123456789abcdef".into(),
            subject: "futex: \"quoted\"\nsubject".into(),
            verdict: Verdict::Bad,
            reps: vec![Verdict::Good, Verdict::Bad],
            reason: "failed: futex-prctl/slots".into(),
            build_seconds: 12.5,
            run_seconds: 40.0,
            dir: "o/steps/003-0123456789ab".into(),
            metric: None,
            threshold: None,
            values: Vec::new(),
            value: None,
        };
        let line = r.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["verdict"], "bad");
        assert_eq!(v["reps"], serde_json::json!(["good", "bad"]));
        assert_eq!(v["build_seconds"], 12.5);
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("steps.jsonl"),
            format!("{line}garbage\n{line}"),
        )
        .unwrap();
        assert_eq!(read_steps(d.path()), vec![r.clone(), r.clone()]);
        // A test bisection's line has no metric fields ...
        assert!(v.get("metric").is_none() && v.get("values").is_none());
        // ... a performance bisection's has them, a run without a value as null.
        let m = StepRecord {
            metric: Some("ops_per_s_mean:b1024".into()),
            threshold: Some("<1000".into()),
            values: vec![Some(812.5), None, Some(790.0)],
            value: Some(801.25),
            ..r
        };
        let v: serde_json::Value = serde_json::from_str(&m.to_line()).unwrap();
        assert_eq!(v["values"], serde_json::json!([812.5, null, 790.0]));
        assert_eq!(v["value"], 801.25);
        assert_eq!(v["threshold"], "<1000");
        assert_eq!(serde_json::from_value::<StepRecord>(v).unwrap(), m);
    }
}
