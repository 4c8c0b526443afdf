//! The background jobs that prepare summaries.

use sqlx::Executor;
use uuid::Uuid;

use crate::domain::state::{JobStatus, PreparedSummary, SummaryJob};
use crate::store::rows::{DbUuid, JobRow};
use crate::store::{now, StoreError};

use super::json;

shared_queries! {
    /// Adds `job` unless the session has one at its checkpoint already; whether it was added.
    pub async fn enqueue_summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        job: &SummaryJob,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO summary_jobs (session_id, checkpoint_seq, to_seq, previous, max_chars, \
             status, created_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6) \
             ON CONFLICT (session_id, checkpoint_seq) DO NOTHING",
        )
        .bind(DbUuid(job.session_id))
        .bind(job.checkpoint_seq)
        .bind(job.to_seq)
        .bind(json(&job.previous)?)
        .bind(i64::try_from(job.max_chars).unwrap_or(i64::MAX))
        .bind(now())
        .execute(db)
        .await?;
        Ok(DB::rows_affected(&done) > 0)
    }

    /// Claims the oldest job that is pending, or whose lease ran out (its replica died), for
    /// `lease_ms` from `now_ms`; jobs tried `max_attempts` times are left.
    pub async fn claim_summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        now_ms: i64,
        lease_ms: i64,
        max_attempts: i64,
    ) -> Result<Option<SummaryJob>, StoreError> {
        let query = format!(
            "UPDATE summary_jobs SET status = 'running', attempts = attempts + 1, \
             lease_until = $1 WHERE (session_id, checkpoint_seq) = (\
             SELECT session_id, checkpoint_seq FROM summary_jobs \
             WHERE (status = 'pending' OR (status = 'running' AND lease_until < $2)) \
             AND attempts < $3 ORDER BY created_at LIMIT 1{}) \
             RETURNING session_id, checkpoint_seq, to_seq, previous, max_chars, status, result",
            DB::SKIP_LOCKED
        );
        let row: Option<JobRow> = sqlx::query_as(&query)
            .bind(now_ms + lease_ms)
            .bind(now_ms)
            .bind(max_attempts)
            .fetch_optional(db)
            .await?;
        Ok(row.map(|r| r.job()))
    }

    /// Ends a job with the summary it prepared, or as failed.
    pub async fn finish_summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        job: &SummaryJob,
        prepared: Option<&PreparedSummary>,
    ) -> Result<(), StoreError> {
        let result = prepared.map(json).transpose()?;
        let status = if prepared.is_some() { "done" } else { "failed" };
        sqlx::query(
            "UPDATE summary_jobs SET status = $3, result = $4, lease_until = 0 \
             WHERE session_id = $1 AND checkpoint_seq = $2",
        )
        .bind(DbUuid(job.session_id))
        .bind(job.checkpoint_seq)
        .bind(status.to_owned())
        .bind(result)
        .execute(db)
        .await?;
        Ok(())
    }

    /// The session's job at `checkpoint_seq`, and where it stands.
    pub async fn summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        checkpoint_seq: i64,
    ) -> Result<Option<(SummaryJob, JobStatus)>, StoreError> {
        let row: Option<JobRow> = sqlx::query_as(
            "SELECT session_id, checkpoint_seq, to_seq, previous, max_chars, status, result \
             FROM summary_jobs WHERE session_id = $1 AND checkpoint_seq = $2",
        )
        .bind(DbUuid(session_id))
        .bind(checkpoint_seq)
        .fetch_optional(db)
        .await?;
        Ok(row.map(|r| (r.job(), r.status())))
    }

}
