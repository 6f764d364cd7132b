//! The pure parts of `futex-bench`: benchmark configurations (parsed from
//! and encoded to `name:key=value,...`), the round schedule (configurations
//! interleaved round by round, so machine drift hits all of them alike),
//! statistics (mean, sample standard deviation), and the machine-readable
//! `# BENCH {json}` lines the harness collects from the KTAP stream.
//!
//! Host and guest share this module: the guest prints [`BenchLine`]s, the
//! harness parses them back with [`BenchLine::parse`].

use serde::{Deserialize, Serialize};

/// Prefix of a machine-readable result line inside a KTAP diagnostic
/// (the full line is `# BENCH {json}`, possibly indented by nesting).
pub const BENCH_TAG: &str = "BENCH ";

/// Mean, sample standard deviation, extremes of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean (0 for no samples).
    pub mean: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 below 2 samples).
    pub sd: f64,
    /// Smallest sample (0 for no samples).
    pub min: f64,
    /// Largest sample (0 for no samples).
    pub max: f64,
}

impl Stats {
    /// Statistics of `xs` (non-finite samples are ignored).
    pub fn of(xs: &[f64]) -> Stats {
        let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        let n = v.len();
        if n == 0 {
            return Stats {
                n: 0,
                mean: 0.0,
                sd: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = if n < 2 {
            0.0
        } else {
            (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Stats {
            n,
            mean,
            sd,
            min,
            max,
        }
    }

    /// Standard deviation relative to the mean, in percent (0 if the mean is 0).
    pub fn rel_sd_pct(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            100.0 * self.sd / self.mean.abs()
        }
    }
}

/// The median of `xs` (mean of the middle two for an even count; 0 if empty).
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// What the benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `perf bench futex hash`: every thread calls FUTEX_WAIT with a value
    /// that never matches on each of its own futexes (EAGAIN at once), so
    /// only key hashing and the bucket lock are measured.
    Hash,
    /// `futex_numa` contention: contenders on each node call futex2_wait
    /// (FUTEX2_NUMA) with a mismatching value on their node's lock word,
    /// hammering the hash bucket lock of the node the word names.
    Numa,
}

/// How worker threads are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bind {
    /// Thread i on the i-th allowed CPU (round robin), as perf does.
    Cpu,
    /// Thread i on all CPUs of node i mod nodes.
    Node,
    /// No affinity.
    None,
}

/// The node word of the FUTEX2_NUMA lock in [`Mode::Numa`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NumaNode {
    /// Every node's lock names this node: all contenders hash into one
    /// node's table (`futex_numa -N0` on both nodes).
    Forced(u32),
    /// Node n's lock names node n (`-N0` / `-N1`: separated tables).
    Own,
    /// The word is -1: the kernel writes the caller's node in.
    Free,
}

/// One benchmark configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Short name (`global`, `b128`, `Ib128`, ...): `[A-Za-z0-9._-]`, 1-40 chars.
    pub name: String,
    /// What is measured.
    pub mode: Mode,
    /// Worker threads for [`Mode::Hash`] (None: one per online CPU).
    pub threads: Option<usize>,
    /// Futexes per thread ([`Mode::Hash`]).
    pub futexes: usize,
    /// `PR_FUTEX_HASH_SET_SLOTS` before any thread exists: None = no SET
    /// (the kernel's automatic private hash), 0 = global hash, else slots.
    pub buckets: Option<u64>,
    /// Pass `FH_FLAG_IMMUTABLE` (arg4 = 1) with the SET.
    pub immutable: bool,
    /// Shared (not `FUTEX_PRIVATE_FLAG`) futexes; they always use the global hash.
    pub shared: bool,
    /// Thread placement.
    pub bind: Bind,
    /// [`Mode::Numa`]: contenders per node.
    pub contenders: usize,
    /// [`Mode::Numa`]: what the lock's node word says.
    pub numa_node: NumaNode,
}

impl Config {
    /// perf's defaults: hash mode, a thread per CPU, 1024 private futexes
    /// each, no SET, CPU binding.
    pub fn new(name: &str) -> Config {
        Config {
            name: name.into(),
            mode: Mode::Hash,
            threads: None,
            futexes: 1024,
            buckets: None,
            immutable: false,
            shared: false,
            bind: Bind::Cpu,
            contenders: 2,
            numa_node: NumaNode::Free,
        }
    }

