//! `futex-bench`: futex throughput benchmarks in the guest, with the knobs
//! of `perf bench futex hash` and a `futex_numa`-style contention mode.
//!
//! ```text
//! futex-bench [-t N] [-f N] [-r SECS] [-b N] [-I] [-S] [--bind cpu|node|none]
//!             [--mode hash|numa] [-c N] [--node forced[:N]|own|free]
//!             [-R ROUNDS] [--config NAME[:KEY=VAL,...]]... [--set standard|seed|numa]
//!             [--expect K=V,...]
//! ```
//!
//! The options set the defaults; each `--config` (or each configuration of
//! a `--set`) overrides keys of them (see `guest_tests::bench::Config`).
//! Without `--config`/`--set` the options themselves are one configuration.
//! Every round of every configuration runs in a freshly exec'd process
//! (`--run SPEC`), which sets `PR_FUTEX_HASH_SET_SLOTS` before it creates a
//! thread; rounds are interleaved (round 1 of every configuration, then
//! round 2, ...). Output: one KTAP test per configuration, human
//! diagnostics, and `# BENCH {json}` lines (rounds and summaries).
//!
//! A configuration the kernel cannot run (immutable hash: `SET_SLOTS` with
//! arg4 = 1 is EINVAL since 6.17; no private hash) is a SKIP with the
//! reason — a FAIL if `--expect` says the kernel has the feature.

use guest_tests::bench::{
    self, si, BenchLine, Bind, Config, Mode, NumaNode, Round, Stats, Summary,
};
use guest_tests::expect::Expect;
use guest_tests::ktap::{Ktap, Outcome};
use guest_tests::numa::{self, Mapping};
use guest_tests::sys::{self, futex_op, Errno, FUTEX_BITSET_MATCH_ANY};
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: futex-bench [options] [--config NAME[:KEY=VAL,...]]... [--set standard|seed|numa]
  -t, --threads N      worker threads (hash mode; default: one per CPU)
  -f, --futexes N      futexes per thread (default 1024)
  -r, --runtime SECS   seconds per round (default 1, decimals allowed)
  -b, --buckets N      PR_FUTEX_HASH SET_SLOTS N before any thread (0 = global hash)
  -I, --immutable      SET_SLOTS with arg4 = 1 (FH_FLAG_IMMUTABLE; patched kernels)
  -S, --shared         shared futexes instead of private ones
      --bind cpu|node|none  thread i on CPU i, or on the CPUs of node i mod nodes
      --mode hash|numa      perf-bench-futex-hash, or futex_numa contention
  -c, --contenders N   numa mode: contenders per node (default 2)
      --node forced[:N]|own|free  numa mode: the lock's node word
  -R, --rounds N       rounds per configuration (default 3)
      --config SPEC    a named configuration (repeatable); keys as in the options:
                       threads futexes buckets immutable shared bind mode contenders node
      --set NAME       add a built-in set: standard, seed, numa
      --expect K=V,..  kernel expectations (immutable=1: a missing immutable hash FAILS)
      --list           print the configurations and exit";

const RESULT_TAG: &str = "RESULT ";

