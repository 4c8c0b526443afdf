//! What of a user's message is a request, a working directory or a rule.

use super::*;
use crate::domain::event::requests::{lines_outside_skills, without_list_marker};

/// A command's template as Spec Kit writes it, with what the user typed after the command.
fn command_template(input: &str) -> String {
    format!(
        "\n## User Input\n\n```text\n{input}\n```\n\nYou **MUST** consider the user input before \
         proceeding (if not empty).\n\n## Outline\n\n1. Run `.specify/scripts/bash/setup-plan.sh \
         --json` from repo root.\n2. Load the spec.\n"
    )
}

#[test]
fn a_request_sent_as_a_commands_template_is_what_the_user_typed_after_the_command() {
    assert_eq!(request_text(&command_template("Phase 5")), "Phase 5");
    let two_lines = command_template("Add auth.\nUse OAuth only.");
    assert_eq!(request_text(&two_lines), "Add auth.\nUse OAuth only.");
    // Nothing typed: the template's own words, from its first instruction on.
    let bare = command_template("");
    let request = request_text(&bare);
    assert!(
        request.starts_with("1. Run `.specify/scripts/bash/setup-plan.sh"),
        "{request}"
    );
    assert!(request.ends_with("2. Load the spec."), "{request}");
    // The heading quoted, or a block that never closes, is the user's own text.
    let quoted = "What does `## User Input` in the template mean?";
    assert_eq!(request_text(quoted), quoted);
    let unclosed = "## User Input\n\n```text\nPhase 5\n";
    assert_eq!(request_text(unclosed), unclosed);
    let unfenced = "## User Input\n\nPhase 5";
    assert_eq!(request_text(unfenced), unfenced);
    // A fence with an info string opens no block and closes none, as in Markdown.
    let nested = "## User Input\n\n```text\nAdd this:\n```json\n{}\n```\n\nYou **MUST** …";
    assert_eq!(request_text(nested), "Add this:\n```json\n{}");
}

#[test]
fn a_request_is_the_words_after_an_ides_heading_or_the_whole_text() {
    let ide = "# Context from my IDE setup:\n\n## Open tabs:\n- a.ts\n\n## My request for Codex:\nfix it\n";
    assert_eq!(request_text(ide), "fix it\n");
    assert_eq!(request_text("\n## My request for Codex:\nfix it"), "fix it");
    // Named inside a line, or with nothing after it, the heading is the user's own text.
    let quoted = "what does `## My request for Codex:` mean?";
    assert_eq!(request_text(quoted), quoted);
    let both = format!("# Context:\n- tab: {quoted}\n## My request for Codex:\nfix it");
    assert_eq!(request_text(&both), "fix it");
    let bare = "## My request for Codex:\n  ";
    assert_eq!(request_text(bare), bare);
    assert_eq!(request_text("fix it"), "fix it");
}

#[test]
fn a_projects_instructions_from_the_harness_are_no_request() {
    let agents = "# AGENTS.md instructions for /home/me/app\n\n<INSTRUCTIONS>\nNever push to main.\n</INSTRUCTIONS>";
    assert_eq!(
        instructions_title(agents),
        Some("AGENTS.md instructions for /home/me/app")
    );
    let older = "<user_instructions>\n\n# Repository Guidelines\n\n</user_instructions>";
    assert!(instructions_title(older).is_some());
    assert!(!is_request(agents) && !is_request(older));
    // The environment's context sent after them changes nothing; the user's own words do.
    let with_context =
        format!("{agents}\n<environment_context>\n  <cwd>/app</cwd>\n</environment_context>");
    assert!(!is_request(&with_context));
    let with_words = format!("{agents}\n\nFix the login page.");
    assert!(is_request(&with_words) && instructions_title(&with_words).is_none());
    // Markup a harness wrote is no request either; the user's words are, whatever they name.
    assert!(!is_request(
        "<environment_context>\n  <cwd>/app</cwd>\n</environment_context>"
    ));
    for text in [
        "fix it",
        "read # AGENTS.md instructions for x",
        "## My request for Codex:\nfix it",
    ] {
        assert!(is_request(text), "{text}");
        assert_eq!(instructions_title(text), None);
    }
}

