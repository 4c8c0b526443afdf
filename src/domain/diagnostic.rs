//! A compiler's diagnostic at a place (`src/a.c:12:5: error: …`), and one message at many
//! places: a failed build often reports the same error at dozens of lines of one file, and a
//! summary names them once, with their places (`src/a.c: error: … (at 12:5, 14:5)`).
//!
//! The shape is the one GCC, Clang, Go, mypy and most linters print: a path, a line, an
//! optional column, then the message.

/// Between a group's message and its places.
const AT: &str = " (at ";
/// Between two places of a group.
const SEPARATOR: &str = ", ";
/// After the count of places past a group's bound.
const MORE: &str = " more";

/// One diagnostic at one place: `path:line[:column]: message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located<'a> {
    pub path: &'a str,
    /// `line` or `line:column`.
    pub place: &'a str,
    pub message: &'a str,
}

impl<'a> Located<'a> {
    /// The diagnostic a line states, when it has the shape: a path of one word with a `.` or a
    /// `/` in it, a line number and an optional column, each after a `:`, then `: ` and a
    /// message.
    pub fn parse(line: &'a str) -> Option<Self> {
        let line = line.trim();
        let mut from = 0;
        while let Some(i) = line[from..].find(':').map(|i| from + i) {
            if let Some((place, message)) = place_and_message(&line[i + 1..]) {
                let path = &line[..i];
                let is_path = !path.is_empty()
                    && !path.contains(char::is_whitespace)
                    && (path.contains('.') || path.contains('/'));
                return is_path.then_some(Located {
                    path,
                    place,
                    message,
                });
            }
            from = i + 1;
        }
        None
    }
}

/// `12:5: message` or `12: message` as its place and message.
fn place_and_message(rest: &str) -> Option<(&str, &str)> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let line = digits(rest);
    if line == 0 {
        return None;
    }
    let mut end = line;
    if rest[end..].starts_with(':') {
        let column = digits(&rest[end + 1..]);
        if column > 0 {
            end += 1 + column;
        }
    }
    let message = rest[end..].strip_prefix(": ")?.trim();
    (!message.is_empty()).then(|| (&rest[..end], message))
}

/// One message of one file at its places, in the order first seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub path: String,
    pub message: String,
    pub places: Vec<String>,
}

impl Group {
    /// A group of one diagnostic.
    pub fn of(located: &Located<'_>) -> Self {
        Group {
            path: located.path.to_owned(),
            message: located.message.to_owned(),
            places: vec![located.place.to_owned()],
        }
    }

    /// The group a line states: a rendered group or a single diagnostic.
    pub fn parse(line: &str) -> Option<Self> {
        let line = line.trim();
        if let Some(located) = Located::parse(line) {
            return Some(Group::of(&located));
        }
        let (head, places) = line.strip_suffix(')')?.rsplit_once(AT)?;
        let (path, message) = head.split_once(": ")?;
        // Places past the bound were counted, not named: the group names only those shown.
        let places: Vec<String> = places
            .split(SEPARATOR)
            .filter(|p| !p.ends_with(MORE))
            .map(str::to_owned)
            .collect();
        let is_place = |p: &String| {
            p.split(':').count() <= 2 && p.split(':').all(|n| n.parse::<u32>().is_ok())
        };
        (!path.contains(char::is_whitespace) && places.iter().all(is_place)).then(|| Group {
            path: path.to_owned(),
            message: message.to_owned(),
            places,
        })
    }

    /// Whether `other` is the same message of the same file. A message cut short (ending in
    /// `…`) is the same as one it begins; a shorter message that is not cut is another one.
    pub fn same_as(&self, other: &Group) -> bool {
        let cut_of =
            |cut: &str, whole: &str| cut.strip_suffix('…').is_some_and(|c| whole.starts_with(c));
        let (a, b) = (self.message.as_str(), other.message.as_str());
        self.path == other.path && (a == b || cut_of(a, b) || cut_of(b, a))
    }

    /// Takes in `other`'s places (the same message: [`Group::same_as`]), and its message when
    /// that one is the longer.
    pub fn absorb(&mut self, other: Group) {
        if other.message.trim_end_matches('…').len() > self.message.trim_end_matches('…').len()
        {
            self.message = other.message;
        }
        for place in other.places {
            if !self.places.contains(&place) {
                self.places.push(place);
            }
        }
    }