struct Args {
    base: Config,
    specs: Vec<String>,
    rounds: usize,
    runtime: f64,
    expect: Option<String>,
    list: bool,
    run: Option<String>,
    round: usize,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        base: Config::new("default"),
        specs: Vec::new(),
        rounds: 3,
        runtime: 1.0,
        expect: None,
        list: false,
        run: None,
        round: 0,
    };
    let mut base_kv: Vec<String> = Vec::new();
    let mut sets: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "-t" | "--threads" => base_kv.push(format!("threads={}", val(arg)?)),
            "-f" | "--futexes" => base_kv.push(format!("futexes={}", val(arg)?)),
            "-b" | "--buckets" => base_kv.push(format!("buckets={}", val(arg)?)),
            "-I" | "--immutable" => base_kv.push("immutable".into()),
            "-S" | "--shared" => base_kv.push("shared".into()),
            "--bind" => base_kv.push(format!("bind={}", val(arg)?)),
            "--mode" => base_kv.push(format!("mode={}", val(arg)?)),
            "-c" | "--contenders" => base_kv.push(format!("contenders={}", val(arg)?)),
            "--node" => base_kv.push(format!("node={}", val(arg)?)),
            "-r" | "--runtime" => {
                let v = val(arg)?;
                a.runtime = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s <= 3600.0)
                    .ok_or_else(|| format!("--runtime {v:?}: expected seconds in (0, 3600]"))?;
            }
            "-R" | "--rounds" => {
                let v = val(arg)?;
                a.rounds = v
                    .parse::<usize>()
                    .ok()
                    .filter(|r| (1..=1000).contains(r))
                    .ok_or_else(|| format!("--rounds {v:?}: expected 1..=1000"))?;
            }
            "--config" => a.specs.push(val(arg)?),
            "--set" => sets.push(val(arg)?),
            "--expect" => a.expect = Some(val(arg)?),
            "--list" => a.list = true,
            "--run" => a.run = Some(val(arg)?),
            "--round" => {
                a.round = val(arg)?
                    .parse()
                    .map_err(|_| "--round: expected a number".to_string())?
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    // The base must validate on its own only when it is the configuration.
    let base_spec = format!("default:{}", base_kv.join(","));
    a.base = Config::parse_with(&base_spec, &Config::new("default")).or_else(|e| {
        if a.specs.is_empty() && sets.is_empty() {
            Err(e)
        } else {
            // e.g. `-I` as a default for configs that all set buckets.
            let mut c = Config::new("default");
            for kv in &base_kv {
                c = Config::parse_with(&format!("default:{kv}"), &c).unwrap_or(c);
            }
            Ok(c)
        }
    })?;
    let nodes = numa::Topology::read()
        .map(|t| t.cpu_nodes().len())
        .unwrap_or(1);
    for s in sets {
        let v = bench::named_set(&s, nodes)
            .ok_or_else(|| format!("--set {s:?}: known sets: {}", bench::SETS.join(", ")))?;
        a.specs.extend(v);
    }
    Ok(a)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("futex-bench: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let expect = match args.expect.as_deref().map(Expect::parse) {
        Some(Ok(e)) => e,
        Some(Err(e)) => {
            eprintln!("futex-bench: --expect: {e}");
            std::process::exit(2);
        }
        None => Expect::for_running_kernel(),
    };
    if let Some(spec) = &args.run {
        child_main(spec, args.round, args.runtime, &expect);
    }
    let configs: Vec<Config> = if args.specs.is_empty() {
        vec![args.base.clone()]
    } else {
        let mut v = Vec::new();
        for s in &args.specs {
            match Config::parse_with(s, &args.base) {
                Ok(c) if v.iter().any(|o: &Config| o.name == c.name) => {
                    eprintln!("futex-bench: configuration {:?} given twice", c.name);
                    std::process::exit(2);
                }
                Ok(c) => v.push(c),
                Err(e) => {
                    eprintln!("futex-bench: --config {s:?}: {e}");
                    std::process::exit(2);
                }
            }
        }
        v
    };
    if args.list {
        for c in &configs {
            println!("{}  # {}", c.encode(), c.describe());
        }
        std::process::exit(0);
    }
    std::process::exit(parent_main(&configs, &args, &expect));
}

/// What one round's process said.
enum RoundOutcome {
    Done(Box<Round>),
    Skip(String),
    Fail(String),
}

