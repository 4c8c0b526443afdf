//! Tool-call pairing: which call a tool result answers. One rule for append validation, the
//! engine's cuts and repair, and every renderer: a result answers the most recent unanswered
//! call of its id; an earlier unanswered call of a reused id waits until that one is answered.

use foldhash::{HashMap, HashMapExt};

/// How many of the newest unanswered calls are kept in order beside the map: a result most
/// often answers a call of the message just before it, found there without hashing its id.
const RECENT: usize = 8;

/// The unanswered calls of a conversation as it unfolds, each known by a position `K` of the
/// caller's choosing (a seq, a message index, a message and a call within it).
#[derive(Debug)]
pub struct OpenCalls<'a, K> {
    /// The newest unanswered calls, oldest first: each is more recent than any in `latest`
    /// or `shadowed`, where the oldest goes when a call is issued with `RECENT` here.
    recent: Vec<(&'a str, K)>,
    /// The most recent unanswered call of each id, of those older than `recent`'s.
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
            recent: Vec::with_capacity(RECENT),
            latest: HashMap::with_capacity(n),
            shadowed: Vec::new(),
        }
    }

    /// The most recent unanswered call of `id`.
    pub fn get(&self, id: &str) -> Option<K> {
        match self.recent.iter().rfind(|(other, _)| *other == id) {
            Some(&(_, at)) => Some(at),
            None => self.latest.get(id).copied(),
        }
    }

    /// Records a call of `id` at `at`. Returns the earlier unanswered call of the same id it
    /// shadows, if any.
    pub fn issue(&mut self, id: &'a str, at: K) -> Option<K> {
        let earlier = self.get(id);
        if self.recent.len() == RECENT {
            let (id, oldest) = self.recent.remove(0);
            if let Some(earlier) = self.latest.insert(id, oldest) {
                self.shadowed.push((id, earlier));
            }
        }
        self.recent.push((id, at));
        earlier
    }

    /// Answers the most recent unanswered call of `id` and returns it; `None` when there is
    /// none (an orphan result).
    pub fn answer(&mut self, id: &str) -> Option<K> {
        if let Some(i) = self.recent.iter().rposition(|(other, _)| *other == id) {
            return Some(self.recent.remove(i).1);
        }
        let (id, call) = self.latest.remove_entry(id)?;
        if let Some(i) = self.shadowed.iter().rposition(|(other, _)| *other == id) {
            let (id, earlier) = self.shadowed.remove(i);
            self.latest.insert(id, earlier);
        }
        Some(call)
    }

    pub fn is_empty(&self) -> bool {
        self.recent.is_empty() && self.latest.is_empty()
    }

    /// Every call still unanswered, in no particular order.
    pub fn into_unanswered(self) -> impl Iterator<Item = K> + use<'a, K> {
        self.recent
            .into_iter()
            .map(|(_, k)| k)
            .chain(self.latest.into_values())
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

    proptest::proptest! {
        /// However calls and results interleave and ids repeat, each result answers what the
        /// rule says: the most recent unanswered call of its id, as a plain list finds it.
        #[test]
        fn a_result_answers_what_a_plain_list_of_open_calls_says(
            steps in proptest::collection::vec((proptest::bool::ANY, 0..6usize), 0..80),
        ) {
            const IDS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
            let mut open = OpenCalls::default();
            let mut plain: Vec<(&str, usize)> = Vec::new();
            for (at, &(is_call, id)) in steps.iter().enumerate() {
                let id = IDS[id];
                let listed = plain.iter().rposition(|(other, _)| *other == id);
                if is_call {
                    let earlier = listed.map(|i| plain[i].1);
                    proptest::prop_assert_eq!(open.issue(id, at), earlier);
                    plain.push((id, at));
                } else {
                    let answered = listed.map(|i| plain.remove(i).1);
                    proptest::prop_assert_eq!(open.answer(id), answered);
                }
                for id in IDS {
                    let listed = plain.iter().rev().find(|(other, _)| *other == id);
                    proptest::prop_assert_eq!(open.get(id), listed.map(|(_, at)| *at));
                }
                proptest::prop_assert_eq!(open.is_empty(), plain.is_empty());
            }
            let mut left: Vec<usize> = open.into_unanswered().collect();
            left.sort_unstable();
            let expected: Vec<usize> = plain.iter().map(|(_, at)| *at).collect();
            proptest::prop_assert_eq!(left, expected);
        }
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
