//! Retries before the first byte: exponential backoff with jitter, the
//! provider's `Retry-After` honoured (a wait longer than the cap gives up),
//! every retry reported to the caller so it lands in the session log.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{EventStream, ModelError, Prepared, Provider};

/// Retries before the first byte of a response.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First delay.
    pub initial_delay: Duration,
    /// Cap.
    pub max_delay: Duration,
}

/// The result of a retried start.
pub enum Started {
    /// A stream is flowing.
    Stream(EventStream),
    /// The caller cancelled while waiting.
    Cancelled,
}

/// Starts a model call, retrying retryable failures. `on_retry(attempt,
/// delay, error)` is called before each wait; it logs the retry (this
/// function does not, so a retry is one line).
///
/// # Errors
/// A non-retryable error, or the last error once retries are exhausted.
pub async fn start_with_retry(
    provider: &Provider,
    request: &Prepared,
    policy: RetryPolicy,
    cancel: &CancellationToken,
    mut on_retry: impl FnMut(u32, Duration, &ModelError),
) -> Result<Started, ModelError> {
    let mut attempt = 0u32;
    loop {
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(Started::Cancelled),
            result = provider.start(request) => result,
        };
        let error = match result {
            Ok(stream) => return Ok(Started::Stream(stream)),
            Err(error) => error,
        };
        if !error.is_retryable() || attempt >= policy.max_retries {
            return Err(exhausted(error, attempt));
        }
        let delay = match error.retry_after {
            Some(wait) if wait > policy.max_delay => {
                let mut error = error;
                error.message = format!(
                    "{} (the provider asked to wait {}, longer than the {} retry cap, `retry_max_delay_ms`)",
                    error.message,
                    super::human_duration(wait),
                    super::human_duration(policy.max_delay)
                );
                return Err(error);
            }
            Some(wait) => wait,
            None => backoff(policy, attempt),
        };
        attempt += 1;
        on_retry(attempt, delay, &error);
        // The caller logs the retry (once, at its level: a turn's own
        // request at info, a side request such as a title's at debug).
        tracing::trace!(attempt, delay_ms = delay.as_millis() as u64, code = %error.code, "retry wait");
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(Started::Cancelled),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

fn exhausted(mut error: ModelError, retries: u32) -> ModelError {
    if retries > 0 {
        error.message = format!("{} (gave up after {retries} retries)", error.message);
    }
    error
}

/// `initial * 2^attempt`, capped, with ±10% jitter.
pub fn backoff(policy: RetryPolicy, attempt: u32) -> Duration {
    let base = policy
        .initial_delay
        .saturating_mul(1u32 << attempt.min(16))
        .min(policy.max_delay);
    let jitter = (random_unit() * 0.2) - 0.1;
    base.mul_f64(1.0 + jitter).min(policy.max_delay)
}

/// A number in [0, 1) from the standard library's randomly keyed hasher;
/// good enough to spread retries, no RNG dependency needed.
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let policy = RetryPolicy {
            max_retries: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        let first = backoff(policy, 0);
        assert!(
            first >= Duration::from_millis(90) && first <= Duration::from_millis(110),
            "{first:?}"
        );
        let third = backoff(policy, 2);
        assert!(
            third >= Duration::from_millis(360) && third <= Duration::from_millis(440),
            "{third:?}"
        );
        assert!(backoff(policy, 10) <= Duration::from_millis(1000));
    }
}