    /// The group as a line: a diagnostic of one place as the compiler printed it, else
    /// `path: message (at 12:5, 14:5)`, its places cut to `max_places_chars` characters.
    pub fn render(&self, max_places_chars: usize) -> String {
        if let [place] = self.places.as_slice() {
            return format!("{}:{place}: {}", self.path, self.message);
        }
        let mut places = String::new();
        for (i, place) in self.places.iter().enumerate() {
            let sep = if i == 0 { "" } else { SEPARATOR };
            if places.len() + sep.len() + place.len() > max_places_chars && i > 0 {
                let more = self.places.len() - i;
                places.push_str(&format!("{SEPARATOR}{more}{MORE}"));
                break;
            }
            places.push_str(sep);
            places.push_str(place);
        }
        format!("{}: {}{AT}{places})", self.path, self.message)
    }

    /// Whether the group names `located`: its file, its place and (a start of) its message.
    pub fn names(&self, located: &Located<'_>) -> bool {
        self.path == located.path
            && self.places.iter().any(|p| p == located.place)
            && self
                .message
                .trim_end_matches('…')
                .starts_with(located.message.trim_end_matches('…'))
    }
}

/// The lines of `lines`, each group of one message of one file merged where its newest member
/// was (a summary's list across runs: the most recent last), the rest as they are, in order.
pub fn grouped<I: IntoIterator<Item = String>>(lines: I) -> Vec<Entry> {
    group_lines(lines, true)
}

/// [`grouped`], each group where its first member was: one output's errors in the order it
/// printed them, so that the first entries are its first errors.
pub fn grouped_in_reading_order<I: IntoIterator<Item = String>>(lines: I) -> Vec<Entry> {
    group_lines(lines, false)
}

fn group_lines<I: IntoIterator<Item = String>>(lines: I, at_newest: bool) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for line in lines {
        let Some(group) = Group::parse(&line) else {
            out.push(Entry::Line(line));
            continue;
        };
        let earlier = out
            .iter()
            .position(|e| matches!(e, Entry::Group(g) if g.same_as(&group)));
        match earlier {
            Some(i) if at_newest => {
                let Entry::Group(mut merged) = out.remove(i) else {
                    unreachable!("a group's position")
                };
                merged.absorb(group);
                out.push(Entry::Group(merged));
            }
            Some(i) => {
                if let Entry::Group(merged) = &mut out[i] {
                    merged.absorb(group);
                }
            }
            None => out.push(Entry::Group(group)),
        }
    }
    out
}

/// A line of [`grouped`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Group(Group),
    Line(String),
}