    /// Parses `name[:key[=value],...]` on top of `base` (whose name is
    /// replaced). Keys: `mode=hash|numa`, `threads=N|auto`, `futexes=N`,
    /// `buckets=N|auto` (`b=N` too), `immutable`, `shared`, `private`,
    /// `bind=cpu|node|none`, `contenders=N`, `node=forced[:N]|own|free`.
    pub fn parse_with(spec: &str, base: &Config) -> Result<Config, String> {
        let (name, opts) = spec.split_once(':').unwrap_or((spec, ""));
        check_name(name)?;
        let mut c = base.clone();
        c.name = name.into();
        for kv in opts.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = match kv.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (kv, None),
            };
            let need = || v.ok_or_else(|| format!("{name}: {k} needs a value ({k}=...)"));
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("{name}: {k}={v:?}: expected a number"))
            };
            match k {
                "mode" => {
                    c.mode = match need()? {
                        "hash" => Mode::Hash,
                        "numa" => Mode::Numa,
                        o => return Err(format!("{name}: mode={o:?}: expected hash or numa")),
                    }
                }
                "threads" | "t" => {
                    c.threads = match need()? {
                        "auto" => None,
                        v => Some(num(v)? as usize),
                    }
                }
                "futexes" | "f" => c.futexes = num(need()?)? as usize,
                "buckets" | "b" => {
                    c.buckets = match need()? {
                        "auto" => None,
                        v => Some(num(v)?),
                    }
                }
                "immutable" | "I" => c.immutable = flag(name, k, v)?,
                "shared" | "S" => c.shared = flag(name, k, v)?,
                "private" => c.shared = !flag(name, k, v)?,
                "bind" => {
                    c.bind = match need()? {
                        "cpu" => Bind::Cpu,
                        "node" => Bind::Node,
                        "none" => Bind::None,
                        o => return Err(format!("{name}: bind={o:?}: expected cpu, node or none")),
                    }
                }
                "contenders" | "c" => c.contenders = num(need()?)? as usize,
                "node" => {
                    c.numa_node = parse_numa_node(need()?).map_err(|e| format!("{name}: {e}"))?
                }
                other => return Err(format!("{name}: unknown key {other:?}")),
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// [`Config::parse_with`] on perf's defaults.
    pub fn parse(spec: &str) -> Result<Config, String> {
        Config::parse_with(spec, &Config::new("x"))
    }

    /// Rejects combinations that cannot be run.
    pub fn validate(&self) -> Result<(), String> {
        check_name(&self.name)?;
        let n = &self.name;
        if self.immutable && self.buckets.is_none() {
            return Err(format!(
                "{n}: immutable needs buckets=N (a SET to make immutable)"
            ));
        }
        if let Some(b) = self.buckets {
            if (b != 0 && !b.is_power_of_two()) || b == 1 {
                return Err(format!(
                    "{n}: buckets={b}: must be 0 (global) or a power of two >= 2"
                ));
            }
        }
        if self.futexes == 0 || self.futexes > 1 << 20 {
            return Err(format!("{n}: futexes must be 1..=1048576"));
        }
        if self.threads == Some(0) || self.threads.is_some_and(|t| t > 1024) {
            return Err(format!("{n}: threads must be 1..=1024"));
        }
        if self.mode == Mode::Numa && (self.contenders == 0 || self.contenders > 256) {
            return Err(format!("{n}: contenders must be 1..=256 per node"));
        }
        Ok(())
    }

    /// The inverse of [`Config::parse`] (every key spelled out).
    pub fn encode(&self) -> String {
        let mut kv = vec![format!(
            "mode={}",
            match self.mode {
                Mode::Hash => "hash",
                Mode::Numa => "numa",
            }
        )];
        kv.push(format!(
            "threads={}",
            self.threads.map_or("auto".into(), |t| t.to_string())
        ));
        kv.push(format!("futexes={}", self.futexes));
        kv.push(format!(
            "buckets={}",
            self.buckets.map_or("auto".into(), |b| b.to_string())
        ));
        kv.push(format!("immutable={}", u8::from(self.immutable)));
        kv.push(format!("shared={}", u8::from(self.shared)));
        kv.push(format!(
            "bind={}",
            match self.bind {
                Bind::Cpu => "cpu",
                Bind::Node => "node",
                Bind::None => "none",
            }
        ));
        kv.push(format!("contenders={}", self.contenders));
        kv.push(format!(
            "node={}",
            match self.numa_node {
                NumaNode::Forced(n) => format!("forced:{n}"),
                NumaNode::Own => "own".into(),
                NumaNode::Free => "free".into(),
            }
        ));
        format!("{}:{}", self.name, kv.join(","))
    }

    /// Human summary (`private futexes, SET_SLOTS 128 immutable, bind cpu`).
    pub fn describe(&self) -> String {
        match self.mode {
            Mode::Hash => {
                let hash = match (self.buckets, self.immutable) {
                    (None, _) => "automatic private hash".to_string(),
                    (Some(0), _) => "global hash (SET_SLOTS 0)".to_string(),
                    (Some(b), false) => format!("{b} private buckets"),
                    (Some(b), true) => format!("{b} private buckets, immutable"),
                };
                format!(
                    "hash: {} threads x {} {} futexes, {hash}, bind {:?}",
                    self.threads.map_or("cpu-count".into(), |t| t.to_string()),
                    self.futexes,
                    if self.shared { "shared" } else { "private" },
                    self.bind
                )
            }
            Mode::Numa => format!(
                "numa: {} contenders per node on a FUTEX2_NUMA lock per node, node word {}",
                self.contenders,
                match self.numa_node {
                    NumaNode::Forced(n) => format!("forced to {n}"),
                    NumaNode::Own => "= own node".into(),
                    NumaNode::Free => "-1 (kernel picks)".into(),
                }
            ),
        }
    }
}

