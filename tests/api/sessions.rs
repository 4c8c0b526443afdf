//! Creating, reading, listing and deleting sessions.

use reqwest::StatusCode;
use serde_json::json;

use crate::on_both_backends;

on_both_backends! {
    async fn created_with_every_default(app) {
        let reply = app.post("/sessions", &json!({})).await;
        assert_eq!(reply.status, StatusCode::CREATED);
        let id = reply.body["id"].as_str().unwrap();
        assert_eq!(
            reply.headers["location"].to_str().unwrap(),
            format!("/sessions/{id}")
        );
        assert_eq!(
            reply.body["config"],
            json!({
                "context_window": 200000, "max_output_tokens": 8192, "tokenizer": "o200k_base",
                "policy": "progressive",
                "thresholds": {"low_water": 0.4, "warn": 0.7, "soft": 0.8, "full": 0.9, "emergency": 0.95},
                "min_tail_messages": 6, "offload_threshold_chars": 4000,
                "min_compaction_gain": 0.05, "tail_max_share": 0.10, "item_max_share": 0.05,
                "system_max_share": 0.25,
                "episodic": {"trigger": 0.8, "target": 0.4, "tool_priorities": {},
                             "observation_max_chars": 16000},
                "summary_max_chars": 32000
            })
        );
        assert_eq!(reply.body["head_seq"], 0);
        let fetched = app.get(&format!("/sessions/{id}")).await;
        assert_eq!(fetched.status, StatusCode::OK);
        assert_eq!(fetched.body, reply.body);
    }
}

on_both_backends! {
    async fn config_is_kept_as_given(app) {
        let config = json!({
            "context_window": 32000, "max_output_tokens": 2000, "tokenizer": "chars4",
            "thresholds": {"warn": 0.5, "soft": 0.6, "full": 0.7, "emergency": 0.9},
            "min_tail_messages": 2, "offload_threshold_chars": 500
        });
        let id = app.create_session(json!({"config": config, "metadata": {"agent": "coder"}})).await;
        let session = app.get(&format!("/sessions/{id}")).await.body;
        assert_eq!(session["config"]["context_window"], 32000);
        assert_eq!(session["config"]["tokenizer"], "chars4");
        assert_eq!(session["config"]["thresholds"]["warn"], 0.5);
        assert_eq!(session["config"]["offload_threshold_chars"], 500);
        assert_eq!(session["metadata"], json!({"agent": "coder"}));
    }
}

on_both_backends! {
    async fn invalid_configs_are_refused_naming_each_field(app) {
        let cases = [
            (json!({"config": {"context_window": 10}}), "config.context_window"),
            (json!({"config": {"max_output_tokens": 190000}}), "config.max_output_tokens"),
            (json!({"config": {"thresholds": {"warn": 0.9}}}), "config.thresholds"),
            (json!({"config": {"tokenizer": "gpt2"}}), "config.tokenizer"),
            (json!({"config": {"contxt_window": 1}}), "config.contxt_window"),
            (json!({"metadata": {"team": 7}}), "metadata.team"),
            (json!({"colour": "red"}), "colour"),
        ];
        for (body, field) in cases {
            let reply = app.post("/sessions", &body).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
            let fields: Vec<&str> = reply.body["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["field"].as_str().unwrap())
                .collect();
            assert!(fields.contains(&field), "{body}: expected {field}, got {fields:?}");
        }
        let list = app.get("/sessions").await;
        assert_eq!(list.body["sessions"], json!([]), "nothing was created");
    }
}

on_both_backends! {
    async fn listed_newest_first_in_cursor_pages(app) {
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(app.create_session(json!({})).await);
        }
        ids.reverse();
        let mut seen = Vec::new();
        let mut path = "/sessions?limit=2".to_owned();
        loop {
            let page = app.get(&path).await;
            assert_eq!(page.status, StatusCode::OK);
            let sessions = page.body["sessions"].as_array().unwrap();
            assert!(sessions.len() <= 2);
            seen.extend(sessions.iter().map(|s| s["id"].as_str().unwrap().to_owned()));
            match page.body["next_cursor"].as_str() {
                Some(cursor) => path = format!("/sessions?limit=2&cursor={cursor}"),
                None => break,
            }
        }
        assert_eq!(seen, ids);
    }
}

