//! What of a user message is the user's request: the words after an IDE's context or typed
//! after a command whose template the message holds, and the
//! messages a harness sends in the user's name (a project's instructions, its markup).

/// The heading the Codex IDE extension writes before the user's own words, after the editor's
/// context (`# Context from my IDE setup:`, the active file, the open tabs).
const IDE_REQUEST_HEADING: &str = "## My request for Codex:";

/// The heading a command's template opens with, above a fenced block holding what the user
/// typed after the command: Spec Kit writes it for every agent it supports (`/speckit.plan`,
/// `/speckit.implement`, …), as `## User Input`, then `$ARGUMENTS` in a ```` ```text ```` block.
const COMMAND_INPUT_HEADING: &str = "## User Input";

/// The part of a user message's text that is the user's own request: what they typed after a
/// command whose template the message is ([`command_input`]), what follows the heading an IDE
/// extension writes before it ([`IDE_REQUEST_HEADING`]), else the whole text.
pub fn request_text(text: &str) -> &str {
    if let Some(input) = command_input(text) {
        return input;
    }
    let heading = text
        .match_indices(IDE_REQUEST_HEADING)
        .find(|(at, _)| text[..*at].is_empty() || text[..*at].ends_with('\n'));
    match heading {
        Some((at, _)) => {
            let after = &text[at + IDE_REQUEST_HEADING.len()..];
            if after.trim().is_empty() {
                text
            } else {
                after.trim_start()
            }
        }
        None => text,
    }
}

/// When `text` is a command's template ([`COMMAND_INPUT_HEADING`], then a fenced block), what
/// the user typed after the command: the block's text, or, when they typed nothing, the
/// template's own words from its first instruction on (`1. Run …`, `Goal: …`), past its
/// headings and any line about the user's input (`You **MUST** consider the user input …`).
/// `None` for any other text.
fn command_input(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix(COMMAND_INPUT_HEADING)?;
    let rest = rest.trim_start();
    let fence_len = rest.len() - rest.trim_start_matches('`').len();
    if fence_len < 3 {
        return None;
    }
    // The block opens after its info string (`text`) and closes on a line of backticks
    // alone, at least as many as opened it.
    let (_, block) = rest[fence_len..].split_once('\n')?;
    let (close, line) = lines_at(block).find(|(_, line)| {
        let marks = line.trim();
        marks.len() >= fence_len && marks.bytes().all(|b| b == b'`')
    })?;
    let input = block[..close].trim();
    if !input.is_empty() {
        return Some(input);
    }
    let after = &block[close + line.len()..];
    let (first, _) = lines_at(after).find(|(_, line)| {
        let words = line.trim();
        !(words.is_empty()
            || words.starts_with('#')
            || words.to_ascii_lowercase().contains("user input"))
    })?;
    Some(after[first..].trim_end())
}

/// Each line of `text`, its newline kept, with the offset it starts at.
fn lines_at(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_inclusive('\n').scan(0, |at, line| {
        let start = *at;
        *at += line.len();
        Some((start, line))
    })
}

/// The heading Codex writes before a project's AGENTS.md, which it sends as a user message.
const AGENTS_HEADING: &str = "# AGENTS.md instructions for ";

/// The tag an older Codex wraps a project's AGENTS.md in.
const USER_INSTRUCTIONS_TAG: &str = "<user_instructions>";

/// What a user message is named by when its text is a project's standing instructions that the
/// agent's harness sends on the user's behalf, rather than a request: a project's AGENTS.md as
/// Codex sends it (`# AGENTS.md instructions for DIR`, then `<INSTRUCTIONS>…</INSTRUCTIONS>`,
/// or wrapped in `<user_instructions>` by older versions), followed by nothing or by markup
/// only. `None` for any other text: the user's own words after the instructions make it a
/// request.
pub fn instructions_title(text: &str) -> Option<&str> {
    let text = text.trim_start();
    let (title, close) = if text.starts_with(AGENTS_HEADING) {
        let heading = text.lines().next().unwrap_or_default().trim_end();
        (&heading["# ".len()..], "</INSTRUCTIONS>")
    } else if text.starts_with(USER_INSTRUCTIONS_TAG) {
        (
            "the user's instructions (<user_instructions>)",
            "</user_instructions>",
        )
    } else {
        return None;
    };
    let after = text.split_once(close).map_or("", |(_, after)| after.trim());
    (after.is_empty() || is_markup_only(after)).then_some(title)
}

/// The tag Codex wraps the environment's context in, which it sends as a user message.
const ENVIRONMENT_CONTEXT_TAG: &str = "<environment_context>";

/// The working directory a harness states in the environment's context it sends as the user
/// (Codex: `<environment_context>` at a line's start, with `<cwd>/home/me/app</cwd>`); `None`
/// for any other text, a `<cwd>` in the user's own words, or a directory that is not absolute
/// in POSIX form.
pub fn stated_working_directory(text: &str) -> Option<&str> {
    let (at, _) = text
        .match_indices(ENVIRONMENT_CONTEXT_TAG)
        .find(|(at, _)| {
            let before = text[..*at].trim_end_matches([' ', '\t']);
            before.is_empty() || before.ends_with('\n')
        })?;
    let context = &text[at..];
    let context = context
        .split_once("</environment_context>")
        .map_or(context, |(c, _)| c);
    let (_, rest) = context.split_once("<cwd>")?;
    let (directory, _) = rest.split_once("</cwd>")?;
    let directory = directory.trim().trim_end_matches('/');
    (directory.starts_with('/') && !directory.contains(char::is_whitespace)).then_some(directory)
}

