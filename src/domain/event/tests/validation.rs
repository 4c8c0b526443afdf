//! What an appended event must hold, and the names of the fields that break a rule.

use super::*;

#[test]
fn a_valid_message_of_each_role() {
    for role in ["system", "user", "assistant"] {
        let e = validate(json!({"type": "message", "role": role, "content": "hi"})).unwrap();
        assert_eq!(e.body.role().unwrap().as_str(), role);
    }
    let e = validate(json!({"type":"message","role":"tool","tool_call_id":"c1","content":"ok"}))
        .unwrap();
    assert_eq!(e.body.tool_call_id(), Some("c1"));
    let EventBody::Message(m) = e.body else {
        panic!()
    };
    assert_eq!(
        m.is_error,
        Some(false),
        "a tool result's is_error defaults to false"
    );
}

#[test]
fn empty_content_only_on_a_tool_result_or_an_assistant_tool_call() {
    let ok = validate(json!({"type":"message","role":"assistant",
        "tool_calls":[{"id":"c1","name":"ls","arguments":"{}"}]}));
    assert!(ok.is_ok());
    for result in [
        json!({"type":"message","role":"tool","tool_call_id":"c1","content":""}),
        json!({"type":"message","role":"tool","tool_call_id":"c1"}),
    ] {
        let event = validate(result).expect("a result with no output is valid");
        assert_eq!(event.body.shown_text(), "");
    }
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":""})),
        ["content"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant"})),
        ["content"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"system","content":""})),
        ["content"]
    );
}

#[test]
fn fields_of_other_roles_and_types_are_named() {
    assert_eq!(fields(json!({"type":"message","content":"x"})), ["role"]);
    assert_eq!(
        fields(json!({"type":"message","role":"tool","content":"x"})),
        ["tool_call_id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","tool_call_id":"c"})),
        ["tool_call_id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x",
            "tool_calls":[{"id":"c","name":"n"}]})),
        ["tool_calls"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c","name":"n"},{"id":"c","name":""}]})),
        ["tool_calls[1].id", "tool_calls[1].name"]
    );
    assert_eq!(fields(json!({"type":"note","content":""})), ["content"]);
    assert_eq!(
        fields(json!({"type":"note","content":"x","role":"user"})),
        ["role"]
    );
    assert_eq!(fields(json!({"type":"episode_start","name":"e"})), ["kind"]);
    assert_eq!(
        fields(json!({"type":"episode_end","kind":"action"})),
        ["name", "kind"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","id":""})),
        ["id"]
    );
}

#[test]
fn ids_names_and_metadata_refuse_the_nul_character() {
    let nul = "a\u{0}b";
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","id":nul})),
        ["id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","name":nul})),
        ["name"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"tool","content":"x","tool_call_id":nul})),
        ["tool_call_id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c","name":"n"},{"id":nul,"name":nul}]})),
        ["tool_calls[1].id", "tool_calls[1].name"]
    );
    assert_eq!(
        fields(json!({"type":"episode_start","name":nul,"kind":"action"})),
        ["name"]
    );
    assert_eq!(
        fields(json!({"type":"episode_start","name":"e","kind":"action",
            "dependencies":["a",nul]})),
        ["dependencies[1]"]
    );
    assert_eq!(
        fields(json!({"type":"note","content":"x","metadata":{"a":[1,{"b":nul}]}})),
        ["metadata.a[1].b"]
    );
    assert_eq!(
        fields(json!({"type":"note","content":"x","metadata":{"a":{nul:1}}})),
        [format!("metadata.a.{nul}")]
    );
    // Nor does any text that compaction may copy into its (PostgreSQL `jsonb`) state.
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":nul})),
        ["content"]
    );
    assert_eq!(fields(json!({"type":"note","content":nul})), ["content"]);
    assert_eq!(
        fields(json!({"type":"episode_end","name":"e","conclusion":nul})),
        ["conclusion"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c","name":"n","arguments":nul},
                {"id":"d","name":"n","arguments":{"cmd":[nul]}}]})),
        ["tool_calls[0].arguments", "tool_calls[1].arguments.cmd[0]"]
    );
}

#[test]
fn unknown_type_role_or_field_fails_to_parse() {
    for v in [
        json!({"type":"thought","content":"x"}),
        json!({"type":"message","role":"bot","content":"x"}),
        json!({"type":"message","role":"user","content":"x","colour":"red"}),
    ] {
        assert!(serde_json::from_value::<EventInput>(v).is_err());
    }
}

#[test]
fn stored_form_round_trips_and_is_flat() {
    let e = validate(
        json!({"type":"episode_start","name":"explore","kind":"exploration",
        "dependencies":["setup"],"pinned":true}),
    )
    .unwrap();
    let json = serde_json::to_value(&e.body).unwrap();
    assert_eq!(
        json,
        json!({"type":"episode_start","name":"explore","kind":"exploration","dependencies":["setup"]})
    );
    assert_eq!(serde_json::from_value::<EventBody>(json).unwrap(), e.body);
    assert!(e.pinned);
}

#[test]
fn a_retry_is_the_same_event_whichever_form_its_arguments_take() {
    let call = |arguments: Value| {
        validate(json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "c1", "name": "ls", "arguments": arguments}]}))
        .expect("valid")
    };
    let stored = |new: NewEvent| Event {
        seq: 1,
        id: None,
        tokens: 1,
        body: new.body,
        pinned: new.pinned,
        metadata: new.metadata,
        created_at: Utc::now(),
        derived: Default::default(),
    };
    let object = stored(call(json!({"path": "src"})));
    assert!(object.same_as(&call(json!("{\"path\":\"src\"}"))));
    assert!(object.same_as(&call(json!({"path": "src"}))));
    assert!(!object.same_as(&call(json!({"path": "lib"}))));
}
