//! HTTP for the archive client: one agent, GET with retries of transient
//! failures, progress reports while a body is read, and the size/SHA-256
//! check of what arrived. Knows nothing of the archive's layout.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use super::DebianError;

/// Download progress, for drawing a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// What is being downloaded (a file name).
    pub what: &'a str,
    /// Bytes received so far.
    pub done: u64,
    /// Expected total, when known.
    pub total: Option<u64>,
}

/// The agent plus the retry policy.
#[derive(Debug, Clone)]
pub(super) struct Http {
    agent: ureq::Agent,
    /// How often a transient failure is retried.
    pub(super) retries: u32,
    /// The wait before the first retry (doubled for each further one).
    pub(super) retry_delay: Duration,
}

impl Http {
    /// An agent with bounded waits; 2 retries, 1 s apart at first.
    pub(super) fn new() -> Http {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(20)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .user_agent(concat!("futex-harness/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http {
            agent,
            retries: 2,
            retry_delay: Duration::from_secs(1),
        }
    }

    /// One GET (no retry); an error status is an error.
    pub(super) fn get(&self, url: &str) -> Result<ureq::http::Response<ureq::Body>, DebianError> {
        tracing::debug!("GET {url}");
        self.agent.get(url).call().map_err(|e| match e {
            ureq::Error::StatusCode(status) => DebianError::HttpStatus {
                url: url.to_string(),
                status,
            },
            e => DebianError::Http {
                url: url.to_string(),
                source: Box::new(e),
            },
        })
    }

    /// The body of `url`, at most `limit` bytes, with retries.
    pub(super) fn get_bytes(&self, url: &str, limit: u64) -> Result<Vec<u8>, DebianError> {
        self.retrying(url, || {
            let resp = self.get(url)?;
            let mut buf = Vec::new();
            resp.into_body()
                .into_reader()
                .take(limit)
                .read_to_end(&mut buf)
                .map_err(|source| DebianError::Transfer {
                    url: url.to_string(),
                    source,
                })?;
            Ok(buf)
        })
    }

    /// Runs `attempt` again while it fails transiently, up to the retry
    /// limit, waiting twice as long each time.
    pub(super) fn retrying<T>(
        &self,
        url: &str,
        mut attempt: impl FnMut() -> Result<T, DebianError>,
    ) -> Result<T, DebianError> {
        let mut delay = self.retry_delay;
        let mut tries = 0;
        loop {
            match attempt() {
                Err(e) if e.is_transient() && tries < self.retries => {
                    tries += 1;
                    tracing::warn!("{e}; retry {tries}/{} of {url} in {delay:?}", self.retries);
                    std::thread::sleep(delay);
                    delay *= 2;
                }
                r => return r,
            }
        }
    }
}

/// Whether what arrived is what the signed metadata promised.
pub(super) fn check_sum(
    url: &str,
    expected_sha256: &str,
    expected_size: u64,
    actual_sha256: &str,
    actual_size: u64,
) -> Result<(), DebianError> {
    if actual_size == expected_size && actual_sha256.eq_ignore_ascii_case(expected_sha256) {
        Ok(())
    } else {
        Err(DebianError::Checksum {
            url: url.to_string(),
            expected_sha256: expected_sha256.to_string(),
            actual_sha256: actual_sha256.to_string(),
            expected_size,
            actual_size,
        })
    }
}

/// Copies at most `limit` bytes; more than that is a checksum failure (a
/// server sending more than the signed size is not trusted with the disk).
pub(super) fn copy_limited(
    r: &mut dyn Read,
    w: &mut dyn Write,
    limit: u64,
    url: &str,
) -> Result<(), DebianError> {
    let mut buf = vec![0u8; 256 << 10];
    let mut done = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(DebianError::Transfer {
                    url: url.to_string(),
                    source,
                })
            }
        };
        done += n as u64;
        if done > limit {
            return Err(DebianError::Checksum {
                url: url.to_string(),
                expected_sha256: "(any)".to_string(),
                actual_sha256: "(not computed: too large)".to_string(),
                expected_size: limit,
                actual_size: done,
            });
        }
        w.write_all(&buf[..n]).map_err(|source| DebianError::Io {
            path: PathBuf::from("<cache temporary file>"),
            source,
        })?;
    }
}

/// Reports progress at most every 256 KiB and at the end.
pub(super) struct ProgressReader<'p, R> {
    inner: R,
    what: &'p str,
    total: Option<u64>,
    done: u64,
    reported: u64,
    cb: &'p mut dyn FnMut(Progress),
}

impl<'p, R> ProgressReader<'p, R> {
    /// Wraps `inner`, reporting `0 of total` right away.
    pub(super) fn new(
        inner: R,
        what: &'p str,
        total: Option<u64>,
        cb: &'p mut dyn FnMut(Progress),
    ) -> Self {
        cb(Progress {
            what,
            done: 0,
            total,
        });
        ProgressReader {
            inner,
            what,
            total,
            done: 0,
            reported: 0,
            cb,
        }
    }
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        if n == 0 || self.done - self.reported >= 256 << 10 {
            if self.reported != self.done || n == 0 {
                (self.cb)(Progress {
                    what: self.what,
                    done: self.done,
                    total: self.total,
                });
            }
            self.reported = self.done;
        }
        Ok(n)
    }
}
