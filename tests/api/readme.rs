//! The README's one-call-per-turn examples, run as written with the official OpenAI and
//! Anthropic Python SDKs against a real ctxd and a loopback server that answers as each
//! provider does (a tool call or two, then an answer; Anthropic's with thinking blocks).

use serde_json::Value;

use crate::on_both_backends;

const README: &str = include_str!("../../README.md");

/// The Python blocks of the README's "One call per turn" section, in order.
fn turn_examples() -> Vec<String> {
    let section = README
        .split("## One call per turn")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has a section on one call per turn");
    section
        .split("```python\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap_or_default().to_owned())
        .collect()
}

/// A provider on a loopback port: OpenAI chat completions and Anthropic messages. It asks for
/// a shell command twice, then answers; it keeps every request it got.
const FAKE_PROVIDER: &str = r#"
import json, os, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REQUESTS = []

def input_tokens(body):
    return max(1, len(json.dumps([body.get("system"), body["messages"]])) // 4)

class Provider(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        REQUESTS.append((self.path, body))
        if self.path.endswith("/chat/completions"):
            results = sum(1 for m in body["messages"] if m["role"] == "tool")
            if results < 2:
                message = {"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"call_{results}", "type": "function",
                    "function": {"name": "shell", "arguments": json.dumps({"cmd": "echo ok"})}}]}
            else:
                message = {"role": "assistant", "content": "The tests pass."}
            reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                     "model": body["model"], "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if results < 2 else "stop", "logprobs": None}],
                     "usage": {"prompt_tokens": input_tokens(body), "completion_tokens": 9,
                               "total_tokens": input_tokens(body) + 9}}
        else:
            results = sum(1 for m in body["messages"] if isinstance(m["content"], list)
                          for b in m["content"] if b.get("type") == "tool_result")
            thinking = {"type": "thinking", "thinking": f"Step {results}.", "signature": f"sig{results}"}
            if results < 2:
                content = [thinking, {"type": "tool_use", "id": f"toolu_{results}", "name": "shell",
                                      "input": {"cmd": "echo ok"}}]
            else:
                content = [thinking, {"type": "text", "text": "The tests pass."}]
            reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                     "content": content, "stop_reason": "tool_use" if results < 2 else "end_turn",
                     "stop_sequence": None,
                     "usage": {"input_tokens": input_tokens(body), "output_tokens": 9}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]
os.environ.update({"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "test",
                   "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "test"})
"#;

/// What the script prints once the examples ran: each provider's requests, as it got them.
const REPORT: &str = r#"
print(json.dumps({"requests": REQUESTS, "openai_session": openai_session,
                  "anthropic_session": session}))
"#;

on_both_backends! {
    async fn the_readme_turn_examples_run_with_the_official_sdks(app) {
        let examples = turn_examples();
        assert_eq!(examples.len(), 2, "an OpenAI and an Anthropic example");
        let base = app.base.clone();
        let script = format!(
            "{FAKE_PROVIDER}\n{}\nopenai_session = session\n{}\n{REPORT}",
            examples[0].replace("http://127.0.0.1:8080", &base),
            examples[1],
        );
        let python = std::env::var("CTXD_PROVIDER_PYTHON")
            .expect("CTXD_PROVIDER_PYTHON: run the suite with scripts/test");
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python).arg("-c").arg(script).output()
        })
        .await
        .expect("join")
        .expect("python runs");
        assert!(
            out.status.success(),
            "the README examples failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("report");
        let requests = report["requests"].as_array().unwrap();
        assert_eq!(requests.len(), 6, "three model calls in each loop");

        // The last Anthropic request carries the thinking of the current tool loop, exactly.
        let last = &requests[5][1];
        let assistant: Vec<&Value> = last["messages"].as_array().unwrap().iter()
            .filter(|m| m["role"] == "assistant").collect();
        assert_eq!(assistant.len(), 2);
        for (k, m) in assistant.iter().enumerate() {
            assert_eq!(m["content"][0]["type"], "thinking", "{m}");
            assert_eq!(m["content"][0]["signature"], format!("sig{k}"));
        }
        assert_eq!(last["system"][0]["text"], "You are a coding agent.");

        // Each session holds the conversation once, and the usage calibrated it.
        for (key, events) in [("openai_session", 6), ("anthropic_session", 6)] {
            let session = report[key].as_str().unwrap();
            let log = app.all_events(session).await;
            assert_eq!(log.len(), events, "{key}: {log:?}");
            let context = app.get(&format!("/sessions/{session}/context")).await;
            assert_eq!(context.status, reqwest::StatusCode::OK);
        }
    }
}
