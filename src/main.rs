use std::process::ExitCode;

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing_subscriber::EnvFilter;

use ctxd::config::{Cli, Command, LogFormat, ReplayArgs, ServeArgs, SynthArgs};
use ctxd::store::{self, redact};
use ctxd::{app, AppState};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => serve(cli.serve).await,
        Some(Command::Serve(args)) => serve(*args).await,
        Some(Command::Migrate(db)) => {
            init_tracing(LogFormat::Text);
            migrate(&db.store_options()).await
        }
        Some(Command::Openapi) => print_openapi(),
        Some(Command::Replay(args)) => replay(args).await,
        Some(Command::Synth(args)) => synth(args),
        Some(Command::Healthcheck { listen }) => healthcheck(listen).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ctxd: {message}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: a file or a log collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn replay(args: ReplayArgs) -> Result<(), String> {
    use ctxd::replay::parse_choice;
    let options = ctxd::replay::Options {
        files: args.files.clone(),
        server: args.server,
        window: args.window,
        reserved_output: args.reserved_output,
        tokenizer: parse_choice("tokenizer", &args.tokenizer)?,
        policy: parse_choice("policy", &args.policy)?,
        format: parse_choice("format", &args.format)?,
        tools: match &args.tools {
            Some(path) => read_tools(path)?,
            None => Vec::new(),
        },
        provider_python: args.provider_python.filter(|p| !p.as_os_str().is_empty()),
        cache_price: args.cache_price,
        compare: args.compare,
        config: match &args.config {
            Some(text) => read_config(text)?,
            None => serde_json::Map::new(),
        },
        planted: match &args.facts {
            Some(path) => ctxd::replay::read_facts(path)?,
            None => Vec::new(),
        },
    };
    let report = ctxd::replay::run(&options).await?;
    if let Some(path) = &args.chart {
        let title = format!(
            "ctxd replay: {} sessions, {}-token window",
            report.sessions.len(),
            args.window
        );
        std::fs::write(path, report.chart(&title))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.table());
        for error in &report.total.errors {
            println!("failed: {error}");
        }
        for problem in &report.total.problems {
            println!("problem: {problem}");
        }
    }
    match report.failures() {
        0 => Ok(()),
        n => Err(format!(
            "{n} failures: views over budget or invalid, unexplained items, or failed requests"
        )),
    }
}

/// `--tools`: a JSON array of tool schemas, or `{"tools": [...]}`.
fn read_tools(path: &std::path::Path) -> Result<Vec<serde_json::Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let tools = match value {
        serde_json::Value::Object(mut map) => map.remove("tools").unwrap_or_default(),
        other => other,
    };
    match tools {
        serde_json::Value::Array(tools) if tools.iter().all(|t| t.is_object()) => Ok(tools),
        _ => Err(format!(
            "{}: expected a JSON array of tool schemas (objects), or {{\"tools\": [...]}}",
            path.display()
        )),
    }
}

/// `--config`: a JSON object, inline or `@FILE`.
fn read_config(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let (origin, text) = match text.strip_prefix('@') {
        Some(path) => (
            path.to_owned(),
            std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?,
        ),
        None => ("--config".to_owned(), text.to_owned()),
    };
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!(
            "{origin}: expected a JSON object of session settings"
        )),
        Err(e) => Err(format!("{origin}: {e}")),
    }
}

fn synth(args: SynthArgs) -> Result<(), String> {
    use ctxd::replay::synth::{synth, Kind};
    let kind = match args.kind.as_str() {
        "coding" => Kind::Coding,
        "support" => Kind::Support,
        other => return Err(format!("unknown kind `{other}`: coding or support")),
    };
    let mut session = synth(kind, args.turns, args.seed);
    if args.episodes {
        if kind != Kind::Coding {
            return Err("--episodes annotates coding sessions only".into());
        }
        session.messages = ctxd::replay::synth::with_episodes(session.messages);
    }
    let lines: Vec<String> = session.messages.iter().map(|m| m.to_string()).collect();
    std::fs::write(&args.out, lines.join("\n") + "\n")
        .map_err(|e| format!("{}: {e}", args.out.display()))?;
    if let Some(path) = &args.facts {
        let facts = serde_json::json!({ "facts": session.facts });
        std::fs::write(path, facts.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

async fn migrate(options: &store::StoreOptions) -> Result<(), String> {
    let store = store::connect(options)
        .await
        .map_err(|e| format!("cannot open {}: {e}", redact(&options.url)))?;
    store.migrate().await.map_err(|e| e.to_string())?;
    tracing::info!(database = %redact(&options.url), "migrations applied");
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    init_tracing(args.log_format);
    args.validate()?;
    let summarizer = args.summarizer.build()?;
    if let Some(s) = &summarizer {
        tracing::info!(
            summarizer = s.kind(),
            "LLM summaries, with deterministic fallback"
        );
    }
    let options = args.database.store_options();
    let store = store::connect(&options)
        .await
        .map_err(|e| format!("cannot open {}: {e}", redact(&options.url)))?;
    store.migrate().await.map_err(|e| e.to_string())?;
    // Load the default encoding's tables now rather than on the first append.
    tokio::task::spawn_blocking(|| ctxd::tokens::Tokenizer::default().preload())
        .await
        .map_err(|e| e.to_string())?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    tracing::info!(
        listen = %args.listen,
        database = %redact(&options.url),
        backend = store.backend(),
        "ctxd is serving; API docs at /docs"
    );
    if args.retention_idle_secs > 0 {
        let idle = std::time::Duration::from_secs(args.retention_idle_secs);
        tracing::info!(
            idle_secs = args.retention_idle_secs,
            "idle sessions are deleted"
        );
        ctxd::retention::spawn(store.clone(), idle);
    }
    let mut state = AppState::new(store, args.limits());
    state.summarizer = summarizer;
    state.view_cache = std::sync::Arc::new(ctxd::compaction::cache::ViewCache::new(
        args.view_cache_bytes,
    ));
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM or Ctrl-C: stop accepting connections and let in-flight requests finish.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

fn print_openapi() -> Result<(), String> {
    let json = ctxd::openapi()
        .to_pretty_json()
        .map_err(|e| e.to_string())?;
    println!("{json}");
    Ok(())
}

/// A minimal HTTP/1.1 GET of /healthz, so container images need no curl.
async fn healthcheck(listen: std::net::SocketAddr) -> Result<(), String> {
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let check = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(std::time::Duration::from_secs(5), check)
        .await
        .map_err(|_| format!("{addr} did not answer within 5 s"))?
        .map_err(|e| format!("{addr}: {e}"))?;
    if response.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!("{addr}/healthz did not answer 200"))
    }
}
