//! Formatting: the sections rendered within the size bound, and a summary this module wrote
//! read back so that the next call extends it rather than nesting it.

use super::lines::Lines;
use super::*;
use crate::domain::text::prefix_chars;

impl Digest {
    /// Renders the sections, dropping the oldest, least important items first until the text
    /// fits in `max_chars` characters. The first user request is shortened only as a last resort.
    pub(super) fn render_within(mut self, max_chars: usize) -> String {
        let costs: Vec<Vec<usize>> = Section::ALL
            .iter()
            .map(|&s| self.get(s).iter().map(|e| s.entry_chars(e)).collect())
            .collect();
        let section_chars = |s: Section, costs: &[usize]| -> usize {
            if costs.is_empty() {
                0
            } else {
                s.header_chars() + costs.iter().sum::<usize>()
            }
        };
        // Touched files are shown one line per directory, errors one line per file (`lines`).
        let mut shared: Vec<Option<Lines>> = Section::ALL
            .iter()
            .map(|&s| Some(Lines::new(s.shared()?, self.get(s))))
            .collect();
        // The characters each list takes as rendered, its header included, and the whole text.
        let mut listed: Vec<usize> = Section::ALL
            .iter()
            .map(|&s| {
                let i = s as usize;
                match &shared[i] {
                    Some(lines) if !costs[i].is_empty() => {
                        s.header_chars() + lines.chars(&self.sections[i])
                    }
                    _ => section_chars(s, &costs[i]),
                }
            })
            .collect();
        let mut total: usize = listed.iter().sum();

        // Lists drop their items in `order` (oldest first, see `Section::drop_order`); each drop
        // is O(1). A request, a note or a project's instructions dropped leaves its seq in the
        // recall list (see `Recall`): no user message or note leaves the summary without a way
        // back to it while that list holds it.
        let order: Vec<Vec<usize>> = Section::ALL
            .iter()
            .map(|&s| s.drop_order(self.get(s)))
            .collect();
        let mut next = [0usize; Section::ALL.len()];
        let mut dropped: Vec<Vec<bool>> = costs.iter().map(|c| vec![false; c.len()]).collect();
        let recall_at = Section::Recall as usize;
        let mut recall = Recall::read(self.sections[recall_at].first().map(String::as_str));
        let recall_cap = max_chars / 4;
        // Seqs listed as they were added (see `recall_only`) keep to the same cap.
        total -= recall.chars();
        recall.bound(recall_cap);
        total += recall.chars();
        for floor in [ITEMS_KEPT_LONGEST, 0] {
            for (section, share) in Section::drop_steps() {
                let i = section as usize;
                let floor = floor.min(section.kept_longest());
                let cap = (max_chars as f64 * share) as usize;
                while total > max_chars && listed[i] > cap && costs[i].len() - next[i] > floor {
                    let at = order[i][next[i]];
                    let entry = &self.sections[i][at];
                    let freed = match &mut shared[i] {
                        Some(lines) => lines.drop(at, entry),
                        None => costs[i][at],
                    };
                    total -= freed;
                    listed[i] -= freed;
                    dropped[i][at] = true;
                    if let (Section::Requests | Section::Notes | Section::Constraints, Some(uri)) =
                        (section, reference_of(entry))
                    {
                        total -= recall.chars();
                        recall.push(uri, recall_cap);
                        total += recall.chars();
                    }
                    next[i] += 1;
                    if next[i] == costs[i].len() {
                        total -= section.header_chars();
                        listed[i] -= section.header_chars();
                    }
                }
            }
        }
        self.sections[recall_at] = recall.entry().into_iter().collect();
        dropped[recall_at] = vec![false; self.sections[recall_at].len()];
        for section in Section::SHORTEN_ORDER {
            let i = section as usize;
            let Some(block) = self.sections[i].first() else {
                continue;
            };
            if total <= max_chars {
                break;
            }
            let excess = total - max_chars;
            let cost = costs[i][0];
            total -= cost + section.header_chars();
            // A quoted block's cost shrinks at least as fast as its text (fewer chars, no more lines).
            let keep = block.chars().count().saturating_sub(excess);
            let shortened = if keep > 1 {
                bounded(block, keep)
            } else {
                String::new()
            };
            if shortened.is_empty() {
                self.sections[i].clear();
            } else {
                total += section.entry_chars(&shortened) + section.header_chars();
                self.sections[i] = vec![shortened];
            }
        }

        let mut text = String::with_capacity(total.min(max_chars) * 4);
        let mut lines_shown: Vec<String>;
        for section in Section::ALL {
            let i = section as usize;
            if next[i] == self.sections[i].len() {
                continue;
            }
            let entries: Vec<&str> = match &shared[i] {
                Some(lines) => {
                    lines_shown = lines.render(&self.sections[i], &dropped[i]);
                    lines_shown.iter().map(String::as_str).collect()
                }
                None => {
                    let entries = self.sections[i].iter().zip(&dropped[i]);
                    entries
                        .filter(|(_, &gone)| !gone)
                        .map(|(e, _)| e.as_str())
                        .collect()
                }
            };
            text.push_str("## ");
            text.push_str(section.title());
            text.push('\n');
            for entry in entries {
                if section.is_quoted() {
                    for line in entry.split('\n') {
                        text.push_str("> ");
                        text.push_str(line);
                        text.push('\n');
                    }
                } else {
                    text.push_str("- ");
                    text.push_str(entry);
                    text.push('\n');
                }
            }
        }
        let text = text.trim_end();
        // Only headers too long for a tiny bound get here; the bound holds regardless.
        prefix_chars(text, max_chars).to_owned()
    }
}

