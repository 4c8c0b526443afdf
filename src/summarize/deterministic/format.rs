//! Formatting: the sections rendered within the size bound, and a summary this module wrote
//! read back so that the next call extends it rather than nesting it.

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
        let mut total: usize = Section::ALL
            .iter()
            .map(|&s| section_chars(s, &costs[s as usize]))
            .sum();

        // Lists drop their oldest items from `start`; each drop is O(1).
        let mut start = [0usize; Section::ALL.len()];
        for floor in [ITEMS_KEPT_LONGEST, 0] {
            for section in Section::DROP_ORDER {
                let i = section as usize;
                while total > max_chars && costs[i].len() - start[i] > floor {
                    total -= costs[i][start[i]];
                    start[i] += 1;
                    if start[i] == costs[i].len() {
                        total -= section.header_chars();
                    }
                }
            }
        }
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
        for section in Section::ALL {
            let i = section as usize;
            let entries = self.sections[i].get(start[i]..).unwrap_or_default();
            if entries.is_empty() {
                continue;
            }
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
            digest.push(section, item.to_owned());
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
