//! The results history: every `run` and `matrix` recorded in one SQLite
//! file (`<out>/history.sqlite` unless `--history FILE|none`), so runs can
//! be listed (`harness history`) and compared (`harness compare`) long
//! after their JSON files are gone. docs/history.md has the schema.
//!
//! Each cell is written in a transaction of its own as it finishes: a run
//! killed by SIGKILL leaves a consistent file with the cells it finished
//! and its run not marked finished. WAL mode and a busy timeout let two
//! runs (two shards on one machine) write one file at once.
//!
//! Architecture invariant: the history stores [`crate::results`] types and
//! gives them back ([`Database::results`]); it knows no events or
//! reporters (`reporter/history.rs` feeds it).

use crate::results::{self, Results};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The layout of the file (`PRAGMA user_version`); a change that old
/// readers cannot read bumps it and adds a step to [`MIGRATIONS`].
pub const SCHEMA_VERSION: i32 = 1;

/// The history file under an output directory.
pub const FILE_NAME: &str = "history.sqlite";

/// How long a writer waits for another (a shard's cell) to commit.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// `MIGRATIONS[i]` takes the file from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &["
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    started REAL NOT NULL,
    harness_version TEXT NOT NULL,
    host TEXT NOT NULL,
    accel TEXT,
    qemu_version TEXT NOT NULL,
    what TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 0,
    interrupted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE cells (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    kernel TEXT NOT NULL,
    kernel_name TEXT NOT NULL,
    topology TEXT NOT NULL,
    suite TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    duration_s REAL NOT NULL,
    accel TEXT,
    kernel_version TEXT,
    kernel_source TEXT,
    kernel_build TEXT,
    kernel_config TEXT,
    kernel_commit TEXT,
    pass INTEGER NOT NULL,
    fail INTEGER NOT NULL,
    xfail INTEGER NOT NULL,
    skip INTEGER NOT NULL
);
CREATE INDEX cells_run ON cells(run_id);
CREATE TABLE cases (
    id INTEGER PRIMARY KEY,
    cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT,
    repeat_runs INTEGER,
    repeat_failures INTEGER
);
CREATE INDEX cases_cell ON cases(cell_id);
CREATE TABLE bench (
    id INTEGER PRIMARY KEY,
    cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    test TEXT NOT NULL,
    config TEXT NOT NULL,
    spec TEXT NOT NULL,
    ops_per_s REAL NOT NULL,
    sd REAL NOT NULL,
    n INTEGER NOT NULL,
    min REAL NOT NULL,
    max REAL NOT NULL,
    threads INTEGER NOT NULL
);
CREATE INDEX bench_cell ON bench(cell_id);
CREATE TABLE kernel_reports (
    id INTEGER PRIMARY KEY,
    cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    test TEXT,
    line INTEGER NOT NULL
);
CREATE INDEX kernel_reports_cell ON kernel_reports(cell_id);
"];

/// Why the history could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// SQLite refused (the file is not a database, the disk is full, ...).
    #[error("history {}: {source}", path.display())]
    Sql {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// Its directory could not be created.
    #[error("history {}: {source}", path.display())]
    Dir {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Written by a newer harness, in a layout this one cannot read.
    #[error("history {}: layout version {found}, newer than this harness's {SCHEMA_VERSION}", path.display())]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its `user_version`.
        found: i32,
    },
    /// A file to read that does not exist.
    #[error("history {}: no such file (runs write it under --out unless --history none)", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A run asked for that the history does not have.
    #[error("history {}: no run {what}", path.display())]
    NoRun {
        /// The file.
        path: PathBuf,
        /// The run as asked (`last`, `previous`, an id).
        what: String,
    },
}

impl HistoryError {
    /// A missing file or run is the user's input; SQLite failing is the host's.
    pub fn into_error(self) -> crate::error::Error {
        match self {
            HistoryError::Missing { .. }
            | HistoryError::NoRun { .. }
            | HistoryError::Newer { .. } => crate::error::Error::usage(self),
            _ => crate::error::Error::infra(self),
        }
    }
}

/// Where a run's history goes: `--history FILE|none`, or the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Target {
    /// `<out>/history.sqlite`.
    #[default]
    Default,
    /// `--history FILE`.
    File(PathBuf),
    /// `--history none`.
    Nowhere,
}

