//! Bounds on waiting for a model, shared by every compaction of the process: a circuit breaker
//! that stops calling a model that keeps failing, and a bound on concurrent calls. Both make a
//! compaction fall back to the deterministic summary rather than wait.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::Semaphore;

use super::{SummarizeError, Summarizer, SummaryOutput, SummaryRequest};

/// How much of the process a model may hold up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Consecutive failures that open the breaker.
    pub breaker_failures: u32,
    /// How long an open breaker refuses calls (longer when the provider's `Retry-After` asks).
    pub breaker_cooldown: Duration,
    /// Model calls in flight at once across the process.
    pub max_concurrent_calls: usize,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            breaker_failures: 3,
            breaker_cooldown: Duration::from_secs(30),
            max_concurrent_calls: 4,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One trial call is under way; the others are refused until it ends.
    HalfOpen,
}

/// Closed while calls succeed; open for a cooldown after `failures` failures in a row; then
/// half-open: one trial call decides whether it closes or opens again.
#[derive(Debug)]
pub struct Breaker {
    failures: u32,
    cooldown: Duration,
    state: Mutex<State>,
}

impl Breaker {
    pub fn new(failures: u32, cooldown: Duration) -> Self {
        Self {
            failures: failures.max(1),
            cooldown,
            state: Mutex::new(State::Closed { failures: 0 }),
        }
    }

    /// Whether a call may be made at `now`.
    pub fn admit(&self, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match *state {
            State::Closed { .. } => true,
            State::Open { until } if now >= until => {
                *state = State::HalfOpen;
                true
            }
            State::Open { .. } | State::HalfOpen => false,
        }
    }

    /// Records how an admitted call ended; `retry_after` is what the provider asked for.
    pub fn record(&self, succeeded: bool, retry_after: Option<Duration>, now: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let open = State::Open {
            until: now + self.cooldown.max(retry_after.unwrap_or_default()),
        };
        *state = match (*state, succeeded) {
            (_, true) => State::Closed { failures: 0 },
            (State::Closed { failures }, false) if failures + 1 < self.failures => State::Closed {
                failures: failures + 1,
            },
            (_, false) => open,
        };
    }

    /// Whether a call at `now` would be refused, without taking the half-open trial.
    fn refuses(&self, now: Instant) -> bool {
        match *self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Closed { .. } => false,
            State::Open { until } => now < until,
            State::HalfOpen => true,
        }
    }

    pub fn is_open(&self) -> bool {
        !matches!(
            *self.state.lock().unwrap_or_else(|e| e.into_inner()),
            State::Closed { .. }
        )
    }
}

/// A summariser behind the process's breaker and call bound.
pub struct Guarded<S> {
    inner: S,
    breaker: Breaker,
    calls: Arc<Semaphore>,
}

impl<S: Summarizer> Guarded<S> {
    pub fn new(inner: S, limits: CallLimits) -> Self {
        Self {
            inner,
            breaker: Breaker::new(limits.breaker_failures, limits.breaker_cooldown),
            calls: Arc::new(Semaphore::new(limits.max_concurrent_calls.max(1))),
        }
    }
}

/// An admitted call: when it is dropped unfinished (its caller's deadline passed), it counts
/// as a failure, so that a half-open breaker does not stay half-open for ever.
struct Admitted<'a> {
    breaker: &'a Breaker,
    finished: bool,
}

impl Admitted<'_> {
    fn finish(mut self, result: &Result<SummaryOutput, SummarizeError>) {
        self.finished = true;
        let (succeeded, retry_after) = match result {
            // The model answered; a narrative it was refused for says nothing of its health.
            Ok(_) | Err(SummarizeError::Refused { .. } | SummarizeError::InputTooLarge { .. }) => {
                (true, None)
            }
            Err(SummarizeError::Status { retry_after, .. }) => (false, *retry_after),
            Err(_) => (false, None),
        };
        self.breaker.record(succeeded, retry_after, Instant::now());
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.breaker.record(false, None, Instant::now());
        }
    }
}

