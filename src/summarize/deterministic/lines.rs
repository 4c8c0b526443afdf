//! Entries that share a place, on one line: the files touched in one directory
//! (`in src/cpu/: memory.c (Edit), arithmetic.c (Read)`), each with its last action, and the
//! errors seen in one file (`in src/cpu/add.c: 12:5: error: …; 40:1: error: …`), rather than a
//! line each that repeats the place. A long session's files share a few directories and its
//! errors a few files, and an absolute place (`/home/dev/project/src/`) is longer than most
//! names in it: one line per place names two to three times as many files in the same
//! characters, and a file's errors cost their messages.
//!
//! The summary keeps one entry per file or error (`path (last: action)`, `path:12:5: error: …`)
//! and only renders them this way, so a later call reads the line back into the same entries
//! ([`Kind::expand`]). Each entry's cost is its own, with its place's once, so entries can be
//! dropped one by one within the summary's bound ([`Lines::drop`]).

use crate::domain::diagnostic::Located;

use super::LAST_ACTION;

/// How a place's line starts, and what follows its place.
const LEAD: &str = "in ";
const AFTER_PLACE: &str = ": ";

/// What a section's entries share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Files touched: their directory. Items are `name (action)`.
    Directories,
    /// Errors: their file. Items are `12:5: message` or `message (at 12:5, 14:5)`.
    Files,
}

impl Kind {
    fn between(self) -> &'static str {
        match self {
            Kind::Directories => ", ",
            Kind::Files => "; ",
        }
    }

    /// An entry as its place and its text on the place's line; `None` for an entry that
    /// keeps a line of its own (one a line could not list unambiguously).
    fn split(self, entry: &str) -> Option<(&str, String)> {
        let (place, item) = match self {
            Kind::Directories => {
                // `src/a.rs (last: Edit)` is `src/` and `a.rs (Edit)`: a file with a
                // directory, no spaces, commas or brackets in its path or action.
                let (path, action) = entry.strip_suffix(')')?.rsplit_once(LAST_ACTION)?;
                let plain = |s: &str| !s.contains(['(', ')', ',']) && !s.is_empty();
                if !plain(path) || !plain(action) || path.contains(char::is_whitespace) {
                    return None;
                }
                let (directory, name) = path.split_at(path.rfind('/')? + 1);
                (!name.is_empty()).then(|| (directory, format!("{name} ({action})")))?
            }
            Kind::Files => match Located::parse(entry) {
                // `src/a.c:12:5: error: x` is `src/a.c` and `12:5: error: x`.
                Some(located) if entry.starts_with(located.path) => {
                    (located.path, entry[located.path.len() + 1..].to_owned())
                }
                // `src/a.c: error: x (at 12:5, 14:5)` is `src/a.c` and the rest.
                _ => {
                    let (path, rest) = entry.split_once(AFTER_PLACE)?;
                    let places = rest.strip_suffix(')')?.rsplit_once(" (at ")?.1;
                    let is_place = places.starts_with(|c: char| c.is_ascii_digit());
                    let is_path = (path.contains('.') || path.contains('/'))
                        && !path.contains(char::is_whitespace);
                    (is_place && is_path).then(|| (path, rest.to_owned()))?
                }
            },
        };
        let one_item = !item.contains(self.between()) && !item.contains('\n');
        (one_item && !place.ends_with(':')).then_some((place, item))
    }

    /// The entries of a place's line, as the summary keeps them; `None` for any other line.
    pub(super) fn expand(self, line: &str) -> Option<Vec<String>> {
        let (place, items) = line.strip_prefix(LEAD)?.split_once(AFTER_PLACE)?;
        if place.is_empty() || place.contains(char::is_whitespace) {
            return None;
        }
        let entries: Option<Vec<String>> = items
            .split(self.between())
            .map(|item| match self {
                Kind::Directories => {
                    let (name, action) = item.strip_suffix(')')?.split_once(" (")?;
                    let name_ok = !name.is_empty() && !name.contains(['/', ' ', '(', ')']);
                    (place.ends_with('/') && name_ok)
                        .then(|| format!("{place}{name}{LAST_ACTION}{action})"))
                }
                Kind::Files if item.starts_with(|c: char| c.is_ascii_digit()) => {
                    Some(format!("{place}:{item}"))
                }
                Kind::Files => Some(format!("{place}{AFTER_PLACE}{item}")),
            })
            .collect();
        // Only a line this module could have written: each entry splits back to this place.
        let entries = entries?;
        let ours = entries
            .iter()
            .all(|e| self.split(e).is_some_and(|(p, _)| p == place));
        ours.then_some(entries)
    }
}

/// The entries of one section, placed in their places' lines.
pub(super) struct Lines {
    kind: Kind,
    /// For each entry, its place's index and its text on that line; `None` for an entry shown
    /// on a line of its own.
    placed: Vec<Option<(usize, String)>>,
    places: Vec<Place>,
}

struct Place {
    name: String,
    /// Entries still shown; the characters of their texts on the line, and of their own lines.
    shown: usize,
    item_chars: usize,
    alone_chars: usize,
}

impl Lines {
    pub(super) fn new(kind: Kind, entries: &[String]) -> Self {
        let mut places: Vec<Place> = Vec::new();
        let placed = entries
            .iter()
            .map(|entry| {
                let (name, item) = kind.split(entry)?;
                let at = match places.iter().position(|p| p.name == name) {
                    Some(at) => at,
                    None => {
                        places.push(Place {
                            name: name.to_owned(),
                            shown: 0,
                            item_chars: 0,
                            alone_chars: 0,
                        });
                        places.len() - 1
                    }
                };
                let place = &mut places[at];
                place.shown += 1;
                place.item_chars += item.chars().count();
                place.alone_chars += line_chars(entry);
                Some((at, item))
            })
            .collect();
        Lines {
            kind,
            placed,
            places,
        }
    }

