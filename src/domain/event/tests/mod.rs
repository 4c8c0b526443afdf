//! Events: validation of what a client appends, the calls it holds, and what the summary and
//! the measure read from them (paths, requests, rules).

use super::*;
use crate::domain::FieldError;
use serde_json::json;

fn validate(v: Value) -> Result<NewEvent, Vec<FieldError>> {
    serde_json::from_value::<EventInput>(v).unwrap().validate(3)
}

fn fields(v: Value) -> Vec<String> {
    validate(v)
        .expect_err("expected a validation error")
        .into_iter()
        .map(|e| {
            assert_eq!(e.index, Some(3));
            e.field
        })
        .collect()
}

mod calls;
mod paths;
mod requests;
mod validation;