fn flag(name: &str, k: &str, v: Option<&str>) -> Result<bool, String> {
    match v {
        None | Some("1") | Some("yes") | Some("true") => Ok(true),
        Some("0") | Some("no") | Some("false") => Ok(false),
        Some(o) => Err(format!("{name}: {k}={o:?}: expected 1 or 0")),
    }
}

fn parse_numa_node(v: &str) -> Result<NumaNode, String> {
    match v {
        "own" => Ok(NumaNode::Own),
        "free" => Ok(NumaNode::Free),
        "forced" => Ok(NumaNode::Forced(0)),
        _ => v
            .strip_prefix("forced:")
            .and_then(|n| n.parse().ok())
            .map(NumaNode::Forced)
            .ok_or_else(|| format!("node={v:?}: expected forced[:N], own or free")),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "configuration name {name:?}: 1-40 characters of [A-Za-z0-9._-]"
        ))
    }
}

/// The standard set, the shape of the immutability patch's table: global
/// hash, private 16/128/1024 buckets, immutable 128/1024, automatic, and
/// shared futexes; plus the futex_numa pair when `nodes >= 2`.
pub fn standard_set(nodes: usize) -> Vec<String> {
    let mut v: Vec<String> = [
        "global:buckets=0",
        "b16:buckets=16",
        "b128:buckets=128",
        "b1024:buckets=1024",
        "Ib128:buckets=128,immutable",
        "Ib1024:buckets=1024,immutable",
        "auto",
        "shared:shared",
        "global-pernode:buckets=0,bind=node",
        "b128-pernode:buckets=128,bind=node",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if nodes >= 2 {
        v.push("numa-forced:mode=numa,node=forced:0".into());
        v.push("numa-own:mode=numa,node=own".into());
    }
    v
}

/// Names of the built-in configuration sets for `--set`.
pub const SETS: &[&str] = &["standard", "seed", "numa"];

/// A named set of configuration specs (see [`standard_set`]). `seed` is the
/// seed table's rows (global vs private 16/128/1024 vs immutable); `numa`
/// the futex_numa pair.
pub fn named_set(name: &str, nodes: usize) -> Option<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
    match name {
        "standard" => Some(standard_set(nodes)),
        "seed" => Some(s(&[
            "global:buckets=0",
            "b16:buckets=16",
            "b128:buckets=128",
            "b1024:buckets=1024",
            "Ib128:buckets=128,immutable",
            "Ib1024:buckets=1024,immutable",
        ])),
        "numa" => Some(s(&[
            "numa-forced:mode=numa,node=forced:0",
            "numa-own:mode=numa,node=own",
            "numa-free:mode=numa,node=free",
        ])),
        _ => None,
    }
}

/// The order rounds run in: round 1 of every configuration, then round 2 of
/// every configuration, ... (ABAB), so slow drift of the machine is spread
/// over all configurations alike. Items are (configuration index, round).
pub fn schedule(configs: usize, rounds: usize) -> Vec<(usize, usize)> {
    (0..rounds)
        .flat_map(|r| (0..configs).map(move |c| (c, r)))
        .collect()
}

