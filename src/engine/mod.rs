//! The compaction engine: pure functions from a session's items, configuration and compaction
//! state to a view, the new state and a record. No I/O except through the summariser trait.

mod compact;
pub mod inspect;
pub mod render;
pub mod report;
pub mod validate;
pub mod view;

pub use compact::{compact, repair, tier_for, EngineError, EngineInput, EngineOutput};

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