#[async_trait]
impl<S: Summarizer> Summarizer for Guarded<S> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }

    async fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> Result<SummaryOutput, SummarizeError> {
        // Refused at once while open, rather than after waiting for a slot.
        if self.breaker.refuses(Instant::now()) {
            return Err(SummarizeError::CircuitOpen);
        }
        // Waiting for a slot is bounded by the caller's deadline, like the call itself.
        let _permit = self
            .calls
            .acquire()
            .await
            .map_err(|_| SummarizeError::Transport("the call bound was closed".into()))?;
        if !self.breaker.admit(Instant::now()) {
            return Err(SummarizeError::CircuitOpen);
        }
        let call = Admitted {
            breaker: &self.breaker,
            finished: false,
        };
        let result = self.inner.summarize(request).await;
        call.finish(&result);
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::domain::compaction::Summary;

    #[test]
    fn the_breaker_opens_after_consecutive_failures_and_half_opens_after_the_cooldown() {
        let breaker = Breaker::new(3, Duration::from_secs(30));
        let t0 = Instant::now();
        for _ in 0..2 {
            assert!(breaker.admit(t0));
            breaker.record(false, None, t0);
        }
        // A success in between starts the count again.
        breaker.record(true, None, t0);
        for _ in 0..2 {
            breaker.record(false, None, t0);
        }
        assert!(breaker.admit(t0), "two failures in a row do not open it");
        breaker.record(false, None, t0);
        assert!(!breaker.admit(t0 + Duration::from_secs(29)));
        // Half-open: one trial, the others refused while it runs.
        assert!(breaker.admit(t0 + Duration::from_secs(30)));
        assert!(!breaker.admit(t0 + Duration::from_secs(30)));
        // A failed trial opens it again for a whole cooldown.
        let t1 = t0 + Duration::from_secs(31);
        breaker.record(false, None, t1);
        assert!(!breaker.admit(t1 + Duration::from_secs(29)));
        assert!(breaker.admit(t1 + Duration::from_secs(30)));
        // A successful trial closes it.
        breaker.record(true, None, t1 + Duration::from_secs(30));
        assert!(!breaker.is_open());
        assert!(breaker.admit(t1 + Duration::from_secs(30)));
    }

    #[test]
    fn retry_after_longer_than_the_cooldown_is_honoured() {
        let breaker = Breaker::new(1, Duration::from_secs(30));
        let t0 = Instant::now();
        breaker.record(false, Some(Duration::from_secs(120)), t0);
        assert!(!breaker.admit(t0 + Duration::from_secs(119)));
        assert!(breaker.admit(t0 + Duration::from_secs(120)));
        // A shorter one does not shorten the cooldown.
        let breaker = Breaker::new(1, Duration::from_secs(30));
        breaker.record(false, Some(Duration::from_secs(5)), t0);
        assert!(!breaker.admit(t0 + Duration::from_secs(29)));
    }

    /// A model that takes `delay`, then fails or answers with the deterministic summary.
    struct Fake {
        delay: Duration,
        fails: bool,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Summarizer for Fake {
        fn kind(&self) -> &'static str {
            "openai"
        }
        fn timeout(&self) -> Duration {
            Duration::from_secs(60)
        }
        async fn summarize(
            &self,
            request: SummaryRequest<'_>,
        ) -> Result<SummaryOutput, SummarizeError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            if self.fails {
                return Err(SummarizeError::Status {
                    status: 503,
                    body: "down".into(),
                    retry_after: None,
                });
            }
            Ok(super::super::deterministic::summarize(request))
        }
    }

    fn guarded(delay: Duration, fails: bool, limits: CallLimits) -> Arc<Guarded<Fake>> {
        Arc::new(Guarded::new(
            Fake {
                delay,
                fails,
                calls: AtomicUsize::new(0),
            },
            limits,
        ))
    }

    async fn ask(s: &dyn Summarizer) -> Result<SummaryOutput, SummarizeError> {
        let previous = Summary::default();
        s.summarize(SummaryRequest {
            previous: &previous,
            events: &[],
            max_chars: 100,
        })
        .await
    }

    #[tokio::test]
    async fn an_open_breaker_refuses_without_calling_the_model() {
        let s = guarded(Duration::ZERO, true, CallLimits::default());
        for _ in 0..3 {
            assert!(matches!(ask(&*s).await, Err(SummarizeError::Status { .. })));
        }
        assert!(matches!(ask(&*s).await, Err(SummarizeError::CircuitOpen)));
        assert_eq!(s.inner.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn after_the_cooldown_one_trial_call_reaches_the_model() {
        let s = guarded(
            Duration::ZERO,
            true,
            CallLimits {
                breaker_failures: 1,
                breaker_cooldown: Duration::from_millis(100),
                ..CallLimits::default()
            },
        );
        assert!(matches!(ask(&*s).await, Err(SummarizeError::Status { .. })));
        assert!(matches!(ask(&*s).await, Err(SummarizeError::CircuitOpen)));
        tokio::time::sleep(Duration::from_millis(150)).await;
        // The trial fails: the circuit opens again.
        assert!(matches!(ask(&*s).await, Err(SummarizeError::Status { .. })));
        assert!(matches!(ask(&*s).await, Err(SummarizeError::CircuitOpen)));
        assert_eq!(s.inner.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_call_abandoned_at_its_deadline_counts_as_a_failure() {
        let s = guarded(
            Duration::from_secs(30),
            false,
            CallLimits {
                breaker_failures: 1,
                ..CallLimits::default()
            },
        );
        let late = tokio::time::timeout(Duration::from_millis(50), ask(&*s)).await;
        assert!(late.is_err());
        assert!(s.breaker.is_open());
    }

    #[tokio::test]
    async fn calls_past_the_bound_wait_for_a_slot() {
        let s = guarded(
            Duration::from_millis(400),
            false,
            CallLimits {
                max_concurrent_calls: 2,
                ..CallLimits::default()
            },
        );
        let busy: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move { ask(&*s).await.is_ok() })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Both slots are taken: a third call cannot start within a short deadline.
        let third = tokio::time::timeout(Duration::from_millis(100), ask(&*s)).await;
        assert!(third.is_err());
        assert_eq!(s.inner.calls.load(Ordering::SeqCst), 2);
        for call in busy {
            assert!(call.await.unwrap());
        }
        // Once they are done, calls go through again.
        assert!(ask(&*s).await.is_ok());
    }
}