/// One round of one configuration, measured in a fresh process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// Configuration name.
    pub config: String,
    /// Round number (0-based).
    pub round: usize,
    /// Seconds measured (from the start signal to the stop signal).
    pub elapsed_s: f64,
    /// Operations per second of each worker thread.
    pub per_thread: Vec<f64>,
    /// Sum of `per_thread`.
    pub total: f64,
    /// Node of each worker (where bound; -1 unbound).
    pub nodes: Vec<i64>,
    /// `GET_SLOTS` after the SET and after the run (None: not asked).
    pub slots: Option<i64>,
    /// `GET_IMMUTABLE` after the SET (None: not asked or not supported).
    pub immutable: Option<i64>,
}

impl Round {
    /// Builds a round from raw per-thread operation counts.
    pub fn from_ops(config: &str, round: usize, ops: &[u64], elapsed_s: f64) -> Round {
        let per_thread: Vec<f64> = ops
            .iter()
            .map(|&o| {
                if elapsed_s > 0.0 {
                    o as f64 / elapsed_s
                } else {
                    0.0
                }
            })
            .collect();
        Round {
            config: config.into(),
            round,
            elapsed_s,
            total: per_thread.iter().sum(),
            per_thread,
            nodes: vec![],
            slots: None,
            immutable: None,
        }
    }
}

/// Everything rounds say about one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Configuration name.
    pub config: String,
    /// The configuration, encoded (see [`Config::encode`]).
    pub spec: String,
    /// Total ops/s over rounds.
    pub total: Stats,
    /// Per-thread ops/s over all threads of all rounds.
    pub per_thread: Stats,
    /// Worker threads per round.
    pub threads: usize,
}

impl Summary {
    /// Summarises the rounds of one configuration.
    pub fn of(config: &Config, rounds: &[Round]) -> Summary {
        let totals: Vec<f64> = rounds.iter().map(|r| r.total).collect();
        let per: Vec<f64> = rounds.iter().flat_map(|r| r.per_thread.clone()).collect();
        Summary {
            config: config.name.clone(),
            spec: config.encode(),
            total: Stats::of(&totals),
            per_thread: Stats::of(&per),
            threads: rounds.first().map_or(0, |r| r.per_thread.len()),
        }
    }
}

/// A machine-readable line of the benchmark's KTAP output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BenchLine {
    /// One round's numbers.
    Round(Round),
    /// A configuration's summary over its rounds.
    Summary(Summary),
    /// A configuration that could not run here, and why (e.g. no immutable hash).
    Skip {
        /// Configuration name.
        config: String,
        /// Why.
        reason: String,
    },
    /// A configuration that failed, and why.
    Fail {
        /// Configuration name.
        config: String,
        /// Why.
        reason: String,
    },
}

impl BenchLine {
    /// `BENCH {json}` (the KTAP emitter adds `# `).
    pub fn to_diag(&self) -> String {
        format!(
            "{BENCH_TAG}{}",
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        )
    }

    /// Parses a line of KTAP output: `[indent]# BENCH {json}`. Anything
    /// else (or JSON that does not decode) is `None`.
    pub fn parse(line: &str) -> Option<BenchLine> {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let json = rest.strip_prefix(BENCH_TAG)?;
        serde_json::from_str(json.trim()).ok()
    }

    /// The configuration the line is about.
    pub fn config(&self) -> &str {
        match self {
            BenchLine::Round(r) => &r.config,
            BenchLine::Summary(s) => &s.config,
            BenchLine::Skip { config, .. } | BenchLine::Fail { config, .. } => config,
        }
    }
}

/// A kernel feature a configuration needs is missing: `Ok(reason)` to
/// SKIP where the expectations say the kernel lacks it, `Err(reason)` to
/// FAIL where they say it has it.
pub fn missing_feature(expected: bool, why: &str) -> Result<String, String> {
    if expected {
        Err(format!("{why}, but --expect says the kernel has it"))
    } else {
        Ok(why.to_string())
    }
}