/// Whether a user message's text is a request of the user's: neither markup a harness wrote
/// (see [`is_markup_only`]) nor a project's instructions it sent ([`instructions_title`]).
pub fn is_request(text: &str) -> bool {
    instructions_title(text).is_none() && !is_markup_only(text)
}

/// The caveat Claude Code writes as the user before a local command's output. Earlier versions
/// wrapped it in `<local-command-caveat>`; later ones send it bare (marked `isMeta` in the log,
/// which a client of ctxd does not pass on).
const LOCAL_COMMAND_CAVEAT: &str =
    "Caveat: The messages below were generated by the user while running local commands.";

/// Whether a user message's text is markup only: it opens with a tag and ends by closing one,
/// as an agent's harness writes on the user's behalf (a slash command's name and its output, a
/// caveat about them, a file opened in the editor: `<command-name>/exit</command-name>`), or it
/// is the caveat Claude Code sends bare ([`LOCAL_COMMAND_CAVEAT`]).
/// Such text states no request or constraint of the user's, though it may name files.
pub fn is_markup_only(text: &str) -> bool {
    fn is_tag_name(name: &str) -> bool {
        let mut chars = name.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }
    let text = text.trim();
    if text.starts_with(LOCAL_COMMAND_CAVEAT) {
        return true;
    }
    let opens = text
        .strip_prefix('<')
        .and_then(|t| t.split_once('>'))
        .is_some_and(|(name, _)| is_tag_name(name));
    let closes = text
        .strip_suffix('>')
        .and_then(|t| t.rsplit_once("</"))
        .is_some_and(|(_, name)| is_tag_name(name));
    opens && closes
}

/// The lines of a user's message that state a constraint ([`states_a_rule`]), without the list
/// marker before them. What the agent must keep honouring long after the turn.
pub fn constraint_lines(text: &str) -> impl Iterator<Item = &str> {
    rule_lines(text).filter(|line| states_a_rule(line))
}

/// Whether a line of the user's states a rule: "never…", "do not…", "must…", "always…",
/// "only…", "without…", "should not…". "Do not" after "I", "we" or "they" says what the
/// speaker does not do, see or know ("I do not see the icon", "we don't need it"): no rule,
/// unless the line states one besides.
pub fn states_a_rule(line: &str) -> bool {
    const WORDS: [&str; 6] = [
        " never ",
        " must ",
        " always ",
        " only ",
        " without ",
        " should not ",
    ];
    if line.len() < 8 {
        return false;
    }
    let lower = format!(" {} ", line.to_lowercase());
    let told = |at: usize| {
        let before = lower[..at].trim_end();
        let word = before.rsplit([' ', '\t', '"', '(']).next().unwrap_or("");
        !matches!(word, "i" | "we" | "they")
    };
    WORDS.iter().any(|w| lower.contains(w))
        || [" do not ", " don't "]
            .iter()
            .any(|w| lower.match_indices(w).any(|(at, _)| told(at)))
}

/// The lines of a user's message a rule may be stated on, each trimmed and without the list
/// marker before it; a harness's skills catalogue left out ([`lines_outside_skills`]).
pub fn rule_lines(text: &str) -> impl Iterator<Item = &str> {
    lines_outside_skills(text).map(|line| without_list_marker(line.trim()))
}

/// How a harness opens the skills catalogue it writes into a project's instructions (Codex).
const SKILLS_CATALOGUE: &str = "A skill is a set of local instructions";

/// The lines of `text` but a skills catalogue a harness writes into it: Codex's `## Skills`
/// section that opens "A skill is a set of local instructions…", up to the next heading of its
/// level or closing tag, or a `<skills_instructions>` block. How to use the harness's skills
/// is the same for every user, and none of the user's rules.
pub(super) fn lines_outside_skills(text: &str) -> impl Iterator<Item = &str> {
    #[derive(Clone, Copy)]
    enum Inside {
        Nothing,
        Section,
        Block,
    }
    let mut lines = text.lines().peekable();
    let mut inside = Inside::Nothing;
    std::iter::from_fn(move || loop {
        let line = lines.next()?;
        let trimmed = line.trim();
        match inside {
            Inside::Block => {
                if trimmed.contains("</skills_instructions>") {
                    inside = Inside::Nothing;
                }
                continue;
            }
            Inside::Section if trimmed.starts_with("## ") || trimmed.starts_with("</") => {
                inside = Inside::Nothing;
            }
            Inside::Section => continue,
            Inside::Nothing => {}
        }
        if trimmed.starts_with("<skills_instructions>") {
            if !trimmed.contains("</skills_instructions>") {
                inside = Inside::Block;
            }
            continue;
        }
        let catalogue = |next: &&str| next.trim_start().starts_with(SKILLS_CATALOGUE);
        if trimmed == "## Skills" && lines.peek().is_some_and(catalogue) {
            inside = Inside::Section;
            continue;
        }
        return Some(line);
    })
}

/// `line` without the marker of a list item it opens with (`- `, `* `, `+ `, `• `, `1. `,
/// `1) `): the rule a list states is its words, and a summary lists it under its own marker.
pub(super) fn without_list_marker(line: &str) -> &str {
    let numbered = line
        .find(|c: char| !c.is_ascii_digit())
        .filter(|&at| (1..=3).contains(&at))
        .and_then(|at| line[at..].strip_prefix(['.', ')']));
    let rest = ["- ", "* ", "+ ", "• "]
        .iter()
        .find_map(|marker| line.strip_prefix(marker))
        .or_else(|| numbered.filter(|rest| rest.starts_with(' ')));
    rest.map_or(line, str::trim_start)
}