impl Digest {
    /// Lists `seqs` among the earlier user messages to recall by reference: messages the
    /// summary names in no other way (markup a harness sent in the user's name). The list is
    /// bounded when rendered.
    pub(super) fn recall_only(&mut self, seqs: &[i64]) {
        if seqs.is_empty() {
            return;
        }
        let at = Section::Recall as usize;
        let mut recall = Recall::read(self.sections[at].first().map(String::as_str));
        seqs.iter().for_each(|&seq| recall.insert(seq));
        self.sections[at] = recall.entry().into_iter().collect();
    }
}

/// Reads back a summary this module wrote; `None` when the text is in any other shape.
pub(super) fn read_back(text: &str) -> Option<Digest> {
    let mut digest = Digest::default();
    if text.trim().is_empty() {
        return Some(digest);
    }
    let mut current: Option<Section> = None;
    let mut quoted: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        if let Some(section) = line.strip_prefix("## ").and_then(Section::from_title) {
            flush_quoted(&mut digest, current, &mut quoted);
            current = Some(section);
            continue;
        }
        let section = current?;
        if section.is_quoted() {
            let content = line.strip_prefix("> ").or_else(|| line.strip_prefix('>'))?;
            quoted.push(content);
        } else {
            let item = line.strip_prefix("- ")?;
            match section.shared().and_then(|kind| kind.expand(item)) {
                Some(entries) => digest.get_mut(section).extend(entries),
                None => digest.push(section, item.to_owned()),
            }
        }
    }
    flush_quoted(&mut digest, current, &mut quoted);
    Some(digest)
}

pub(super) fn flush_quoted(digest: &mut Digest, section: Option<Section>, lines: &mut Vec<&str>) {
    if let Some(section) = section.filter(|s| s.is_quoted()) {
        if !lines.is_empty() {
            digest.push(section, lines.join("\n"));
        }
    }
    lines.clear();
}

/// The seqs of the requests and notes dropped from their lists, in seq order, shown as one
/// line after a lead that says how to recall each: a seq costs a few characters where its
/// entry cost a line. Bounded: past its cap the oldest seqs go, and the line says so.
#[derive(Debug, Default)]
struct Recall {
    seqs: std::collections::BTreeSet<i64>,
    elided: bool,
    /// Characters of the seqs, without their separators.
    seq_chars: usize,
}

/// How the recall line starts.
const RECALL_LEAD: &str = "recall observation://<seq> for seq ";
/// How it starts when older seqs had to go.
const RECALL_ELIDED: &str = "… ";

fn digits(seq: i64) -> usize {
    seq.to_string().len()
}

impl Recall {
    fn read(entry: Option<&str>) -> Self {
        let mut recall = Recall::default();
        let Some(entry) = entry else {
            return recall;
        };
        let rest = match entry.strip_prefix(RECALL_ELIDED) {
            Some(rest) => {
                recall.elided = true;
                rest
            }
            None => entry,
        };
        let list = rest.strip_prefix(RECALL_LEAD).unwrap_or_default();
        recall.seqs = list.split(", ").filter_map(|s| s.parse().ok()).collect();
        recall.seq_chars = recall.seqs.iter().map(|&s| digits(s)).sum();
        recall
    }

    /// Adds the seq of `uri`, then drops the oldest while the section is over `cap`.
    fn push(&mut self, uri: &str, cap: usize) {
        let seq = uri.strip_prefix(crate::domain::observation::SCHEME);
        let Some(seq) = seq.and_then(|s| s.parse::<i64>().ok()) else {
            return;
        };
        self.insert(seq);
        self.bound(cap);
    }

    fn insert(&mut self, seq: i64) {
        if self.seqs.insert(seq) {
            self.seq_chars += digits(seq);
        }
    }

    /// Drops the oldest seqs while the section is over `cap`.
    fn bound(&mut self, cap: usize) {
        while self.chars() > cap && self.seqs.len() > 1 {
            self.seq_chars -= self.seqs.pop_first().map_or(0, digits);
            self.elided = true;
        }
    }

    /// Characters of the section as rendered (0 when empty), as `Section::entry_chars` counts
    /// the entry (the lead's `…` is one character).
    fn chars(&self) -> usize {
        let n = self.seqs.len();
        if n == 0 {
            return 0;
        }
        let elided = if self.elided {
            RECALL_ELIDED.chars().count()
        } else {
            0
        };
        let entry = elided + RECALL_LEAD.len() + self.seq_chars + ", ".len() * (n - 1);
        Section::Recall.header_chars() + "- ".len() + entry + 1
    }

    fn entry(&self) -> Option<String> {
        if self.seqs.is_empty() {
            return None;
        }
        let seqs: Vec<String> = self.seqs.iter().map(i64::to_string).collect();
        let elided = if self.elided { RECALL_ELIDED } else { "" };
        Some(format!("{elided}{RECALL_LEAD}{}", seqs.join(", ")))
    }
}