fn parent_main(configs: &[Config], args: &Args, expect: &Expect) -> i32 {
    let mut k = Ktap::stdout(configs.len());
    k.diag(&format!(
        "futex-bench: {} configurations x {} rounds of {} s, interleaved; kernel {}",
        configs.len(),
        args.rounds,
        args.runtime,
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    ));
    k.diag(&format!("expect: {}", expect.encode()));
    for c in configs {
        k.diag(&format!("config {}: {}", c.name, c.describe()));
    }
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); configs.len()];
    let mut ended: Vec<Option<Outcome>> = vec![None; configs.len()];
    for (ci, r) in bench::schedule(configs.len(), args.rounds) {
        if ended[ci].is_some() {
            continue;
        }
        let c = &configs[ci];
        let (outcome, notes) = run_round(c, r, args.runtime, expect);
        for n in notes {
            k.diag(&format!("{} round {}: {n}", c.name, r + 1));
        }
        match outcome {
            RoundOutcome::Done(round) => {
                let round = *round;
                let st = Stats::of(&round.per_thread);
                k.diag(&format!(
                    "{} round {}/{}: {} ops/s total, {} threads, per thread {} +- {:.1}%{}",
                    c.name,
                    r + 1,
                    args.rounds,
                    si(round.total),
                    round.per_thread.len(),
                    si(st.mean),
                    st.rel_sd_pct(),
                    round
                        .slots
                        .map(|s| format!(", GET_SLOTS {s}"))
                        .unwrap_or_default()
                ));
                k.diag(&BenchLine::Round(round.clone()).to_diag());
                rounds[ci].push(round);
            }
            RoundOutcome::Skip(why) => {
                k.diag(
                    &BenchLine::Skip {
                        config: c.name.clone(),
                        reason: why.clone(),
                    }
                    .to_diag(),
                );
                ended[ci] = Some(Outcome::Skip(why));
            }
            RoundOutcome::Fail(why) => {
                k.diag(
                    &BenchLine::Fail {
                        config: c.name.clone(),
                        reason: why.clone(),
                    }
                    .to_diag(),
                );
                ended[ci] = Some(Outcome::Fail(why));
            }
        }
    }
    let mut failed = 0;
    for (ci, c) in configs.iter().enumerate() {
        let outcome = match ended[ci].take() {
            Some(o) => o,
            None => {
                let s = Summary::of(c, &rounds[ci]);
                k.diag(&format!(
                    "{}: {} ops/s total +- {:.1}% over {} rounds; per thread {} +- {:.1}% ({} threads)",
                    c.name,
                    si(s.total.mean),
                    s.total.rel_sd_pct(),
                    s.total.n,
                    si(s.per_thread.mean),
                    s.per_thread.rel_sd_pct(),
                    s.threads
                ));
                k.diag(&BenchLine::Summary(s).to_diag());
                Outcome::Pass
            }
        };
        if !k.result(&c.name, &outcome) {
            failed += 1;
        }
    }
    if failed == 0 {
        0
    } else {
        1
    }
}

/// Runs one round in a fresh process: its verdict and its `# ` notes.
fn run_round(
    c: &Config,
    round: usize,
    runtime: f64,
    expect: &Expect,
) -> (RoundOutcome, Vec<String>) {
    let mut notes = Vec::new();
    let outcome = run_round_inner(c, round, runtime, expect, &mut notes);
    (outcome, notes)
}

fn run_round_inner(
    c: &Config,
    round: usize,
    runtime: f64,
    expect: &Expect,
    notes: &mut Vec<String>,
) -> RoundOutcome {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return RoundOutcome::Fail(format!("cannot find own executable: {e}")),
    };
    let mut child = match Command::new(exe)
        .args([
            "--run",
            &c.encode(),
            "--round",
            &round.to_string(),
            "--runtime",
            &runtime.to_string(),
            "--expect",
            &expect.encode(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(ch) => ch,
        Err(e) => return RoundOutcome::Fail(format!("cannot spawn the round's process: {e}")),
    };
    let mut out = child.stdout.take().expect("stdout was piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut out).take(1 << 20).read_to_end(&mut buf);
        buf
    });
    let limit = Duration::from_secs_f64(runtime) + Duration::from_secs(60);
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    let text = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let Some(status) = status else {
        return RoundOutcome::Fail(format!(
            "round process timed out after {} s and was killed",
            limit.as_secs()
        ));
    };
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("# ") {
            notes.push(n.to_string());
        }
        let Some(r) = line.strip_prefix(RESULT_TAG) else {
            continue;
        };
        if let Some(w) = r.strip_prefix("SKIP ") {
            return RoundOutcome::Skip(w.into());
        }
        if let Some(w) = r.strip_prefix("FAIL ") {
            return RoundOutcome::Fail(w.into());
        }
        return match serde_json::from_str::<Round>(r) {
            Ok(round) => RoundOutcome::Done(Box::new(round)),
            Err(e) => RoundOutcome::Fail(format!("unreadable round result {r:?}: {e}")),
        };
    }
    RoundOutcome::Fail(format!(
        "round process ended ({status}) without a result; it said: {}",
        text.trim()
    ))
}

