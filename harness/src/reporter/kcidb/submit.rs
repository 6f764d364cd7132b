//! Submitting a document to a KCIDB-ng REST service: `POST <base>/submit`
//! with a bearer token, then `GET <base>/status?id=<id>` until the
//! submission is processed, failed, or the wait is over. Nothing is
//! retried: a refused or failed request is one clear error.
//!
//! The token comes from the environment only ([`TOKEN_ENV`]); it is never
//! printed, logged (ureq's debug log redacts `Authorization`; the binary
//! caps ureq's wire-level trace log) or put into an error.

use std::time::{Duration, Instant};

/// The environment variable holding the submission token.
pub const TOKEN_ENV: &str = "KCIDB_TOKEN";
/// Longest server answer read.
const MAX_ANSWER: u64 = 64 * 1024;
/// Longest server message put into an error.
const MAX_MESSAGE: usize = 300;

/// A bearer token: shown as `<redacted>` by `Debug`, never by `Display`.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// The token in `$var`.
    pub fn from_env(var: &str) -> Result<Token, SubmitError> {
        match std::env::var(var) {
            Ok(t) if !t.trim().is_empty() => Ok(Token(t.trim().to_string())),
            _ => Err(SubmitError::NoToken { var: var.into() }),
        }
    }

    /// A token given by a program (tests).
    pub fn new(token: impl Into<String>) -> Token {
        Token(token.into())
    }
}

/// Why a submission did not go through.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// No token in the environment.
    #[error(
        "--submit needs the submission token in ${var} (it is never taken from the command line)"
    )]
    NoToken {
        /// The variable.
        var: String,
    },
    /// The URL is unusable (its text is shown only when it holds no credentials).
    #[error("--submit {shown}: {why}")]
    BadUrl {
        /// The URL, or a placeholder when it had credentials in it.
        shown: String,
        /// What is wrong.
        why: String,
    },
    /// The service refused the request (4xx): the token or the document.
    #[error("KCIDB refused {what} (HTTP {status} from {url}): {message}")]
    Refused {
        /// `the submission`, `the status query`.
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// The endpoint.
        url: String,
        /// The service's message.
        message: String,
    },
    /// The service failed (5xx).
    #[error("KCIDB failed {what} (HTTP {status} from {url}): {message}")]
    Server {
        /// `the submission`, `the status query`.
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// The endpoint.
        url: String,
        /// The service's message.
        message: String,
    },
    /// The request did not get an answer.
    #[error("KCIDB at {url}: {source}")]
    Transport {
        /// The endpoint.
        url: String,
        /// Why.
        #[source]
        source: Box<ureq::Error>,
    },
    /// The answer is not what KCIDB-ng says.
    #[error("KCIDB at {url}: unexpected answer: {why}")]
    BadAnswer {
        /// The endpoint.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// The service took the submission, then rejected it.
    #[error("KCIDB submission {id} {status}: {message}")]
    Rejected {
        /// The submission id.
        id: String,
        /// `failed`, `notfound`, `error`.
        status: String,
        /// The service's message.
        message: String,
    },
}

impl SubmitError {
    /// Whether the user's input (token, URL, document) is at fault rather
    /// than the service or the network.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            SubmitError::NoToken { .. } | SubmitError::BadUrl { .. } | SubmitError::Refused { .. }
        )
    }
}

/// How long to wait for the service to process a submission.
#[derive(Debug, Clone, Copy)]
pub struct Poll {
    /// Stop asking after this long (zero: do not ask).
    pub timeout: Duration,
    /// Between two status queries.
    pub interval: Duration,
}

/// What the service said of a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The submission's id.
    pub id: String,
    /// The last status: `processed`, or (the wait over) `ready`,
    /// `inprogress`, `ok` (accepted, not yet looked at).
    pub status: String,
    /// The service's last message.
    pub message: String,
}

/// The `/submit` and `/status` endpoints of a service URL (its base, or
/// its `/submit`); credentials in the URL are refused.
pub fn endpoints(service: &str) -> Result<(String, String), SubmitError> {
    let bad = |why: &str| SubmitError::BadUrl {
        shown: if service.contains('@') {
            "<URL with credentials>".into()
        } else {
            service.into()
        },
        why: why.into(),
    };
    let rest = service
        .strip_prefix("https://")
        .or_else(|| service.strip_prefix("http://"))
        .ok_or_else(|| bad("expected an http:// or https:// URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(bad(&format!(
            "credentials in the URL are not used; put the token in ${TOKEN_ENV}"
        )));
    }
    if authority.is_empty() || service.contains(char::is_whitespace) || service.contains(['?', '#'])
    {
        return Err(bad("expected a service URL such as https://host/"));
    }
    let base = service.trim_end_matches('/');
    let base = base.strip_suffix("/submit").unwrap_or(base);
    Ok((format!("{base}/submit"), format!("{base}/status")))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_global(Some(Duration::from_secs(300)))
        .user_agent(concat!("futex-harness/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// `{"id", "status", "message"}`: what KCIDB-ng answers on both endpoints.
#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: Option<String>,
}

/// Bounded, one line, for an error message.
fn short(s: &str) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.trim();
    match one.char_indices().nth(MAX_MESSAGE) {
        Some((i, _)) => format!("{}...", &one[..i]),
        None => one.to_string(),
    }
}

