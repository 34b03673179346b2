//! When a registry operation is worth repeating, and how long to wait before it: a bounded
//! exponential backoff decided by pure functions, so the policy is tested without a network
//! (which failures are transient is [`TransportError::is_transient`]).

use std::future::Future;
use std::time::Duration;

use machineos_diagnostics::Backoff;

use crate::http::TransportError;

/// How often and how patiently transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included (1 = never retry).
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub initial_backoff: Duration,
    /// Upper bound of one wait.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(4),
        }
    }
}

impl RetryPolicy {
    /// A policy for tests: the same number of attempts, waits of a few milliseconds.
    pub fn fast() -> Self {
        RetryPolicy {
            attempts: 4,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
        }
    }

    /// The wait after failed attempt number `attempt` (1-based), or `None` when that was the
    /// last attempt allowed.
    pub fn backoff(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.attempts {
            return None;
        }
        Some(Backoff::doubling(self.initial_backoff, self.max_backoff).delay(attempt))
    }
}

/// Runs `op` until it succeeds, fails with a final error, or runs out of attempts. Returns the
/// last error and the number of attempts made.
pub async fn with_retry<T, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    mut op: F,
) -> Result<T, (TransportError, u32)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TransportError>>,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() => match policy.backoff(attempt) {
                Some(wait) => {
                    tracing::warn!(
                        "{what}: attempt {attempt} of {} failed, retrying in {wait:?}: {e}",
                        policy.attempts
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                None => return Err((e, attempt)),
            },
            Err(e) => return Err((e, attempt)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_stops_after_the_last_attempt() {
        let p = RetryPolicy {
            attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
        };
        let waits: Vec<_> = (1..=5).map(|a| p.backoff(a)).collect();
        assert_eq!(
            waits,
            vec![
                Some(Duration::from_millis(100)),
                Some(Duration::from_millis(200)),
                Some(Duration::from_millis(300)),
                Some(Duration::from_millis(300)),
                None,
            ]
        );
        let once = RetryPolicy { attempts: 1, ..p };
        assert_eq!(once.backoff(1), None);
    }

    fn status(status: u16) -> TransportError {
        TransportError::Status {
            status,
            code: None,
            message: String::new(),
        }
    }

    #[tokio::test]
    async fn with_retry_stops_on_final_errors_and_after_the_budget() {
        let policy = RetryPolicy::fast();
        let mut calls = 0;
        let r: Result<(), _> = with_retry(&policy, "t", || {
            calls += 1;
            async { Err(status(401)) }
        })
        .await;
        assert_eq!(r.unwrap_err().1, 1);
        assert_eq!(calls, 1);

        let mut calls = 0;
        let r: Result<(), _> = with_retry(&policy, "t", || {
            calls += 1;
            async { Err(status(503)) }
        })
        .await;
        assert_eq!(r.unwrap_err().1, 4);
        assert_eq!(calls, 4);

        let mut calls = 0;
        let r = with_retry(&policy, "t", || {
            calls += 1;
            let n = calls;
            async move { if n < 3 { Err(status(500)) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r.unwrap(), 3);
    }
}