/// Formats ops/s compactly: `1.23M`, `456.7k`, `89`.
pub fn si(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_mean_and_sample_sd() {
        let s = Stats::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        // sample variance = 32 / 7
        assert!((s.sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        assert!((s.rel_sd_pct() - 100.0 * (32.0f64 / 7.0).sqrt() / 5.0).abs() < 1e-9);
    }

    #[test]
    fn stats_edge_cases() {
        assert_eq!(Stats::of(&[]).n, 0);
        assert_eq!(Stats::of(&[]).rel_sd_pct(), 0.0);
        let one = Stats::of(&[3.0]);
        assert_eq!((one.mean, one.sd), (3.0, 0.0));
        let nan = Stats::of(&[1.0, f64::NAN, 3.0, f64::INFINITY]);
        assert_eq!((nan.n, nan.mean), (2, 2.0));
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn config_parse_encode_round_trip() {
        for spec in standard_set(2)
            .iter()
            .chain(named_set("numa", 2).unwrap().iter())
        {
            let c = Config::parse(spec).unwrap();
            assert_eq!(Config::parse(&c.encode()).unwrap(), c, "{spec}");
        }
        let c = Config::parse("Ib128:b=128,I,t=3,f=16,bind=node").unwrap();
        assert_eq!(c.buckets, Some(128));
        assert!(c.immutable && !c.shared);
        assert_eq!((c.threads, c.futexes, c.bind), (Some(3), 16, Bind::Node));
        let n = Config::parse("n:mode=numa,node=forced:1,contenders=4").unwrap();
        assert_eq!(
            (n.mode, n.numa_node, n.contenders),
            (Mode::Numa, NumaNode::Forced(1), 4)
        );
    }

    #[test]
    fn config_parse_on_a_base_keeps_its_knobs() {
        let mut base = Config::new("x");
        base.futexes = 8;
        base.threads = Some(2);
        let c = Config::parse_with("g:buckets=0", &base).unwrap();
        assert_eq!((c.futexes, c.threads, c.buckets), (8, Some(2), Some(0)));
    }

    #[test]
    fn config_errors_name_the_problem() {
        let e = |s: &str| Config::parse(s).unwrap_err();
        assert!(e("a:buckets=3").contains("power of two"));
        assert!(e("a:buckets=1").contains("power of two"));
        assert!(e("a:immutable").contains("needs buckets"));
        assert!(e("a:bogus=1").contains("unknown key \"bogus\""));
        assert!(e("a b").contains("configuration name"));
        assert!(e("a:mode=fast").contains("hash or numa"));
        assert!(e("a:node=somewhere").contains("forced[:N]"));
        assert!(e("a:threads=0").contains("threads"));
        assert!(e("a:buckets").contains("needs a value"));
        assert!(Config::parse("a:buckets=0").is_ok());
    }

    #[test]
    fn schedule_interleaves_rounds() {
        assert_eq!(
            schedule(2, 3),
            vec![(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
        );
        assert!(schedule(0, 3).is_empty());
    }

    #[test]
    fn round_and_summary() {
        let r0 = Round::from_ops("g", 0, &[100, 300], 2.0);
        assert_eq!(r0.per_thread, vec![50.0, 150.0]);
        assert_eq!(r0.total, 200.0);
        let r1 = Round::from_ops("g", 1, &[200, 200], 2.0);
        let s = Summary::of(&Config::parse("g:buckets=0").unwrap(), &[r0, r1]);
        assert_eq!(s.total.mean, 200.0);
        assert_eq!(s.total.sd, 0.0);
        assert_eq!(s.per_thread.n, 4);
        assert_eq!(s.per_thread.mean, 100.0);
        assert_eq!(s.threads, 2);
        assert_eq!(Round::from_ops("g", 0, &[5], 0.0).total, 0.0);
    }

    #[test]
    fn bench_lines_round_trip_through_ktap_diagnostics() {
        let lines = vec![
            BenchLine::Round(Round::from_ops("b16", 2, &[10, 20], 1.0)),
            BenchLine::Summary(Summary::of(&Config::parse("b16:b=16").unwrap(), &[])),
            BenchLine::Skip {
                config: "Ib128".into(),
                reason: "no immutable hash: EINVAL".into(),
            },
        ];
        for l in lines {
            let text = format!("    # {}", l.to_diag());
            assert_eq!(BenchLine::parse(&text).as_ref(), Some(&l), "{text}");
        }
        assert_eq!(BenchLine::parse("# BENCH {not json"), None);
        assert_eq!(BenchLine::parse("ok 1 b16"), None);
        assert_eq!(BenchLine::parse("# something else"), None);
        let skip = BenchLine::parse(r#"# BENCH {"kind":"skip","config":"x","reason":"r"}"#);
        assert_eq!(skip.unwrap().config(), "x");
    }

    #[test]
    fn missing_feature_skips_unless_expected() {
        assert_eq!(
            missing_feature(false, "no immutable"),
            Ok("no immutable".into())
        );
        let e = missing_feature(true, "no immutable").unwrap_err();
        assert!(e.contains("no immutable") && e.contains("--expect"), "{e}");
    }

    #[test]
    fn si_formatting() {
        assert_eq!(si(1_234_567.0), "1.23M");
        assert_eq!(si(45_678.0), "45.7k");
        assert_eq!(si(12.0), "12");
        assert_eq!(si(3.2e9), "3.20G");
    }
}
