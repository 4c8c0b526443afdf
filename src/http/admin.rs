//! `/admin`: tenants and API keys, for an admin key (or anyone in open mode, which is how the
//! first key is made when ctxd runs on loopback; `ctxd keys create` makes it from the shell).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::auth::{self, ApiKey, KeyRole, Tenant, DEFAULT_TENANT, MAX_KEY_NAME_CHARS};
use crate::domain::FieldError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_tenant, list_tenants))
        .routes(routes!(create_key, list_keys))
        .routes(routes!(revoke_key))
}

/// A tenant to create.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// 1 to 63 lowercase letters, digits, `-` and `_`, starting with a letter or digit.
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,62}$")]
    pub id: String,
}

#[derive(Serialize, ToSchema)]
pub struct TenantList {
    pub tenants: Vec<Tenant>,
}

/// Create a tenant.
#[utoipa::path(post, path = "/admin/tenants", tag = "admin",
    request_body(content = NewTenant, example = json!({"id": "acme"})),
    responses(
        (status = 201, description = "Created", body = Tenant,
            example = json!({"id": "acme", "created_at": "2026-12-02T12:00:00Z"})),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The tenant exists", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid id", body = Problem, content_type = "application/problem+json")
    ))]
async fn create_tenant(
    State(state): State<AppState>,
    extract::Json(new): extract::Json<NewTenant>,
) -> Result<(StatusCode, Json<Tenant>), ApiError> {
    let errors = auth::validate_tenant("id", &new.id);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let tenant = state
        .store
        .create_tenant(&new.id)
        .await?
        .ok_or_else(|| ApiError::Conflict {
            detail: format!("tenant `{}` exists", new.id),
            head_seq: None,
            seq: None,
        })?;
    Ok((StatusCode::CREATED, Json(tenant)))
}

/// List the tenants, by id.
#[utoipa::path(get, path = "/admin/tenants", tag = "admin",
    responses((status = 200, description = "Every tenant", body = TenantList, example = json!({
        "tenants": [{"id": "acme", "created_at": "2026-12-02T12:00:00Z"},
            {"id": "default", "created_at": "2026-11-30T12:00:00Z"}]}))))]
async fn list_tenants(State(state): State<AppState>) -> Result<Json<TenantList>, ApiError> {
    Ok(Json(TenantList {
        tenants: state.store.list_tenants().await?,
    }))
}

/// A key to create.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// The tenant the key acts for (default `default`); it must exist.
    #[serde(default)]
    pub tenant: Option<String>,
    pub role: KeyRole,
    /// What the key is for (at most 200 characters), shown in the key list.
    #[serde(default)]
    #[schema(max_length = 200)]
    pub name: String,
}

/// A key just created: the one answer that carries its secret.
#[derive(Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub key: ApiKey,
    /// The bearer token to send as `Authorization: Bearer <key>`. Shown only now: ctxd keeps a
    /// digest of it, never the key.
    pub key_secret: String,
}

#[derive(Serialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<ApiKey>,
}

/// `GET /admin/keys` parameters.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyListParams {
    /// Only this tenant's keys.
    pub tenant: Option<String>,
}

/// Create an API key.
///
/// The answer is the only place the key appears; store it as a secret.
#[utoipa::path(post, path = "/admin/keys", tag = "admin",
    request_body(content = NewKey, example = json!({"tenant": "acme", "role": "agent", "name": "coder agents"})),
    responses(
        (status = 201, description = "Created; `key_secret` is shown this once", body = CreatedKey),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An unknown tenant, a bad role or name", body = Problem, content_type = "application/problem+json")
    ))]
async fn create_key(
    State(state): State<AppState>,
    extract::Json(new): extract::Json<NewKey>,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let tenant = new.tenant.unwrap_or_else(|| DEFAULT_TENANT.to_owned());
    let mut errors: Vec<FieldError> = auth::validate_tenant("tenant", &tenant);
    if new.name.chars().count() > MAX_KEY_NAME_CHARS {
        errors.push(FieldError::new(
            "name",
            format!("must have at most {MAX_KEY_NAME_CHARS} characters"),
        ));
    }
    if errors.is_empty()
        && !state
            .store
            .list_tenants()
            .await?
            .iter()
            .any(|t| t.id == tenant)
    {
        errors.push(FieldError::new(
            "tenant",
            format!("no tenant `{tenant}`: create it first (POST /admin/tenants)"),
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let issued = auth::issue(&tenant, new.role, &new.name).map_err(ApiError::Internal)?;
    state.store.create_key(&issued.stored).await?;
    state.keys.created();
    tracing::info!(key = %issued.stored.key.id, %tenant, role = new.role.as_str(), "API key created");
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            key: issued.stored.key,
            key_secret: issued.token,
        }),
    ))
}

/// List API keys (never their secrets), oldest first.
#[utoipa::path(get, path = "/admin/keys", tag = "admin",
    params(KeyListParams),
    responses(
        (status = 200, description = "The keys", body = KeyList, example = json!({
            "keys": [{"id": "3f9a0c1d2e4b5a69", "tenant": "acme", "role": "agent",
                "name": "coder agents", "created_at": "2026-12-02T12:00:00Z"}]})),
        (status = 400, description = "An unknown query parameter", body = Problem, content_type = "application/problem+json")
    ))]
async fn list_keys(
    State(state): State<AppState>,
    Query(params): Query<KeyListParams>,
) -> Result<Json<KeyList>, ApiError> {
    Ok(Json(KeyList {
        keys: state.store.list_keys(params.tenant.as_deref()).await?,
    }))
}

/// Revoke an API key: it is refused from now on (within seconds on other replicas).
#[utoipa::path(delete, path = "/admin/keys/{key_id}", tag = "admin",
    params(("key_id" = String, Path, description = "The key's id")),
    responses(
        (status = 204, description = "Revoked (or revoked already)"),
        (status = 404, description = "No such key", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:not-found", "title": "Not found", "status": 404,
                "detail": "no key with id `3f9a0c1d2e4b5a69`", "instance": "/admin/keys/3f9a0c1d2e4b5a69",
                "request_id": "3f0c2a9e-5b1d-4c8e-9f7a-2d6b8e4c1a07"})),
    ))]
async fn revoke_key(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if !state.store.revoke_key(&key_id).await? {
        return Err(ApiError::NotFound(format!("no key with id `{key_id}`")));
    }
    state.keys.forget(&key_id);
    tracing::info!(key = %key_id, "API key revoked");
    Ok(StatusCode::NO_CONTENT)
}
