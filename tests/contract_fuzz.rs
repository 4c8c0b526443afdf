//! The service against its own OpenAPI document: scripts/contract-fuzz runs schemathesis (every
//! check, the stateful phase, a bounded number of examples, a fixed seed) against this build of
//! ctxd on a fresh SQLite file and on a fresh schema of the PostgreSQL server named by
//! `CTXD_TEST_DATABASE_URL` (scripts/test starts one), and must find no failure.

use std::process::Command;

use sqlx::{Connection, PgConnection};

/// The PostgreSQL URL of a new, empty schema: the server's `search_path` is set through the
/// connection's `options`, so the service's migrations and queries stay inside it.
fn fresh_postgres_schema() -> String {
    let url = std::env::var("CTXD_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "CTXD_TEST_DATABASE_URL is not set. Run the suite with `scripts/test`, which starts a \
             throwaway PostgreSQL, or set it to a scratch database"
        )
    });
    let schema = format!("fuzz_{}", uuid::Uuid::now_v7().simple());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut admin = PgConnection::connect(&url)
            .await
            .expect("connect to CTXD_TEST_DATABASE_URL");
        sqlx::query(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut admin)
            .await
            .expect("create the schema");
        admin.close().await.ok();
    });
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

#[test]
fn schemathesis_finds_no_failure_on_sqlite_and_postgresql() {
    let postgres = fresh_postgres_schema();
    let output = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/contract-fuzz"
    ))
    .args(["sqlite", postgres.as_str()])
    .env("CTXD_BIN", env!("CARGO_BIN_EXE_ctxd"))
    .output()
    .expect("run scripts/contract-fuzz");
    assert!(
        output.status.success(),
        "scripts/contract-fuzz failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
