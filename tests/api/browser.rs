//! A real browser for the dashboard's tests: headless Chromium driven over the DevTools
//! protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended by NUL on its fds 3 and
//! 4), so no driver and no WebSocket client are needed.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Chromium: `CTXD_CHROMIUM`, or the first of Debian's and the usual names on the PATH.
fn chromium() -> String {
    if let Ok(path) = std::env::var("CTXD_CHROMIUM") {
        return path;
    }
    for name in ["chromium", "chromium-browser", "google-chrome", "chrome"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output();
        if let Ok(out) = found {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if out.status.success() && !path.is_empty() {
                return path;
            }
        }
    }
    panic!(
        "the dashboard tests need Chromium (Debian: apt-get install chromium; or set \
         CTXD_CHROMIUM to a Chrome or Chromium binary)"
    );
}

pub struct Browser {
    child: Child,
    commands: ChildStdin,
    answers: BufReader<ChildStdout>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A headless browser with one blank page of `width` × `height`.
    pub async fn start(width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // fd 3 is the browser's command pipe (our stdin to it), fd 4 its answers (our stdout
        // from it); its own stdout goes to stderr, so that nothing else lands on the pipe.
        let script = format!(
            "exec \"$0\" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
             --no-first-run --no-default-browser-check --hide-scrollbars \
             --remote-debugging-pipe --user-data-dir={} about:blank 3<&0 4>&1 1>&2",
            profile.path().display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script, &chromium()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start Chromium");
        let commands = child.stdin.take().unwrap();
        let answers = BufReader::new(child.stdout.take().unwrap());
        let mut browser = Browser {
            child,
            commands,
            answers,
            next_id: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = browser
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser.page("Page.enable", json!({})).await;
        browser
            .page(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await;
        browser
    }

    async fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).await.unwrap();
        self.commands.flush().await.unwrap();
        loop {
            let mut frame = Vec::new();
            let read = tokio::time::timeout(
                Duration::from_secs(60),
                self.answers.read_until(0, &mut frame),
            )
            .await
            .unwrap_or_else(|_| panic!("Chromium did not answer {method} within 60 s"))
            .unwrap();
            assert!(read > 0, "Chromium exited");
            frame.pop();
            let answer: Value = serde_json::from_slice(&frame).unwrap();
            if answer["id"] == id {
                assert!(answer["error"].is_null(), "{method}: {}", answer["error"]);
                return answer["result"].clone();
            }
            // Events and other answers are not waited for.
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(None, method, params).await
    }

    async fn page(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(Some(&session), method, params).await
    }

    /// Opens `url` and waits until its script has rendered (`body[data-ready]`).
    pub async fn open(&mut self, url: &str) {
        self.page("Page.navigate", json!({"url": url})).await;
        self.wait_for("document.body && document.body.dataset.ready === 'true'")
            .await;
    }

    /// The value of a JavaScript expression in the page (awaiting a promise).
    pub async fn eval(&mut self, expression: &str) -> Value {
        let answer = self
            .page(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        assert!(
            answer["exceptionDetails"].is_null(),
            "{expression}: {}",
            answer["exceptionDetails"]
        );
        answer["result"]["value"].clone()
    }

    /// Waits until `condition` (JavaScript) holds in the page, for at most 20 s.
    pub async fn wait_for(&mut self, condition: &str) {
        for _ in 0..200 {
            if self.eval(&format!("!!({condition})")).await == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let body = self
            .eval("document.body ? document.body.innerText : ''")
            .await;
        panic!("`{condition}` did not hold within 20 s; the page shows:\n{body}");
    }

    /// Saves a PNG of the page as `target/screenshots/NAME.png`; its path.
    pub async fn screenshot(&mut self, name: &str) -> PathBuf {
        let shot = self
            .page(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": false}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
