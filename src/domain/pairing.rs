//! Tool-call pairing: which call a tool result answers. One rule for append validation, the
//! engine's cuts and repair, and every renderer: a result answers the most recent unanswered
//! call of its id; an earlier unanswered call of a reused id waits until that one is answered.

use foldhash::{HashMap, HashMapExt};

/// The unanswered calls of a conversation as it unfolds, each known by a position `K` of the
/// caller's choosing (a seq, a message index, a message and a call within it).
#[derive(Debug)]
pub struct OpenCalls<'a, K> {
    /// The most recent unanswered call of each id.
    latest: HashMap<&'a str, K>,
    /// Earlier unanswered calls of reused ids, most recent last.
    shadowed: Vec<(&'a str, K)>,
}

impl<K: Copy> Default for OpenCalls<'_, K> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<'a, K: Copy> OpenCalls<'a, K> {
    pub fn with_capacity(n: usize) -> Self {
        Self {
            latest: HashMap::with_capacity(n),
            shadowed: Vec::new(),
        }
    }

    /// The most recent unanswered call of `id`.
    pub fn get(&self, id: &str) -> Option<K> {
        self.latest.get(id).copied()
    }

    /// Records a call of `id` at `at`. Returns the earlier unanswered call of the same id it
    /// shadows, if any.
    pub fn issue(&mut self, id: &'a str, at: K) -> Option<K> {
        let earlier = self.latest.insert(id, at);
        if let Some(earlier) = earlier {
            self.shadowed.push((id, earlier));
        }
        earlier
    }

    /// Answers the most recent unanswered call of `id` and returns it; `None` when there is
    /// none (an orphan result).
    pub fn answer(&mut self, id: &str) -> Option<K> {
        let (id, call) = self.latest.remove_entry(id)?;
        if let Some(i) = self.shadowed.iter().rposition(|(other, _)| *other == id) {
            let (id, earlier) = self.shadowed.remove(i);
            self.latest.insert(id, earlier);
        }
        Some(call)
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// Every call still unanswered, in no particular order.
    pub fn into_unanswered(self) -> impl Iterator<Item = K> + use<'a, K> {
        self.latest
            .into_values()
            .chain(self.shadowed.into_iter().map(|(_, k)| k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_answers_the_most_recent_open_call_of_its_id() {
        let mut open = OpenCalls::default();
        assert_eq!(open.issue("a", 1), None);
        assert_eq!(open.issue("b", 2), None);
        assert_eq!(open.issue("a", 3), Some(1));
        assert_eq!(open.answer("a"), Some(3));
        assert_eq!(open.answer("a"), Some(1));
        assert_eq!(open.answer("a"), None);
        assert_eq!(open.get("b"), Some(2));
        let left: Vec<_> = open.into_unanswered().collect();
        assert_eq!(left, [2]);
    }

    #[test]
    fn unanswered_calls_include_shadowed_ones() {
        let mut open = OpenCalls::default();
        open.issue("a", 1);
        open.issue("a", 2);
        let mut left: Vec<_> = open.into_unanswered().collect();
        left.sort_unstable();
        assert_eq!(left, [1, 2]);
    }
}