// ---------------------------------------------------------------------------
// The round's own process

fn child_main(spec: &str, round: usize, runtime: f64, expect: &Expect) -> ! {
    let line = match Config::parse(spec) {
        Err(e) => format!("FAIL bad configuration: {e}"),
        Ok(c) => match measure(&c, round, Duration::from_secs_f64(runtime), expect) {
            Ok(r) => serde_json::to_string(&r).unwrap_or_else(|e| format!("FAIL encode: {e}")),
            Err(RoundOutcome::Skip(w)) => format!("SKIP {w}"),
            Err(RoundOutcome::Fail(w)) => format!("FAIL {w}"),
            Err(RoundOutcome::Done(_)) => unreachable!("measure returns rounds as Ok"),
        },
    };
    println!("{RESULT_TAG}{}", line.replace('\n', " | "));
    std::process::exit(0);
}

fn skip_or_fail(expected: bool, why: String) -> RoundOutcome {
    match bench::missing_feature(expected, &why) {
        Ok(skip) => RoundOutcome::Skip(skip),
        Err(fail) => RoundOutcome::Fail(fail),
    }
}

/// The SET before any thread exists; returns (GET_SLOTS, GET_IMMUTABLE).
fn set_hash(c: &Config, expect: &Expect) -> Result<(Option<i64>, Option<i64>), RoundOutcome> {
    let Some(b) = c.buckets else {
        return Ok((None, None));
    };
    let arg4 = u64::from(c.immutable);
    match sys::prctl_futex_hash(sys::PR_FUTEX_HASH_SET_SLOTS, b, arg4, 0) {
        Ok(_) => {}
        Err(Errno(libc::EINVAL)) if c.immutable => {
            let get_imm = sys::prctl_futex_hash(sys::PR_FUTEX_HASH_GET_IMMUTABLE, 0, 0, 0);
            return Err(skip_or_fail(
                expect.immutable,
                format!(
                    "no immutable private futex hash on this kernel: \
                     prctl(PR_FUTEX_HASH, SET_SLOTS, {b}, 1) = EINVAL, \
                     GET_IMMUTABLE = {} (FH_FLAG_IMMUTABLE was removed in 6.17; needs a patched kernel)",
                    numa::show(&get_imm)
                ),
            ));
        }
        Err(Errno(libc::EINVAL)) => {
            return Err(skip_or_fail(
                expect.private_hash,
                format!(
                    "no private futex hash on this kernel: prctl(PR_FUTEX_HASH, SET_SLOTS, {b}, 0) = EINVAL"
                ),
            ))
        }
        Err(e) => {
            return Err(RoundOutcome::Fail(format!(
                "prctl(PR_FUTEX_HASH, SET_SLOTS, {b}, {arg4}) = {e}"
            )))
        }
    }
    let slots = sys::get_slots().map_err(|e| RoundOutcome::Fail(format!("GET_SLOTS: {e}")))?;
    if slots != b as i64 {
        return Err(RoundOutcome::Fail(format!(
            "SET_SLOTS {b} succeeded but GET_SLOTS = {slots}"
        )));
    }
    let imm = if c.immutable {
        let v = sys::prctl_futex_hash(sys::PR_FUTEX_HASH_GET_IMMUTABLE, 0, 0, 0).map_err(|e| {
            RoundOutcome::Fail(format!("GET_IMMUTABLE after an immutable SET: {e}"))
        })?;
        if v != 1 {
            return Err(RoundOutcome::Fail(format!(
                "GET_IMMUTABLE = {v} after SET_SLOTS {b} with FH_FLAG_IMMUTABLE"
            )));
        }
        Some(v)
    } else {
        None
    };
    Ok((Some(slots), imm))
}