    /// Characters the entries take as rendered, without the section's header.
    pub(super) fn chars(&self, entries: &[String]) -> usize {
        let alone: usize = (self.placed.iter().zip(entries))
            .filter(|(placed, _)| placed.is_none())
            .map(|(_, entry)| line_chars(entry))
            .sum();
        let between = self.kind.between().len();
        alone + self.places.iter().map(|p| p.chars(between)).sum::<usize>()
    }

    /// Drops the entry at `at`, returning the characters the rendered text loses.
    pub(super) fn drop(&mut self, at: usize, entry: &str) -> usize {
        let Some((p, item)) = &self.placed[at] else {
            return line_chars(entry);
        };
        let between = self.kind.between().len();
        let place = &mut self.places[*p];
        let before = place.chars(between);
        place.shown -= 1;
        place.item_chars -= item.chars().count();
        place.alone_chars -= line_chars(entry);
        before - place.chars(between)
    }

    /// The lines of the entries not `dropped`, each place's line where its newest entry was.
    /// A place left with one entry shows it as a line of its own.
    pub(super) fn render(&self, entries: &[String], dropped: &[bool]) -> Vec<String> {
        let mut items: Vec<Vec<&str>> = vec![Vec::new(); self.places.len()];
        let mut newest = vec![0; self.places.len()];
        for (at, placed) in self.placed.iter().enumerate() {
            if let (Some((p, item)), false) = (placed, dropped[at]) {
                items[*p].push(item);
                newest[*p] = at;
            }
        }
        let mut lines = Vec::new();
        for (at, (placed, entry)) in self.placed.iter().zip(entries).enumerate() {
            match placed {
                _ if dropped[at] => {}
                None => lines.push(entry.clone()),
                Some((p, _)) if newest[*p] == at => {
                    if items[*p].len() == 1 {
                        lines.push(entry.clone());
                    } else {
                        let name = &self.places[*p].name;
                        let items = items[*p].join(self.kind.between());
                        lines.push(format!("{LEAD}{name}{AFTER_PLACE}{items}"));
                    }
                }
                Some(_) => {}
            }
        }
        lines
    }
}

impl Place {
    /// `- in place: a; b` and its newline, or its one entry's own line.
    fn chars(&self, between: usize) -> usize {
        match self.shown {
            0 => 0,
            1 => self.alone_chars,
            n => {
                let line = "- ".len() + LEAD.len() + self.name.chars().count() + 1;
                line + AFTER_PLACE.len() + between * (n - 1) + self.item_chars
            }
        }
    }
}

/// An entry on a line of its own: `- entry` and its newline.
fn line_chars(entry: &str) -> usize {
    "- ".len() + entry.chars().count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Entries whose places collide often, with some a line cannot list: paths with a space
    /// or a comma, a message holding the separator, one without a place.
    fn entries(kind: Kind, picks: &[(usize, usize, usize)]) -> Vec<String> {
        let places = match kind {
            Kind::Directories => ["src/", "/home/dev/p/src/", "a b/", ""],
            Kind::Files => ["src/a.c", "/home/dev/p/b.c", "c.rs", "no place"],
        };
        picks
            .iter()
            .map(|&(place, item, at)| {
                let place = places[place];
                match kind {
                    Kind::Directories => {
                        let name = ["a.rs", "b.c", "x y.c", "c,d.rs"][item];
                        let action = ["Edit", "Read", "named by the user"][at];
                        format!("{place}{name}{LAST_ACTION}{action})")
                    }
                    Kind::Files => {
                        let message = ["error: x", "error: f; have g", "warning: y", "error: z"];
                        match at {
                            0 => format!("{place}: {} (at 1:2, 3:{item})", message[item]),
                            _ => format!("{place}:{at}:{item}: {}", message[item]),
                        }
                    }
                }
            })
            .collect()
    }

    proptest! {
        /// What `chars` and `drop` count is what `render` writes, after any drops, and the
        /// lines read back as the entries not dropped.
        #[test]
        fn the_cost_counted_is_the_text_rendered_and_reads_back(
            files in any::<bool>(),
            picks in vec((0usize..4, 0usize..4, 0usize..3), 0..24),
            drops in vec(any::<bool>(), 24),
        ) {
            let kind = if files { Kind::Files } else { Kind::Directories };
            let entries = entries(kind, &picks);
            let mut lines = Lines::new(kind, &entries);
            let mut cost = lines.chars(&entries);
            let mut dropped = vec![false; entries.len()];
            for (at, entry) in entries.iter().enumerate().filter(|(at, _)| drops[*at]) {
                cost -= lines.drop(at, entry);
                dropped[at] = true;
            }
            let rendered = lines.render(&entries, &dropped);
            prop_assert_eq!(cost, rendered.iter().map(|l| line_chars(l)).sum::<usize>());

            let mut read: Vec<String> = rendered
                .iter()
                .flat_map(|l| kind.expand(l).unwrap_or_else(|| vec![l.clone()]))
                .collect();
            let mut kept: Vec<String> = (entries.iter().zip(&dropped))
                .filter(|(_, &gone)| !gone)
                .map(|(e, _)| e.clone())
                .collect();
            read.sort();
            kept.sort();
            prop_assert_eq!(read, kept);
        }
    }
}
