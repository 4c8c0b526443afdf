use std::process::ExitCode;

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use ctxd::config::{
    Cli, Command, DatabaseArgs, KeysCommand, LogFormat, ReplayArgs, ServeArgs, SynthArgs,
    TenantsCommand,
};
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
        Some(Command::Keys(command)) => keys(command).await,
        Some(Command::Tenants(command)) => tenants(command).await,
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
    if let Err(e) = ctxd::telemetry::init(format, None) {
        eprintln!("ctxd: {e}");
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
        keep_sessions: args.keep_sessions,
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

/// The migrated store `database` names, for the key and tenant commands.
async fn open_store(database: &DatabaseArgs) -> Result<std::sync::Arc<dyn store::Store>, String> {
    let options = database.store_options();
    let store = store::connect(&options)
        .await
        .map_err(|e| format!("cannot open {}: {e}", redact(&options.url)))?;
    store.migrate().await.map_err(|e| e.to_string())?;
    Ok(store)
}

async fn keys(command: KeysCommand) -> Result<(), String> {
    match command {
        KeysCommand::Create {
            role,
            tenant,
            name,
            database,
        } => {
            let errors = ctxd::auth::validate_tenant("--tenant", &tenant);
            if let Some(error) = errors.first() {
                return Err(error.to_string());
            }
            let store = open_store(&database).await?;
            let tenants = store.list_tenants().await.map_err(|e| e.to_string())?;
            if !tenants.iter().any(|t| t.id == tenant) {
                return Err(format!(
                    "no tenant `{tenant}`: create it first with `ctxd tenants create {tenant}`"
                ));
            }
            let issued = ctxd::auth::issue(&tenant, role, &name)?;
            store
                .create_key(&issued.stored)
                .await
                .map_err(|e| e.to_string())?;
            eprintln!(
                "created {} key {} for tenant `{tenant}`; it is shown only now, and from now on \
                 every request needs a key:",
                role.as_str(),
                issued.stored.key.id
            );
            println!("{}", issued.token);
            Ok(())
        }
        KeysCommand::List { tenant, database } => {
            let store = open_store(&database).await?;
            let keys = store
                .list_keys(tenant.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            for key in keys {
                let revoked = key
                    .revoked_at
                    .map(|at| format!("revoked {}", at.to_rfc3339()))
                    .unwrap_or_else(|| "active".into());
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    key.id,
                    key.tenant,
                    key.role.as_str(),
                    key.created_at.to_rfc3339(),
                    revoked,
                    key.name
                );
            }
            Ok(())
        }
        KeysCommand::Revoke { id, database } => {
            let store = open_store(&database).await?;
            if store.revoke_key(&id).await.map_err(|e| e.to_string())? {
                eprintln!("revoked key {id} (running replicas refuse it within seconds)");
                Ok(())
            } else {
                Err(format!("no key with id `{id}`"))
            }
        }
    }
}

async fn tenants(command: TenantsCommand) -> Result<(), String> {
    match command {
        TenantsCommand::Create { id, database } => {
            if let Some(error) = ctxd::auth::validate_tenant("tenant", &id).first() {
                return Err(error.to_string());
            }
            let store = open_store(&database).await?;
            if store
                .create_tenant(&id)
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                eprintln!("created tenant `{id}`");
                Ok(())
            } else {
                Err(format!("tenant `{id}` exists"))
            }
        }
        TenantsCommand::List { database } => {
            let store = open_store(&database).await?;
            for tenant in store.list_tenants().await.map_err(|e| e.to_string())? {
                println!("{}\t{}", tenant.id, tenant.created_at.to_rfc3339());
            }
            Ok(())
        }
    }
}

/// Whether ctxd may serve as it is configured: without keys only on loopback, unless told
/// otherwise. Says so in the log either way.
fn check_open_mode(
    listen: std::net::SocketAddr,
    has_keys: bool,
    insecure: bool,
) -> Result<(), String> {
    if has_keys {
        tracing::info!("API keys required");
        return Ok(());
    }
    if listen.ip().is_loopback() {
        tracing::warn!(
            "no API keys: open mode, any local process may read and write every session; \
             `ctxd keys create --role admin` makes the first key"
        );
        return Ok(());
    }
    if insecure {
        tracing::warn!(
            %listen,
            "no API keys and listening beyond loopback (CTXD_INSECURE_OPEN): anyone who can \
             reach this address may read and write every session"
        );
        return Ok(());
    }
    Err(format!(
        "refusing to serve on {listen} without API keys: anyone who could reach it would read \
         and write every session. Create a key first (`ctxd keys create --role admin`, with the \
         same CTXD_DATABASE_URL), listen on loopback, or set CTXD_INSECURE_OPEN=true"
    ))
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let telemetry = ctxd::telemetry::init(args.log_format, args.otlp_endpoint.as_deref())?;
    let served = serve_with(args).await;
    telemetry.shutdown();
    served
}

async fn serve_with(args: ServeArgs) -> Result<(), String> {
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
    let has_keys = store.any_keys().await.map_err(|e| e.to_string())?;
    check_open_mode(args.listen, has_keys, args.insecure_open)?;
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
    ctxd::http::stream::close_all();
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
