//! Episodes: spans of a session the agent marks with `episode_start` and `episode_end`, an
//! exploration (finding things out, ending with what it concluded) or an action (changing
//! things, depending on the explorations it acts on). Their rules are checked at append, against
//! the episodes the log already holds; the episodic policy evicts by them.

use serde::Serialize;
use utoipa::ToSchema;

use super::event::{EpisodeKind, Event, EventBody};
use super::FieldError;

/// One episode as the log tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Episode {
    pub name: String,
    pub kind: EpisodeKind,
    /// The episodes it depends on (an action's explorations).
    pub dependencies: Vec<String>,
    /// The seq of its `episode_start`.
    pub start_seq: i64,
    /// The seq of its `episode_end`; absent while it is active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_seq: Option<i64>,
    /// What an exploration established.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
}

impl Episode {
    pub fn is_active(&self) -> bool {
        self.end_seq.is_none()
    }

    fn is_completed_exploration(&self) -> bool {
        self.kind == EpisodeKind::Exploration && !self.is_active()
    }
}

/// The episodes of a session in the order they started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Episodes {
    list: Vec<Episode>,
}

impl Episodes {
    /// The episodes `events` (in seq order) start and end. Stored history is taken as it is:
    /// an event that breaks a rule (stored before the rules were checked) is skipped.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut episodes = Self::default();
        for event in events {
            let _ = episodes.apply(0, event.seq, &event.body);
        }
        episodes
    }

    pub fn list(&self) -> &[Episode] {
        &self.list
    }

    pub fn get(&self, name: &str) -> Option<&Episode> {
        self.list.iter().find(|e| e.name == name)
    }

    /// The episode under way, if any: at most one is.
    pub fn active(&self) -> Option<&Episode> {
        self.list.last().filter(|e| e.is_active())
    }

    /// Checks `body`, the event at `index` of a batch to be stored at `seq`, against the rules
    /// and takes it in when it keeps them. Events other than episode events always do.
    pub fn apply(&mut self, index: usize, seq: i64, body: &EventBody) -> Result<(), FieldError> {
        match body {
            EventBody::EpisodeStart(start) => {
                let fail =
                    |field: &str, message: String| Err(FieldError::at(index, field, message));
                if let Some(active) = self.active() {
                    return fail(
                        "type",
                        format!(
                            "episode `{}` (started at seq {}) is still active: end it before \
                             starting `{}`; one episode is active at a time",
                            active.name, active.start_seq, start.name
                        ),
                    );
                }
                if let Some(earlier) = self.get(&start.name) {
                    return fail(
                        "name",
                        format!(
                            "an episode named `{}` was started at seq {}: names are unique in a \
                             session",
                            start.name, earlier.start_seq
                        ),
                    );
                }
                for (i, dependency) in start.dependencies.iter().enumerate() {
                    if self.get(dependency).is_none() {
                        return fail(
                            &format!("dependencies[{i}]"),
                            format!("`{dependency}` names no earlier episode of this session"),
                        );
                    }
                }
                match start.kind {
                    EpisodeKind::Exploration if !start.dependencies.is_empty() => {
                        return fail(
                            "dependencies",
                            "an exploration depends on nothing: only an action names the \
                             explorations it acts on"
                                .into(),
                        );
                    }
                    EpisodeKind::Action
                        if !start
                            .dependencies
                            .iter()
                            .filter_map(|d| self.get(d))
                            .any(Episode::is_completed_exploration) =>
                    {
                        return fail(
                            "dependencies",
                            "an action depends on at least one completed exploration".into(),
                        );
                    }
                    _ => {}
                }
                self.list.push(Episode {
                    name: start.name.clone(),
                    kind: start.kind,
                    dependencies: start.dependencies.clone(),
                    start_seq: seq,
                    end_seq: None,
                    conclusion: None,
                });
            }
            EventBody::EpisodeEnd(end) => {
                let fail =
                    |field: &str, message: String| Err(FieldError::at(index, field, message));
                let Some(active) = self.list.last_mut().filter(|e| e.is_active()) else {
                    return fail(
                        "name",
                        match self.get(&end.name) {
                            Some(e) => format!(
                                "episode `{}` already ended at seq {}",
                                end.name,
                                e.end_seq.unwrap_or_default()
                            ),
                            None => format!(
                                "no episode is active, and none is named `{}`: an \
                                 `episode_start` comes first",
                                end.name
                            ),
                        },
                    );
                };
                if active.name != end.name {
                    return fail(
                        "name",
                        format!(
                            "the active episode is `{}`, not `{}`: episodes end in the order \
                             they started",
                            active.name, end.name
                        ),
                    );
                }
                let concluded = !end.conclusion.trim().is_empty();
                match active.kind {
                    EpisodeKind::Exploration if !concluded => {
                        return fail(
                            "conclusion",
                            "an exploration ends with its conclusion: what it established".into(),
                        );
                    }
                    EpisodeKind::Action if concluded => {
                        return fail(
                            "conclusion",
                            "an action ends without a conclusion: what it did is in its tool \
                             calls and results"
                                .into(),
                        );
                    }
                    _ => {}
                }
                active.end_seq = Some(seq);
                active.conclusion = concluded.then(|| end.conclusion.clone());
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventInput;
    use serde_json::json;

    fn body(value: serde_json::Value) -> EventBody {
        let input: EventInput = serde_json::from_value(value).unwrap();
        input.validate(0).unwrap().body
    }

    fn start(name: &str, kind: &str, dependencies: &[&str]) -> EventBody {
        body(json!({"type": "episode_start", "name": name, "kind": kind,
            "dependencies": dependencies}))
    }

    fn end(name: &str, conclusion: &str) -> EventBody {
        body(json!({"type": "episode_end", "name": name, "conclusion": conclusion}))
    }

    /// Applies `bodies` in order; the field and message of the first refusal.
    fn run(bodies: &[EventBody]) -> Result<Episodes, (usize, String, String)> {
        let mut episodes = Episodes::default();
        for (i, b) in bodies.iter().enumerate() {
            episodes
                .apply(i, i as i64 + 1, b)
                .map_err(|e| (i, e.field, e.message))?;
        }
        Ok(episodes)
    }

    fn refusal(bodies: &[EventBody]) -> (usize, String, String) {
        run(bodies).expect_err("refused")
    }

    #[test]
    fn an_exploration_then_an_action_on_it() {
        let episodes = run(&[
            start("survey", "exploration", &[]),
            end("survey", "the parser is in src/parse.rs"),
            start("fix", "action", &["survey"]),
        ])
        .unwrap();
        assert_eq!(episodes.list().len(), 2);
        let survey = episodes.get("survey").unwrap();
        assert_eq!(survey.end_seq, Some(2));
        assert_eq!(
            survey.conclusion.as_deref(),
            Some("the parser is in src/parse.rs")
        );
        assert_eq!(episodes.active().map(|e| e.name.as_str()), Some("fix"));
    }

    #[test]
    fn one_episode_is_active_at_a_time() {
        let (i, field, message) = refusal(&[
            start("a", "exploration", &[]),
            start("b", "exploration", &[]),
        ]);
        assert_eq!((i, field.as_str()), (1, "type"));
        assert!(
            message.contains("`a`") && message.contains("still active"),
            "{message}"
        );
    }

    #[test]
    fn names_are_unique_in_a_session() {
        let (i, field, message) = refusal(&[
            start("a", "exploration", &[]),
            end("a", "done"),
            start("a", "exploration", &[]),
        ]);
        assert_eq!((i, field.as_str()), (2, "name"));
        assert!(message.contains("unique"), "{message}");
    }

    #[test]
    fn an_exploration_has_no_dependencies_and_ends_with_a_conclusion() {
        let (_, field, _) = refusal(&[
            start("a", "exploration", &[]),
            end("a", "x"),
            start("b", "exploration", &["a"]),
        ]);
        assert_eq!(field, "dependencies");
        let (i, field, message) = refusal(&[start("a", "exploration", &[]), end("a", "  ")]);
        assert_eq!((i, field.as_str()), (1, "conclusion"));
        assert!(message.contains("conclusion"), "{message}");
    }

    #[test]
    fn an_action_depends_on_a_completed_exploration_and_ends_without_a_conclusion() {
        let (_, field, message) = refusal(&[start("fix", "action", &[])]);
        assert_eq!(field, "dependencies");
        assert!(message.contains("completed exploration"), "{message}");
        // An action on an action only is refused too.
        let (i, field, _) = refusal(&[
            start("look", "exploration", &[]),
            end("look", "found it"),
            start("fix", "action", &["look"]),
            end("fix", ""),
            start("again", "action", &["fix"]),
        ]);
        assert_eq!((i, field.as_str()), (4, "dependencies"));
        let (i, field, _) = refusal(&[
            start("look", "exploration", &[]),
            end("look", "found it"),
            start("fix", "action", &["look"]),
            end("fix", "it works"),
        ]);
        assert_eq!((i, field.as_str()), (3, "conclusion"));
    }

    #[test]
    fn dependencies_name_earlier_episodes() {
        let (i, field, message) = refusal(&[
            start("look", "exploration", &[]),
            end("look", "found it"),
            start("fix", "action", &["look", "later"]),
        ]);
        assert_eq!((i, field.as_str()), (2, "dependencies[1]"));
        assert!(message.contains("`later`"), "{message}");
    }

    #[test]
    fn an_end_names_the_active_episode() {
        let (_, field, message) = refusal(&[end("ghost", "x")]);
        assert_eq!(field, "name");
        assert!(message.contains("no episode is active"), "{message}");
        let (_, _, message) = refusal(&[
            start("a", "exploration", &[]),
            start("b", "exploration", &[]),
        ]);
        assert!(message.contains("still active"));
        let (i, _, message) = refusal(&[start("a", "exploration", &[]), end("b", "x")]);
        assert_eq!(i, 1);
        assert!(message.contains("the active episode is `a`"), "{message}");
        let (_, _, message) =
            refusal(&[start("a", "exploration", &[]), end("a", "x"), end("a", "x")]);
        assert!(message.contains("already ended at seq 2"), "{message}");
    }

    #[test]
    fn stored_history_that_broke_the_rules_is_read_leniently() {
        let events: Vec<Event> = [
            start("a", "exploration", &["nothing"]),
            start("b", "exploration", &[]),
            end("b", "ok"),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, body)| Event {
            seq: i as i64 + 1,
            id: None,
            tokens: 1,
            body,
            pinned: false,
            metadata: None,
            created_at: chrono::Utc::now(),
            derived: Default::default(),
        })
        .collect();
        let episodes = Episodes::from_events(&events);
        assert_eq!(episodes.list().len(), 1);
        assert!(episodes.get("b").unwrap().is_completed_exploration());
    }
}
