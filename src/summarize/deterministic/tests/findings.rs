//! What the assistant said it found or decided, kept when its turn is folded.

use super::*;

#[test]
fn a_folded_finding_is_kept_with_its_reference_and_the_chatter_is_not() {
    let events = [
        user(1, "Why do invoice totals drift?"),
        assistant(
            2,
            "I read the module. The issue is that each line is rounded with f64 before the sum. \
             Let me look at the tests next.",
        ),
        assistant(
            3,
            "Decision: use rust_decimal for money, because f64 loses cents on sums of many lines.",
        ),
        assistant(4, "Running the tests now."),
    ];
    let text = run(&Summary::default(), &events, 4000).summary.text;
    for expected in [
        "## What the assistant found or decided\n- observation://2 The issue is that each line is \
         rounded with f64 before the sum.\n",
        "- observation://3 Decision: use rust_decimal for money, because f64 loses cents on sums \
         of many lines.\n",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let findings = text
        .split("## What the assistant found or decided\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    for chatter in ["I read the module", "Let me look", "Running the tests"] {
        assert!(!findings.contains(chatter), "{chatter:?} in\n{findings}");
    }
}

#[test]
fn a_finding_said_again_is_listed_once_and_grows_from_an_earlier_summary() {
    let said = "The problem is that the cache key ignores the tenant.";
    let first = run(&Summary::default(), &[assistant(1, said)], 4000);
    let second = run(
        &first.summary,
        &[
            assistant(5, said),
            assistant(
                6,
                "Rebuilding the index didn't work, the stale entries came back.",
            ),
        ],
        4000,
    );
    let text = &second.summary.text;
    assert_eq!(text.matches(said).count(), 1, "{text}");
    assert!(
        text.contains(&format!("- observation://1 {said}")),
        "{text}"
    );
    assert!(
        text.contains(
            "- observation://6 Rebuilding the index didn't work, the stale entries came back."
        ),
        "{text}"
    );
}

/// A tight summary lets older findings go before the facts of the tools, keeping the newest.
#[test]
fn older_findings_give_way_first_in_a_tight_summary() {
    let mut events = vec![user(1, "Fix the build.")];
    for i in 0..30 {
        events.push(assistant(
            2 + i,
            &format!("Attempt {i} failed because the header {i} is included twice in the unit."),
        ));
    }
    events.push(call(40, "c", "read_file", json!({"path": "src/main.rs"})));
    events.push(result(41, "c", "fn main() {}", false));
    let text = run(&Summary::default(), &events, 1200).summary.text;
    assert!(text.chars().count() <= 1200, "{text}");
    assert!(text.contains("Attempt 29 failed because"), "{text}");
    assert!(!text.contains("Attempt 0 failed because"), "{text}");
    assert!(text.contains("src/main.rs"), "{text}");
}

proptest::proptest! {
    /// Any text, in any script, splits into findings without a panic, each a piece of it.
    #[test]
    fn findings_are_pieces_of_any_text(text in "(\\PC|[.!? ]|because ){0,400}") {
        for finding in super::super::facts::finding_sentences(&text) {
            proptest::prop_assert!(text.contains(finding), "{finding:?}");
            proptest::prop_assert!(!finding.is_empty());
        }
    }
}

#[test]
fn sentences_split_after_a_mark_and_a_space_in_any_script() {
    let text = "Größe geprüft. Das schlug fehl, because the ß is two bytes! Next? Done.";
    let found: Vec<&str> = super::super::facts::finding_sentences(text).collect();
    assert_eq!(found, ["Das schlug fehl, because the ß is two bytes!"]);
}