/// The working directory is what the environment's context a harness sends states, not a
/// `<cwd>` the user's own words quote, nor a directory other than an absolute POSIX one.
#[test]
fn the_working_directory_is_the_one_the_environments_context_states() {
    let codex = "<environment_context>\n  <cwd>/Users/me/app/</cwd>\n  <approval_policy>never</approval_policy>\n</environment_context>";
    assert_eq!(stated_working_directory(codex), Some("/Users/me/app"));
    let after_instructions = format!(
        "# AGENTS.md instructions for /Users/me/app\n<INSTRUCTIONS>\nBe brief.\n</INSTRUCTIONS>\n{codex}"
    );
    assert_eq!(
        stated_working_directory(&after_instructions),
        Some("/Users/me/app")
    );
    for other in [
        "Why does my prompt say <environment_context><cwd>/tmp/x</cwd></environment_context>?",
        "<environment_context>\n<cwd>g:\\work\\app</cwd>\n</environment_context>",
        "<environment_context>\n<shell>zsh</shell>\n</environment_context>\n<cwd>/tmp/x</cwd>",
        "cd /home/me/app && ls",
    ] {
        assert_eq!(stated_working_directory(other), None, "{other}");
    }
}

/// A rule written as a list item is the rule: the summary lists it under its own marker, so
/// the item's marker went with it (`- - never push`).
#[test]
fn a_constraint_written_as_a_list_item_is_its_words() {
    let text = "Rules:\n- Never push to main\n  * **IMPORTANT**: do not edit the lockfile\n\
        2. Always run the tests\n10) must pass clippy\n3.5 must be the version\n\
        -x must stay as it is\n• only ASCII please";
    assert_eq!(
        constraint_lines(text).collect::<Vec<_>>(),
        [
            "Never push to main",
            "**IMPORTANT**: do not edit the lockfile",
            "Always run the tests",
            "must pass clippy",
            "3.5 must be the version",
            "-x must stay as it is",
            "only ASCII please",
        ]
    );
    assert_eq!(without_list_marker("**bold** must"), "**bold** must");
    assert_eq!(
        without_list_marker("1234. four digits"),
        "1234. four digits"
    );
}

/// The skills catalogue Codex writes into a project's instructions states how to use its
/// skills, the same for every user: none of its lines is a rule of the user's, and the
/// project's rules around it still are.
#[test]
fn a_harness_skills_catalogue_states_no_rule_of_the_users() {
    let text = "# AGENTS.md instructions for /home/me/app\n\n<INSTRUCTIONS>\n\
        - Never push to main.\n\
        ## Skills\n\
        A skill is a set of local instructions to follow that is stored in a `SKILL.md` file.\n\
        ### Available skills\n\
        - audit: Use only when the user asks for an audit. (file: /s/audit/SKILL.md)\n\
        ### How to use skills\n\
        - Trigger rules: you must use that skill for that turn.\n\
        - Keep context small: only load extra files when needed.\n\
        ## Testing\n\
        - Always run `make test` before a commit.\n\
        </INSTRUCTIONS>\n\
        <skills_instructions>\n- You must open SKILL.md first.\n</skills_instructions>\n\
        Do not edit the lockfile.";
    assert_eq!(
        constraint_lines(text).collect::<Vec<_>>(),
        [
            "Never push to main.",
            "Always run `make test` before a commit.",
            "Do not edit the lockfile."
        ]
    );
    // A section named so that is not the catalogue stays.
    let own = "## Skills\nWe must only hire people who can write.";
    assert_eq!(lines_outside_skills(own).count(), 2);
}

/// "I do not see the icon" says what the user sees, not what the agent must keep honouring:
/// "do not" after "I", "we" or "they" states no rule, unless the line states one besides.
#[test]
fn what_the_user_does_not_see_or_need_is_no_rule() {
    let text = "I do not see an icon or something else\n\
        We don't need to restore the umls-mcp-server\n\
        I think we shall remove it since I do not see a clear vision.\n\
        On the trips list they don't show the tags.\n\
        Don't attempt to run `vp vitest`. They do not exist.\n\
        Please do not push to main.\n\
        You don't need to install other dependencies.\n\
        I don't mind the colours, but never change the layout.";
    assert_eq!(
        constraint_lines(text).collect::<Vec<_>>(),
        [
            "Don't attempt to run `vp vitest`. They do not exist.",
            "Please do not push to main.",
            "You don't need to install other dependencies.",
            "I don't mind the colours, but never change the layout.",
        ]
    );
}