impl Target {
    /// `--history`'s value: `none`, or a file.
    pub fn parse(s: &str) -> Target {
        if s == "none" {
            Target::Nowhere
        } else {
            Target::File(s.into())
        }
    }

    /// The file to write for a run whose output directory is `out`.
    pub fn path(&self, out: &Path) -> Option<PathBuf> {
        match self {
            Target::Default => Some(out.join(FILE_NAME)),
            Target::File(p) => Some(p.clone()),
            Target::Nowhere => None,
        }
    }

    /// The file given explicitly, for checking before any work.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Target::File(p) => Some(p),
            _ => None,
        }
    }
}

/// A run as it starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRun {
    /// Seconds since the epoch.
    pub started: f64,
    /// The harness's version.
    pub harness_version: String,
    /// The machine's name.
    pub host: String,
    /// QEMU's version line.
    pub qemu_version: String,
    /// What was run: the command line.
    pub what: String,
}

/// One run as `harness history` lists it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RunRow {
    /// Its id (`harness compare ID ...`).
    pub id: i64,
    /// Seconds since the epoch.
    pub started: f64,
    /// What was run.
    pub what: String,
    /// The accelerator of its first booted cell.
    pub accel: Option<String>,
    /// Whether it reached its end (false: killed, or still running).
    pub finished: bool,
    /// Whether a signal stopped it.
    pub interrupted: bool,
    /// Cells recorded.
    pub cells: usize,
    /// Its cases by status, over its cells.
    pub counts: results::Counts,
}

/// An open history file.
pub struct Database {
    conn: Connection,
    path: PathBuf,
}

/// The machine's name (`/proc/sys/kernel/hostname`), empty when unknown.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The command line of this process, as the `what` of its run.
pub fn command_line() -> String {
    let words: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("harness {}", words.join(" "))
}