on_both_backends! {
    async fn filtered_by_every_given_label(app) {
        let a = app.create_session(json!({"metadata": {"team": "search", "env": "prod"}})).await;
        let b = app.create_session(json!({"metadata": {"team": "search", "env": "dev"}})).await;
        app.create_session(json!({"metadata": {"team": "ads"}})).await;
        let ids = |reply: crate::support::Reply| -> Vec<String> {
            reply.body["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(ids(app.get("/sessions?metadata.team=search").await), [b.clone(), a.clone()]);
        assert_eq!(ids(app.get("/sessions?metadata.team=search&metadata.env=prod").await), [a]);
        assert!(ids(app.get("/sessions?metadata.team=none").await).is_empty());
    }
}

on_both_backends! {
    async fn labels_filter_in_the_bracket_form_generated_clients_send(app) {
        let a = app.create_session(json!({"metadata": {"team": "search", "env": "prod", "k8s.ns": "a"}})).await;
        let b = app.create_session(json!({"metadata": {"team": "search", "env": "dev"}})).await;
        app.create_session(json!({"metadata": {"team": "ads"}})).await;
        let ids = |reply: crate::support::Reply| -> Vec<String> {
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            reply.body["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(ids(app.get("/sessions?metadata[team]=search").await), [b.clone(), a.clone()]);
        // As a client percent-encodes it, mixed with the dotted form, and with a dot in the key.
        assert_eq!(ids(app.get("/sessions?metadata%5Bteam%5D=search&metadata.env=prod").await), std::slice::from_ref(&a));
        assert_eq!(ids(app.get("/sessions?metadata[k8s.ns]=a").await), std::slice::from_ref(&a));
        assert!(ids(app.get("/sessions?metadata[team]=none").await).is_empty());
        // A bracket with no key is an empty label key, refused like one in a body.
        let reply = app.get("/sessions?metadata[]=x").await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.body);
        // The documented form, repeated for several labels (split at the first `=`).
        assert_eq!(ids(app.get("/sessions?label=team=search&label=env=prod").await), std::slice::from_ref(&a));
        assert_eq!(ids(app.get("/sessions?label=team%3Dsearch").await).len(), 2);
        let reply = app.get("/sessions?label=team").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    }
}

on_both_backends! {
    async fn bad_list_parameters_are_named(app) {
        for (query, needle) in [
            ("limit=0", "limit"),
            ("limit=x", "limit"),
            ("cursor=nope", "cursor"),
            ("sort=asc", "sort"),
        ] {
            let reply = app.get(&format!("/sessions?{query}")).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}");
            assert!(reply.body["detail"].as_str().unwrap().contains(needle), "{}", reply.body);
        }
    }
}

on_both_backends! {
    async fn deleting_removes_the_session_and_its_log(app) {
        let id = app.create_session(json!({})).await;
        let appended = app
            .append(&id, json!([{"type": "message", "role": "user", "content": "hello"}]))
            .await;
        assert_eq!(appended.status, StatusCode::CREATED);
        assert_eq!(app.delete(&format!("/sessions/{id}")).await.status, StatusCode::NO_CONTENT);
        assert_eq!(app.get(&format!("/sessions/{id}")).await.status, StatusCode::NOT_FOUND);
        assert_eq!(app.get(&format!("/sessions/{id}/events")).await.status, StatusCode::NOT_FOUND);
        let again = app.delete(&format!("/sessions/{id}")).await;
        assert_eq!(again.status, StatusCode::NOT_FOUND);
        assert!(again.body["detail"].as_str().unwrap().contains(&id));
        let uuid = id.parse().unwrap();
        assert!(app.store.list_events(uuid, 0, 10).await.unwrap().is_empty(), "events cascade");
    }
}

on_both_backends! {
    async fn idle_sessions_are_deleted_with_everything_they_own(app) {
        // Sessions with events, tool calls, compactions (records, folded ranges, states).
        let mut sessions = Vec::new();
        for _ in 0..3 {
            let id = app.create_session(json!({"config": {"context_window": 2000,
                "max_output_tokens": 200, "tokenizer": "chars4"}})).await;
            let mut events = Vec::new();
            for i in 0..6 {
                events.push(json!({"type": "message", "role": "assistant",
                    "tool_calls": [{"id": format!("c{i}"), "name": "read", "arguments": {}}]}));
                events.push(json!({"type": "message", "role": "tool", "tool_call_id": format!("c{i}"),
                    "content": "x".repeat(900)}));
            }
            let appended = app.post(&format!("/sessions/{id}/events"), &json!({"events": events})).await;
            assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);
            let compacted = app.post(&format!("/sessions/{id}/compact"), &json!({"mode": "force"})).await;
            assert_eq!(compacted.status, StatusCode::OK, "{}", compacted.body);
            sessions.push(id);
        }
        let tables = ["events", "tool_calls", "compaction_states", "compactions", "folded_ranges"];
        let rows = |id: String| {
            let app = &app;
            async move {
                let mut total = 0;
                for table in tables {
                    total += app.raw().count(&format!(
                        "SELECT count(*) FROM {table} WHERE session_id = '{id}'")).await;
                }
                total
            }
        };
        for id in &sessions {
            assert!(rows(id.clone()).await > 0, "the session owns rows");
        }
        // Two sessions last appended to long ago.
        for id in &sessions[..2] {
            let aged = app.raw().execute(&format!(
                "UPDATE sessions SET updated_at = '2000-01-01T00:00:00+00:00' WHERE session_id = '{id}'"
            )).await.unwrap();
            assert_eq!(aged, 1);
        }
        let idle = std::time::Duration::from_secs(30 * 24 * 3600);
        // Batches of one: the sweep goes on until none is left.
        let deleted = ctxd::retention::sweep(app.store.as_ref(), idle, 1).await.unwrap();
        assert_eq!(deleted, 2);
        for id in &sessions[..2] {
            assert_eq!(app.get(&format!("/sessions/{id}")).await.status, StatusCode::NOT_FOUND);
            assert_eq!(rows(id.clone()).await, 0, "no row of a deleted session remains");
        }
        assert_eq!(app.get(&format!("/sessions/{}", sessions[2])).await.status, StatusCode::OK);
        assert!(rows(sessions[2].clone()).await > 0, "the active session keeps its rows");
        assert_eq!(ctxd::retention::sweep(app.store.as_ref(), idle, 100).await.unwrap(), 0);
    }
}

on_both_backends! {
    async fn sessions_list_by_last_activity_page_by_page(app) {
        let mut ids = Vec::new();
        for _ in 0..4 {
            ids.push(app.create_session(json!({"metadata": {"team": "x"}})).await);
        }
        // Appended to in this order: the second, then the first; the others never.
        for id in [&ids[1], &ids[0]] {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            let reply = app.append(id, json!([{"type": "note", "content": "progress"}])).await;
            assert_eq!(reply.status, StatusCode::CREATED);
        }
        let expected = [&ids[0], &ids[1], &ids[3], &ids[2]];
        for labels in ["", "&label=team=x"] {
            let mut seen = Vec::new();
            let mut cursor = String::new();
            loop {
                let page = app.get(&format!("/sessions?sort=activity&limit=1{labels}{cursor}")).await;
                assert_eq!(page.status, StatusCode::OK, "{}", page.body);
                for s in page.body["sessions"].as_array().unwrap() {
                    seen.push(s["id"].as_str().unwrap().to_owned());
                }
                match page.body["next_cursor"].as_str() {
                    Some(next) => cursor = format!("&cursor={next}"),
                    None => break,
                }
            }
            assert_eq!(seen.iter().collect::<Vec<_>>(), expected, "{labels}");
        }
        // Created order stays the default.
        let page = app.get("/sessions?limit=10").await;
        let created: Vec<&str> = page.body["sessions"].as_array().unwrap().iter()
            .map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(created, [&ids[3], &ids[2], &ids[1], &ids[0]].map(|s| s.as_str()));
        let bad = app.get("/sessions?sort=size").await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    }
}