/// Where each worker runs: (CPUs to bind to, node or -1).
fn placements(c: &Config, n: usize, topo: Option<&numa::Topology>) -> Vec<(Vec<u32>, i64)> {
    let Some(t) = topo else {
        return vec![(vec![], -1); n];
    };
    let targets = t.pin_targets();
    let nodes = t.cpu_nodes();
    (0..n)
        .map(|i| match c.bind {
            Bind::None => (vec![], -1),
            Bind::Cpu if !targets.is_empty() => {
                let (cpu, node) = targets[i % targets.len()];
                (vec![cpu], node as i64)
            }
            Bind::Node if !nodes.is_empty() => {
                let node = nodes[i % nodes.len()];
                let cpus = targets
                    .iter()
                    .filter(|(_, nd)| *nd == node)
                    .map(|(c, _)| *c)
                    .collect();
                (cpus, node as i64)
            }
            _ => (vec![], -1),
        })
        .collect()
}

/// Per-thread result: operations, seconds from start to the thread's stop,
/// unexpected results.
type Work = (u64, f64, u64, Option<String>);

fn measure(
    c: &Config,
    round: usize,
    runtime: Duration,
    expect: &Expect,
) -> Result<Round, RoundOutcome> {
    // Before any thread: the first clone(CLONE_VM) would allocate the hash.
    let (slots, immutable) = set_hash(c, expect)?;
    let topo = numa::Topology::read().ok();
    let stop = Arc::new(AtomicBool::new(false));
    let (places, lock_map) = match c.mode {
        Mode::Hash => {
            let n = c
                .threads
                .or_else(|| topo.as_ref().map(|t| t.pin_targets().len()))
                .filter(|n| *n > 0)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            (placements(c, n, topo.as_ref()), None)
        }
        Mode::Numa => {
            let Some(t) = topo.as_ref() else {
                return Err(RoundOutcome::Fail(
                    "numa mode needs /sys/devices/system/node".into(),
                ));
            };
            let nodes = t.cpu_nodes();
            let map = Mapping::anon(1, false).map_err(RoundOutcome::Fail)?;
            let mut places = Vec::new();
            for (i, &node) in nodes.iter().enumerate() {
                let word = match c.numa_node {
                    NumaNode::Forced(n) => n,
                    NumaNode::Own => node,
                    NumaNode::Free => sys::FUTEX_NO_NODE,
                };
                map.set(i * 64, 0, word);
                let cpus: Vec<u32> = t
                    .pin_targets()
                    .into_iter()
                    .filter(|(_, nd)| *nd == node)
                    .map(|(c, _)| c)
                    .collect();
                for _ in 0..c.contenders {
                    places.push((cpus.clone(), node as i64));
                }
            }
            (places, Some((Arc::new(map), nodes)))
        }
    };
    let barrier = Arc::new(Barrier::new(places.len() + 1));
    let t0 = Arc::new(std::sync::OnceLock::<Instant>::new());
    let mut handles = Vec::new();
    for (i, (cpus, node)) in places.iter().enumerate() {
        let (stop_w, barrier_w, t0_w) = (stop.clone(), barrier.clone(), t0.clone());
        let cpus = cpus.clone();
        let cfg = c.clone();
        let lock = lock_map.as_ref().map(|(m, nodes)| {
            let idx = nodes.iter().position(|n| *n as i64 == *node).unwrap_or(0);
            (m.clone(), idx * 64)
        });
        let h = std::thread::Builder::new()
            .name(format!("w{i}"))
            .spawn(move || -> Work {
                let bound = if cpus.is_empty() {
                    None
                } else {
                    numa::sched_setaffinity(&cpus).err()
                };
                barrier_w.wait();
                let start = *t0_w.get_or_init(Instant::now);
                if let Some(e) = bound {
                    return (0, 0.0, 1, Some(format!("sched_setaffinity({cpus:?}): {e}")));
                }
                let (ops, bad, first) = match lock {
                    None => hash_worker(&cfg, &stop_w),
                    Some((map, off)) => numa_worker(map.uaddr(off), &stop_w),
                };
                (ops, start.elapsed().as_secs_f64(), bad, first)
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                return Err(RoundOutcome::Fail(format!("spawning worker {i}: {e}")));
            }
        }
    }
    barrier.wait();
    let start = *t0.get_or_init(Instant::now);
    std::thread::sleep(runtime.saturating_sub(start.elapsed()));
    stop.store(true, Ordering::SeqCst);
    let elapsed = start.elapsed().as_secs_f64();
    let mut per_thread = Vec::new();
    let mut problems = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok((ops, secs, bad, first)) => {
                per_thread.push(if secs > 0.0 { ops as f64 / secs } else { 0.0 });
                if bad > 0 {
                    problems.push(format!(
                        "worker {i}: {bad} unexpected results, first: {}",
                        first.unwrap_or_default()
                    ));
                }
            }
            Err(_) => problems.push(format!("worker {i} panicked")),
        }
    }
    if !problems.is_empty() {
        return Err(RoundOutcome::Fail(problems.join("; ")));
    }
    if let (Some(b), Ok(after)) = (c.buckets, sys::get_slots()) {
        if after != b as i64 {
            return Err(RoundOutcome::Fail(format!(
                "GET_SLOTS changed during the run: {b} -> {after}"
            )));
        }
    }
    if let Some((map, nodes)) = &lock_map {
        let words: Vec<String> = (0..nodes.len())
            .map(|i| numa::node_str(map.node(i * 64)))
            .collect();
        println!(
            "# lock node words after the run (lock of node {}): {}",
            numa::list_str(nodes),
            words.join(" ")
        );
    }
    Ok(Round {
        config: c.name.clone(),
        round,
        elapsed_s: elapsed,
        total: per_thread.iter().sum(),
        per_thread,
        nodes: places.iter().map(|(_, n)| *n).collect(),
        slots,
        immutable,
    })
}