/// Reads a response: the parsed answer on 2xx, the error for 4xx/5xx.
fn answer(
    what: &'static str,
    url: &str,
    resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<(u16, Answer), SubmitError> {
    let mut resp = resp.map_err(|e| SubmitError::Transport {
        url: url.into(),
        source: Box::new(e),
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_string()
        .unwrap_or_default();
    let parsed: Option<Answer> = serde_json::from_str(&body).ok();
    let message = || {
        short(
            parsed
                .as_ref()
                .and_then(|a| a.message.clone())
                .as_deref()
                .unwrap_or(&body),
        )
    };
    match status {
        200..=299 => parsed
            .map(|a| (status, a))
            .ok_or_else(|| SubmitError::BadAnswer {
                url: url.into(),
                why: format!("HTTP {status} without a JSON status: {}", short(&body)),
            }),
        // KCIDB-ng answers an unknown id with 404 and a status.
        404 if what == "the status query" && parsed.is_some() => Ok((
            status,
            parsed.unwrap_or(Answer {
                id: String::new(),
                status: String::new(),
                message: None,
            }),
        )),
        400..=499 => Err(SubmitError::Refused {
            what,
            status,
            url: url.into(),
            message: message(),
        }),
        _ => Err(SubmitError::Server {
            what,
            status,
            url: url.into(),
            message: message(),
        }),
    }
}

/// Posts `document` to `service` with `token`, then polls its status as
/// `poll` says; `say` gets one line per step.
pub fn submit(
    service: &str,
    token: &Token,
    document: &[u8],
    poll: Poll,
    say: &mut dyn FnMut(&str),
) -> Result<Submitted, SubmitError> {
    let (submit_url, status_url) = endpoints(service)?;
    let agent = agent();
    let bearer = format!("Bearer {}", token.0);
    let resp = agent
        .post(&submit_url)
        .header("Authorization", &bearer)
        .content_type("application/json")
        .send(document);
    let (_, a) = answer("the submission", &submit_url, resp)?;
    if a.id.is_empty() || !a.id.chars().all(|c| c.is_ascii_alphanumeric()) || a.status == "error" {
        return Err(SubmitError::BadAnswer {
            url: submit_url,
            why: format!(
                "no submission id (status {:?}: {})",
                a.status,
                short(a.message.as_deref().unwrap_or(""))
            ),
        });
    }
    say(&format!(
        "submitted {} bytes to {submit_url}: id {}",
        document.len(),
        a.id
    ));
    let mut last = Submitted {
        id: a.id.clone(),
        status: a.status,
        message: a.message.unwrap_or_default(),
    };
    let start = Instant::now();
    while !poll.timeout.is_zero() {
        let url = format!("{status_url}?id={}", last.id);
        let resp = agent.get(&url).header("Authorization", &bearer).call();
        let (_, s) = answer("the status query", &status_url, resp)?;
        last.status = s.status;
        last.message = s.message.unwrap_or_default();
        match last.status.as_str() {
            "processed" => break,
            "ready" | "inprogress" | "ok" => {}
            _ => {
                return Err(SubmitError::Rejected {
                    id: last.id,
                    status: last.status,
                    message: short(&last.message),
                })
            }
        }
        if start.elapsed() + poll.interval > poll.timeout {
            break;
        }
        std::thread::sleep(poll.interval);
    }
    say(&format!(
        "submission {}: {}{}",
        last.id,
        last.status,
        if last.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", short(&last.message))
        }
    ));
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_take_a_base_or_submit_url_and_refuse_credentials() {
        let e = |s: &str| endpoints(s).unwrap();
        let want = (
            "https://db.example/submit".to_string(),
            "https://db.example/status".to_string(),
        );
        assert_eq!(e("https://db.example/"), want);
        assert_eq!(e("https://db.example/submit"), want);
        assert_eq!(e("https://db.example"), want);
        let err = endpoints("https://s3cret@db.example/")
            .unwrap_err()
            .to_string();
        assert!(
            !err.contains("s3cret") && err.contains("KCIDB_TOKEN"),
            "{err}"
        );
        assert!(endpoints("ftp://x/").is_err());
        assert!(endpoints("https:///").is_err());
    }

    #[test]
    fn a_token_never_shows_in_debug_output() {
        let t = Token::new("s3cret");
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    }
}
