//! Views checked against the providers' own request types: one Python process with the
//! official `openai` and `anthropic` SDKs runs `scripts/check_views.py --stream` for the whole
//! replay, and every view is written to it as one JSON line and answered with one line.

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::engine::render::Format;

/// The checker, carried inside the binary so that a replay needs only the interpreter.
const SCRIPT: &str = include_str!("../../scripts/check_views.py");

/// A running checker.
pub(super) struct ProviderCheck {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The SDKs' versions, as the checker reported them.
    pub(super) sdks: String,
}

impl ProviderCheck {
    /// Starts the checker under `python`; an error says why it could not start.
    pub(super) async fn start(python: &Path) -> Result<Self, String> {
        let cannot = |why: String| {
            format!(
                "cannot check views with the providers' SDKs under {}: {why}",
                python.display()
            )
        };
        let mut child = Command::new(python)
            .args(["-c", SCRIPT, "--stream"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| cannot(e.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(cannot("no pipes to it".into()));
        };
        let mut stdout = BufReader::new(stdout).lines();
        match stdout.next_line().await {
            Ok(Some(line)) if line.starts_with("ready ") => Ok(Self {
                sdks: line["ready ".len()..].to_owned(),
                child,
                stdin,
                stdout,
            }),
            other => {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr).await;
                }
                let said = match other {
                    Ok(Some(line)) => line,
                    Ok(None) => String::new(),
                    Err(e) => e.to_string(),
                };
                let last = stderr.lines().last().unwrap_or_default().to_owned();
                Err(cannot(format!("{said}{last}")))
            }
        }
    }

    /// Each view's refusal, if the SDKs refused it, in the order given.
    pub(super) async fn check(
        &mut self,
        views: &[(Format, &Value)],
    ) -> Result<Vec<Option<String>>, String> {
        let broken = |e: std::io::Error| format!("the provider check stopped: {e}");
        for (format, view) in views {
            let mut line = json!({"format": format, "view": view}).to_string();
            line.push('\n');
            self.stdin
                .write_all(line.as_bytes())
                .await
                .map_err(broken)?;
        }
        self.stdin.flush().await.map_err(broken)?;
        let mut answers = Vec::with_capacity(views.len());
        for _ in views {
            match self.stdout.next_line().await.map_err(broken)? {
                Some(answer) if answer == "ok" => answers.push(None),
                Some(answer) => answers.push(Some(
                    answer
                        .strip_prefix("refused ")
                        .unwrap_or(&answer)
                        .to_owned(),
                )),
                None => {
                    let status = self.child.try_wait().ok().flatten();
                    return Err(format!("the provider check stopped ({status:?})"));
                }
            }
        }
        Ok(answers)
    }
}