impl Entry {
    /// The entry as a line: a group as [`Group::render`] writes it, a line as it is.
    pub fn render(self, max_places_chars: usize) -> String {
        match self {
            Entry::Group(group) => group.render(max_places_chars),
            Entry::Line(line) => line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiler_diagnostic_is_read_as_its_file_place_and_message() {
        let located = Located::parse("src/vsla_tensor.c:105:19: error: invalid use of ‘t’");
        assert_eq!(
            located,
            Some(Located {
                path: "src/vsla_tensor.c",
                place: "105:19",
                message: "error: invalid use of ‘t’",
            })
        );
        let mypy = Located::parse("app/models.py:12: error: Incompatible types").unwrap();
        assert_eq!((mypy.path, mypy.place), ("app/models.py", "12"));
        for not_one in [
            "error: could not compile `billing`",
            "thread 'main' panicked at src/main.rs:2:5:",
            "Running test: 2D Tensor Operations... FAILED",
            "at 10:30: error: something",
            "collect2: error: ld returned 1 exit status",
        ] {
            assert_eq!(Located::parse(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn one_message_at_many_places_is_one_line_naming_each_place() {
        let lines = [
            "src/t.c:84:11: error: invalid use of incomplete typedef ‘t’",
            "src/t.c:85:11: error: invalid use of incomplete typedef ‘t’",
            "src/u.c:3:1: error: invalid use of incomplete typedef ‘t’",
            "src/t.c:90:2: error: ‘t’ has no member named ‘data’",
            "collect2: error: ld returned 1 exit status",
            "src/t.c:86:11: error: invalid use of incomplete typedef ‘t’",
        ]
        .map(str::to_owned);
        let rendered: Vec<String> = grouped(lines).into_iter().map(|e| e.render(200)).collect();
        assert_eq!(
            rendered,
            [
                "src/u.c:3:1: error: invalid use of incomplete typedef ‘t’",
                "src/t.c:90:2: error: ‘t’ has no member named ‘data’",
                "collect2: error: ld returned 1 exit status",
                "src/t.c: error: invalid use of incomplete typedef ‘t’ (at 84:11, 85:11, 86:11)",
            ]
        );
        // Read back, a rendered group takes in more places of its message.
        let again = grouped([
            rendered[3].clone(),
            "src/t.c:87:11: error: invalid use of incomplete typedef ‘t’".to_owned(),
        ]);
        let [Entry::Group(group)] = again.as_slice() else {
            panic!("{again:?}");
        };
        assert_eq!(group.places, ["84:11", "85:11", "86:11", "87:11"]);
        let located = Located::parse("src/t.c:85:11: error: invalid use of incomplete").unwrap();
        assert!(group.names(&located));
        let elsewhere = Located::parse("src/t.c:99:1: error: invalid use of incomplete").unwrap();
        assert!(!group.names(&elsewhere));
    }

    #[test]
    fn in_reading_order_a_group_stays_where_its_first_member_was() {
        let lines = [
            "a.c:1:1: error: x",
            "b.c:2:1: error: y",
            "a.c:3:1: error: x",
        ]
        .map(str::to_owned);
        let rendered: Vec<String> = grouped_in_reading_order(lines)
            .into_iter()
            .map(|e| e.render(100))
            .collect();
        assert_eq!(
            rendered,
            ["a.c: error: x (at 1:1, 3:1)", "b.c:2:1: error: y"]
        );
    }

    #[test]
    fn a_message_cut_short_is_the_same_as_the_one_it_begins() {
        let long = "src/t.c:1:1: error: a very long message that goes on";
        let cut = "src/t.c:2:1: error: a very long mess…";
        let shorter = "src/t.c:3:1: error: a very long message";
        assert_eq!(grouped([shorter.to_owned(), long.to_owned()]).len(), 2);
        let entries = grouped([cut.to_owned(), long.to_owned()]);
        let [Entry::Group(group)] = entries.as_slice() else {
            panic!("not one group: {entries:?}");
        };
        assert_eq!(group.message, "error: a very long message that goes on");
        assert_eq!(group.places, ["2:1", "1:1"]);
    }

    proptest::proptest! {
        /// Grouping loses nothing: every diagnostic of the lines is named, at its place, by the
        /// line its group renders (within the bound), read back; every other line is kept as
        /// it was; and a rendered group read back groups to itself.
        #[test]
        fn every_diagnostic_is_named_by_its_group_read_back(
            lines in proptest::collection::vec(
                "(src/[ab]\\.c:[1-9][0-9]?(:[1-9])?: error: (x|y|y z)|collect2: error: ld|FAILED t[0-9])",
                0..40,
            ),
        ) {
            let rendered: Vec<String> = grouped(lines.iter().cloned())
                .into_iter()
                .map(|e| e.render(10_000))
                .collect();
            for line in &lines {
                match Located::parse(line) {
                    Some(located) => proptest::prop_assert!(
                        rendered.iter().filter_map(|r| Group::parse(r)).any(|g| g.names(&located)),
                        "{} not named by {:?}", line, rendered
                    ),
                    None => proptest::prop_assert!(rendered.contains(line)),
                }
            }
            // A group names only places its message was reported at.
            for group in rendered.iter().filter_map(|r| Group::parse(r)) {
                for place in &group.places {
                    let reported = lines.iter().filter_map(|l| Located::parse(l)).any(|l| {
                        l.path == group.path && l.place == place && l.message == group.message
                    });
                    proptest::prop_assert!(reported, "{:?} at {} in {:?}", group, place, lines);
                }
            }
            let again: Vec<String> = grouped(rendered.iter().cloned())
                .into_iter()
                .map(|e| e.render(10_000))
                .collect();
            proptest::prop_assert_eq!(again, rendered);
        }
    }

    #[test]
    fn places_past_the_bound_are_counted() {
        let group = Group {
            path: "a.c".into(),
            message: "error: x".into(),
            places: (1..=40).map(|n| format!("{n}:1")).collect(),
        };
        let line = group.render(30);
        assert!(
            line.starts_with("a.c: error: x (at 1:1, 2:1, 3:1"),
            "{line}"
        );
        assert!(line.ends_with(" more)"), "{line}");
        let shown = Group::parse(&line).unwrap();
        assert!(shown.names(&Located::parse("a.c:1:1: error: x").unwrap()));
        assert!(!shown.names(&Located::parse("a.c:40:1: error: x").unwrap()));
    }
}
