//! The compaction engine: pure functions from a session's items, configuration and compaction
//! state to a view, the new state and a record. No clock, no ids made up, no I/O: when a
//! compaction needs a summary, the engine hands back the request and a continuation.

mod compact;
mod emergency;
mod episodic;
pub mod inspect;
mod overflow;
mod progressive;
pub mod render;
mod repair;
pub mod report;
mod run;
pub mod validate;
pub mod view;
mod working;

pub use compact::{compact, current_view, next_fold, Step};
pub use repair::repair;
pub use run::{EngineError, EngineInput, EngineOutput, Pending};

#[cfg(test)]
mod episodic_tests;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod steps_tests;
#[cfg(test)]
mod tests;