impl Database {
    /// Opens (creating it and its directory if needed) the history at `path`.
    pub fn open(path: &Path) -> Result<Database, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Dir {
                path: path.into(),
                source,
            })?;
        }
        Database::connect(path)
    }

    /// Opens an existing history at `path` (for reading).
    pub fn open_existing(path: &Path) -> Result<Database, HistoryError> {
        if !path.is_file() {
            return Err(HistoryError::Missing { path: path.into() });
        }
        Database::connect(path)
    }

    fn connect(path: &Path) -> Result<Database, HistoryError> {
        let sql = |source| HistoryError::Sql {
            path: path.into(),
            source,
        };
        let conn = Connection::open(path).map_err(sql)?;
        // Before anything else: every statement below may meet a writer.
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        // WAL: readers never block the writer, and a crash mid-write
        // leaves the last committed state. NORMAL is durable against a
        // killed process (not a power cut), which is what a run meets.
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .map_err(sql)?;
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(sql)?;
        let mut db = Database {
            conn,
            path: path.into(),
        };
        db.migrate()?;
        Ok(db)
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> HistoryError + '_ {
        move |source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        }
    }

    /// Brings the file to [`SCHEMA_VERSION`], in one immediate transaction
    /// so two runs creating it at once do it once.
    fn migrate(&mut self) -> Result<(), HistoryError> {
        let path = self.path.clone();
        let sql = |source| HistoryError::Sql {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let found: i32 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if found > SCHEMA_VERSION {
            return Err(HistoryError::Newer {
                path: path.clone(),
                found,
            });
        }
        for step in &MIGRATIONS[found.max(0) as usize..] {
            tx.execute_batch(step).map_err(sql)?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// Records a run as it starts; returns its id.
    pub fn begin_run(&mut self, run: &NewRun) -> Result<i64, HistoryError> {
        self.conn
            .execute(
                "INSERT INTO runs (started, harness_version, host, qemu_version, what)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    run.started,
                    run.harness_version,
                    run.host,
                    run.qemu_version,
                    run.what
                ],
            )
            .map_err(self.sql())?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records one finished cell of run `run` with its cases, bench rows
    /// and kernel reports, all or nothing.
    pub fn add_cell(&mut self, run: i64, cell: &results::Cell) -> Result<(), HistoryError> {
        let path = self.path.clone();
        let sql = |source| HistoryError::Sql {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        insert_cell(&tx, run, cell).map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// Marks run `run` as having reached its end.
    pub fn finish_run(&mut self, run: i64, interrupted: bool) -> Result<(), HistoryError> {
        self.conn
            .execute(
                "UPDATE runs SET finished = 1, interrupted = ?2 WHERE id = ?1",
                params![run, interrupted],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Every run, newest first, with its counts.
    pub fn runs(&self) -> Result<Vec<RunRow>, HistoryError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT r.id, r.started, r.what, r.accel, r.finished, r.interrupted,
                        COUNT(c.id), COALESCE(SUM(c.pass), 0), COALESCE(SUM(c.fail), 0),
                        COALESCE(SUM(c.xfail), 0), COALESCE(SUM(c.skip), 0)
                 FROM runs r LEFT JOIN cells c ON c.run_id = r.id
                 GROUP BY r.id ORDER BY r.id DESC",
            )
            .map_err(self.sql())?;
        let rows = st
            .query_map([], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    started: r.get(1)?,
                    what: r.get(2)?,
                    accel: r.get(3)?,
                    finished: r.get(4)?,
                    interrupted: r.get(5)?,
                    cells: r.get::<_, i64>(6)? as usize,
                    counts: results::Counts {
                        pass: r.get::<_, i64>(7)? as usize,
                        fail: r.get::<_, i64>(8)? as usize,
                        xfail: r.get::<_, i64>(9)? as usize,
                        skip: r.get::<_, i64>(10)? as usize,
                    },
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The id of the run `what` names: `last` (the newest), `previous`
    /// (the one before it) or an id.
    pub fn resolve(&self, what: &str) -> Result<i64, HistoryError> {
        let offset = match what {
            "last" => Some(0),
            "previous" => Some(1),
            _ => None,
        };
        let found: Option<i64> = match (offset, what.parse::<i64>()) {
            (Some(o), _) => self
                .conn
                .query_row(
                    "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                    [o],
                    |r| r.get(0),
                )
                .optional()
                .map_err(self.sql())?,
            (None, Ok(id)) => self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()
                .map_err(self.sql())?,
            (None, Err(_)) => None,
        };
        found.ok_or_else(|| HistoryError::NoRun {
            path: self.path.clone(),
            what: what.to_string(),
        })
    }

    /// Run `run` as a results document: what the comparison reads, the
    /// same as a JSON results file's (the fields the history keeps).
    pub fn results(&self, run: i64) -> Result<Results, HistoryError> {
        let sql = self.sql();
        let meta = self
            .conn
            .query_row(
                "SELECT harness_version, qemu_version, started FROM runs WHERE id = ?1",
                [run],
                |r| {
                    Ok(results::Run {
                        harness_version: r.get(0)?,
                        qemu_version: r.get(1)?,
                        started: r.get(2)?,
                        ..results::Run::default()
                    })
                },
            )
            .optional()
            .map_err(&sql)?
            .ok_or_else(|| HistoryError::NoRun {
                path: self.path.clone(),
                what: run.to_string(),
            })?;
        let cells = read_cells(&self.conn, run).map_err(&sql)?;
        Ok(Results {
            schema_version: results::SCHEMA_VERSION,
            run: meta,
            cells,
        })
    }
}

fn insert_cell(tx: &rusqlite::Transaction, run: i64, c: &results::Cell) -> rusqlite::Result<()> {
    let k = c.kernel_facts.as_ref();
    let accel = c.vm.as_ref().map(|v| v.accel.clone());
    tx.execute(
        "INSERT INTO cells (run_id, name, kernel, kernel_name, topology, suite, status, error,
             duration_s, accel, kernel_version, kernel_source, kernel_build, kernel_config,
             kernel_commit, pass, fail, xfail, skip)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        params![
            run,
            c.name,
            c.kernel,
            c.kernel_name,
            c.topology,
            c.suite,
            c.status,
            c.error,
            c.duration_s,
            accel,
            k.and_then(|k| k.version.clone()),
            k.map(|k| k.source.clone()),
            k.map(|k| k.build.clone()),
            k.map(|k| k.config.clone()),
            k.and_then(|k| k.git_commit.clone()),
            c.counts.pass as i64,
            c.counts.fail as i64,
            c.counts.xfail as i64,
            c.counts.skip as i64,
        ],
    )?;
    let cell = tx.last_insert_rowid();
    if accel.is_some() {
        // The run's accelerator is its first booted cell's.
        tx.execute(
            "UPDATE runs SET accel = ?2 WHERE id = ?1 AND accel IS NULL",
            params![run, accel],
        )?;
    }
    let mut case = tx.prepare_cached(
        "INSERT INTO cases (cell_id, name, status, message, repeat_runs, repeat_failures)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for x in &c.cases {
        let r = x.repeat.as_ref();
        case.execute(params![
            cell,
            x.name,
            x.status,
            x.message,
            r.map(|r| r.runs),
            r.map(|r| r.failures)
        ])?;
    }
    let mut bench = tx.prepare_cached(
        "INSERT INTO bench (cell_id, test, config, spec, ops_per_s, sd, n, min, max, threads)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for b in &c.bench {
        bench.execute(params![
            cell,
            b.test,
            b.config,
            b.spec,
            b.ops_per_s,
            b.sd,
            b.n as i64,
            b.min,
            b.max,
            b.threads as i64
        ])?;
    }
    let mut report = tx.prepare_cached(
        "INSERT INTO kernel_reports (cell_id, kind, title, test, line) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for r in c.vm.iter().flat_map(|v| &v.kernel_reports) {
        report.execute(params![cell, r.kind, r.title, r.test, r.line as i64])?;
    }
    Ok(())
}

fn read_cells(conn: &Connection, run: i64) -> rusqlite::Result<Vec<results::Cell>> {
    let mut st = conn.prepare(
        "SELECT id, name, kernel, kernel_name, topology, suite, status, error, duration_s,
                accel, kernel_version, kernel_source, kernel_build, kernel_config,
                kernel_commit, pass, fail, xfail, skip
         FROM cells WHERE run_id = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([run], |r| {
        let source: Option<String> = r.get(11)?;
        let facts = source.map(|source| -> rusqlite::Result<_> {
            Ok(crate::events::KernelFacts {
                version: r.get(10)?,
                source,
                build: r.get::<_, Option<String>>(12)?.unwrap_or_default(),
                config: r.get::<_, Option<String>>(13)?.unwrap_or_default(),
                git_commit: r.get(14)?,
                ..Default::default()
            })
        });
        let accel: Option<String> = r.get(9)?;
        Ok((
            r.get::<_, i64>(0)?,
            results::Cell {
                name: r.get(1)?,
                kernel: r.get(2)?,
                kernel_name: r.get(3)?,
                topology: r.get(4)?,
                suite: r.get(5)?,
                status: r.get(6)?,
                error: r.get(7)?,
                duration_s: r.get(8)?,
                vm: accel.map(|accel| results::Vm {
                    accel,
                    ..Default::default()
                }),
                kernel_facts: facts.transpose()?,
                counts: results::Counts {
                    pass: r.get::<_, i64>(15)? as usize,
                    fail: r.get::<_, i64>(16)? as usize,
                    xfail: r.get::<_, i64>(17)? as usize,
                    skip: r.get::<_, i64>(18)? as usize,
                },
                ..Default::default()
            },
        ))
    })?;
    let mut cells = Vec::new();
    for row in rows {
        let (id, mut cell) = row?;
        cell.cases = read_cases(conn, id)?;
        cell.bench = read_bench(conn, id)?;
        let reports = read_reports(conn, id)?;
        if !reports.is_empty() {
            cell.vm.get_or_insert_with(Default::default).kernel_reports = reports;
        }
        cells.push(cell);
    }
    Ok(cells)
}

fn read_cases(conn: &Connection, cell: i64) -> rusqlite::Result<Vec<results::Case>> {
    let mut st = conn.prepare_cached(
        "SELECT name, status, message, repeat_runs, repeat_failures
         FROM cases WHERE cell_id = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([cell], |r| {
        let runs: Option<u32> = r.get(3)?;
        let failures: Option<u32> = r.get(4)?;
        Ok(results::Case {
            name: r.get(0)?,
            status: r.get(1)?,
            message: r.get(2)?,
            repeat: runs.map(|runs| results::CaseRepeat {
                runs,
                failures: failures.unwrap_or(0),
                first_failure: None,
            }),
            ..Default::default()
        })
    })?;
    rows.collect()
}

fn read_bench(conn: &Connection, cell: i64) -> rusqlite::Result<Vec<results::Bench>> {
    let mut st = conn.prepare_cached(
        "SELECT test, config, spec, ops_per_s, sd, n, min, max, threads
         FROM bench WHERE cell_id = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([cell], |r| {
        Ok(results::Bench {
            test: r.get(0)?,
            config: r.get(1)?,
            spec: r.get(2)?,
            ops_per_s: r.get(3)?,
            sd: r.get(4)?,
            n: r.get::<_, i64>(5)? as usize,
            min: r.get(6)?,
            max: r.get(7)?,
            threads: r.get::<_, i64>(8)? as usize,
        })
    })?;
    rows.collect()
}

fn read_reports(conn: &Connection, cell: i64) -> rusqlite::Result<Vec<results::KernelReport>> {
    let mut st = conn.prepare_cached(
        "SELECT kind, title, test, line FROM kernel_reports WHERE cell_id = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([cell], |r| {
        Ok(results::KernelReport {
            kind: r.get(0)?,
            title: r.get(1)?,
            test: r.get(2)?,
            // The history keeps the test; the case is in the run's JSON.
            case: None,
            line: r.get::<_, i64>(3)? as usize,
            excerpt: String::new(),
        })
    })?;
    rows.collect()
}

/// `started` as `YYYY-MM-DD HH:MM:SS` UTC.
fn when(started: f64) -> String {
    chrono::DateTime::from_timestamp(started as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "?".into())
}

/// The runs as `harness history` prints them: a table, newest first.
pub fn listing(runs: &[RunRow]) -> String {
    use std::fmt::Write as _;
    let mut t = format!(
        "{:>4}  {:<19}  {:<8}  {:>5}  {:>5}  {:>5}  {:>5}  {:>5}  {:<5}  WHAT\n",
        "ID", "STARTED (UTC)", "STATE", "CELLS", "PASS", "FAIL", "XFAIL", "SKIP", "ACCEL"
    );
    for r in runs {
        let state = match (r.finished, r.interrupted) {
            (true, false) => "finished",
            (true, true) => "stopped",
            // Killed, or still running.
            (false, _) => "open",
        };
        let _ = writeln!(
            t,
            "{:>4}  {:<19}  {:<8}  {:>5}  {:>5}  {:>5}  {:>5}  {:>5}  {:<5}  {}",
            r.id,
            when(r.started),
            state,
            r.cells,
            r.counts.pass,
            r.counts.fail,
            r.counts.xfail,
            r.counts.skip,
            r.accel.as_deref().unwrap_or("-"),
            r.what
        );
    }
    if runs.is_empty() {
        t.push_str("(no runs)\n");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(name: &str, status: &str, cases: &[(&str, &str)]) -> results::Cell {
        results::Cell {
            name: name.into(),
            kernel: "debian:7.3".into(),
            kernel_name: "debian-7.3".into(),
            topology: "1n".into(),
            suite: "smoke".into(),
            status: status.into(),
            duration_s: 1.5,
            cases: cases
                .iter()
                .map(|(n, s)| results::Case {
                    name: n.to_string(),
                    status: s.to_string(),
                    message: (*s != "pass").then(|| "why".to_string()),
                    ..Default::default()
                })
                .collect(),
            counts: results::Counts {
                pass: cases.iter().filter(|c| c.1 == "pass").count(),
                fail: cases.iter().filter(|c| c.1 == "fail").count(),
                ..Default::default()
            },
            vm: Some(results::Vm {
                accel: "tcg".into(),
                kernel_reports: vec![results::KernelReport {
                    kind: "warning".into(),
                    title: "WARNING: at x".into(),
                    test: Some("smoke".into()),
                    case: None,
                    line: 3,
                    excerpt: "long".into(),
                }],
                ..Default::default()
            }),
            kernel_facts: Some(crate::events::KernelFacts {
                kind: "debian".into(),
                version: Some("7.3".into()),
                source: "debian:linux-7.3".into(),
                build: "debian:linux-image-7.3-cloud-amd64".into(),
                config: "linux-image-7.3-cloud-amd64".into(),
                ..Default::default()
            }),
            bench: vec![results::Bench {
                test: "futex-bench".into(),
                config: "private".into(),
                ops_per_s: 1e6,
                sd: 1e4,
                n: 3,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn new_run(what: &str) -> NewRun {
        NewRun {
            started: 1.0,
            harness_version: "0.1.0".into(),
            host: "h".into(),
            qemu_version: "QEMU 10".into(),
            what: what.into(),
        }
    }

    #[test]
    fn a_run_and_its_cells_come_back() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sub/history.sqlite");
        let mut db = Database::open(&path).unwrap();
        let id = db.begin_run(&new_run("harness matrix")).unwrap();
        let c = cell("k/t/s", "failed", &[("a/x", "pass"), ("a/y", "fail")]);
        db.add_cell(id, &c).unwrap();
        let runs = db.runs().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].what, "harness matrix");
        assert_eq!(runs[0].accel.as_deref(), Some("tcg"));
        assert!(!runs[0].finished);
        assert_eq!(
            (runs[0].cells, runs[0].counts.pass, runs[0].counts.fail),
            (1, 1, 1)
        );
        db.finish_run(id, false).unwrap();
        assert!(db.runs().unwrap()[0].finished);
        assert_eq!(
            listing(&db.runs().unwrap()),
            "  ID  STARTED (UTC)        STATE     CELLS   PASS   FAIL  XFAIL   SKIP  ACCEL  WHAT\n   \
             1  1970-01-01 00:00:01  finished      1      1      1      0      0  tcg    harness matrix\n"
        );
        let back = db.results(id).unwrap();
        let got = &back.cells[0];
        assert_eq!(got.name, "k/t/s");
        assert_eq!(got.cases, c.cases);
        assert_eq!(got.bench, c.bench);
        let facts = got.kernel_facts.as_ref().unwrap();
        assert_eq!(facts.build, "debian:linux-image-7.3-cloud-amd64");
        let reports = &got.vm.as_ref().unwrap().kernel_reports;
        assert_eq!(reports[0].title, "WARNING: at x");
        // A reopened file keeps its layout version and its rows.
        drop(db);
        let db = Database::open_existing(&path).unwrap();
        assert_eq!(db.runs().unwrap().len(), 1);
    }

    #[test]
    fn last_previous_and_ids_resolve() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("h.sqlite");
        let mut db = Database::open(&path).unwrap();
        let a = db.begin_run(&new_run("a")).unwrap();
        let b = db.begin_run(&new_run("b")).unwrap();
        assert_eq!(db.resolve("last").unwrap(), b);
        assert_eq!(db.resolve("previous").unwrap(), a);
        assert_eq!(db.resolve(&a.to_string()).unwrap(), a);
        assert!(matches!(db.resolve("99"), Err(HistoryError::NoRun { .. })));
        assert!(matches!(
            db.resolve("yesterday"),
            Err(HistoryError::NoRun { .. })
        ));
        assert!(matches!(
            Database::open_existing(&d.path().join("none.sqlite")),
            Err(HistoryError::Missing { .. })
        ));
    }

    #[test]
    fn a_newer_layout_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("h.sqlite");
        drop(Database::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        assert!(matches!(
            Database::open(&path),
            Err(HistoryError::Newer { found, .. }) if found == SCHEMA_VERSION + 1
        ));
    }

    #[test]
    fn two_writers_at_once_both_land() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("h.sqlite");
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut db = Database::open(&path).unwrap();
                    let id = db.begin_run(&new_run(&format!("shard {w}"))).unwrap();
                    for i in 0..25 {
                        let c = cell(&format!("k/t/s{i}"), "passed", &[("a/x", "pass")]);
                        db.add_cell(id, &c).unwrap();
                    }
                    db.finish_run(id, false).unwrap();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let runs = Database::open_existing(&path).unwrap().runs().unwrap();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r.cells == 25 && r.finished));
    }

    #[test]
    fn a_transaction_dropped_without_commit_leaves_a_sound_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("h.sqlite");
        let mut db = Database::open(&path).unwrap();
        let id = db.begin_run(&new_run("r")).unwrap();
        db.add_cell(id, &cell("k/t/done", "passed", &[("a/x", "pass")]))
            .unwrap();
        {
            // A cell half written, as a killed process leaves it.
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .unwrap();
            insert_cell(&tx, id, &cell("k/t/half", "passed", &[("a/x", "pass")])).unwrap();
        }
        drop(db);
        let db = Database::open_existing(&path).unwrap();
        let ok: String = db
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        let back = db.results(id).unwrap();
        let names: Vec<&str> = back.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["k/t/done"]);
    }
}