/// perf's loop: FUTEX_WAIT on each of this thread's futexes with a value
/// that does not match, so the call returns EAGAIN after hashing the key
/// and taking the bucket lock.
fn hash_worker(c: &Config, stop: &AtomicBool) -> (u64, u64, Option<String>) {
    let futexes = vec![0u32; c.futexes];
    let op = if c.shared {
        futex_op::WAIT
    } else {
        futex_op::WAIT | futex_op::PRIVATE
    };
    let (mut ops, mut bad, mut first) = (0u64, 0u64, None);
    while !stop.load(Ordering::Relaxed) {
        for f in &futexes {
            let r = sys::futex(f as *const u32 as u64, op, 1234, 0, 0, 0);
            ops += 1;
            match r {
                Err(Errno(libc::EAGAIN)) => {}
                Ok(r) => {
                    bad += 1;
                    first.get_or_insert_with(|| format!("FUTEX_WAIT returned {r}, want EAGAIN"));
                }
                Err(e) => {
                    bad += 1;
                    first.get_or_insert_with(|| format!("FUTEX_WAIT: {e}"));
                }
            }
        }
    }
    (ops, bad, first)
}

/// futex_numa's contender: futex2_wait with FUTEX2_NUMA on the node's lock
/// with a value it never holds (EAGAIN after the bucket lock of the node
/// the lock's node word names).
fn numa_worker(uaddr: u64, stop: &AtomicBool) -> (u64, u64, Option<String>) {
    let (mut ops, mut bad, mut first) = (0u64, 0u64, None);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            let r = sys::futex_wait(
                uaddr as *const u32,
                0xffff_ffff,
                FUTEX_BITSET_MATCH_ANY,
                numa::PRIVATE_NUMA,
                None,
                0,
            );
            ops += 1;
            if r != Err(Errno(libc::EAGAIN)) {
                bad += 1;
                first.get_or_insert_with(|| format!("futex_wait(NUMA): {}", numa::show(&r)));
            }
        }
    }
    (ops, bad, first)
}
