//! Who is calling: every request but health, metrics and the API document carries a bearer key
//! once any key exists (until then ctxd is in open mode, which it allows only on loopback). The
//! key's role decides which routes it may call, and its tenant which sessions: a session of
//! another tenant answers exactly as a missing one, so its existence is not disclosed.
//!
//! Keys are looked up by their public id and remembered for a few seconds: a revocation takes
//! effect at once on the replica that made it and within [`KEY_MEMORY`] on the others.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::error::ApiError;
use super::AppState;
use crate::auth::{split_token, KeyRole, StoredKey, DEFAULT_TENANT};
use crate::store::{Store, StoreError};

/// How long a replica trusts what it read of a key (and of there being no keys at all).
pub const KEY_MEMORY: Duration = Duration::from_secs(5);
/// How often open mode asks the database whether a key was created since.
const OPEN_MODE_RECHECK: Duration = Duration::from_secs(1);
/// Keys a replica remembers before it starts over.
const REMEMBERED_KEYS: usize = 10_000;

/// The caller of a request, as the handlers see it.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant whose sessions the caller sees and creates.
    pub tenant: String,
    /// The key's id and role; None in open mode, where any caller may do anything.
    pub key: Option<(String, KeyRole)>,
}

impl Caller {
    fn open() -> Self {
        Self {
            tenant: DEFAULT_TENANT.to_owned(),
            key: None,
        }
    }

    /// The id of the caller's key, for rate limits and logs (never its secret).
    pub fn key_id(&self) -> Option<&str> {
        self.key.as_ref().map(|(id, _)| id.as_str())
    }
}

/// What a replica knows of the keys.
#[derive(Default)]
pub struct Keys {
    /// Set once any key exists; it never goes back (revoking every key does not reopen ctxd).
    required: AtomicBool,
    /// When open mode last asked the database.
    checked: Mutex<Option<Instant>>,
    /// Keys by id, as read and when: None for an id that is not stored.
    remembered: Mutex<HashMap<String, (Instant, Option<StoredKey>)>>,
}

impl Keys {
    /// Whether requests need a key: true once the store holds any.
    async fn required(&self, store: &dyn Store) -> Result<bool, StoreError> {
        if self.required.load(Ordering::Relaxed) {
            return Ok(true);
        }
        {
            let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
            if checked.is_some_and(|at| at.elapsed() < OPEN_MODE_RECHECK) {
                return Ok(false);
            }
            *checked = Some(Instant::now());
        }
        let any = store.any_keys().await?;
        if any {
            self.required.store(true, Ordering::Relaxed);
        }
        Ok(any)
    }

    /// A key was created here: from now on every request needs one.
    pub fn created(&self) {
        self.required.store(true, Ordering::Relaxed);
    }

    /// A key was revoked here: read it again on its next use.
    pub fn forget(&self, id: &str) {
        self.remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    async fn lookup(&self, store: &dyn Store, id: &str) -> Result<Option<StoredKey>, StoreError> {
        if let Some((at, key)) = self
            .remembered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
        {
            if at.elapsed() < KEY_MEMORY {
                return Ok(key.clone());
            }
        }
        let key = store.get_key(id).await?;
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        if remembered.len() >= REMEMBERED_KEYS {
            remembered.clear();
        }
        remembered.insert(id.to_owned(), (Instant::now(), key.clone()));
        Ok(key)
    }

    /// The caller a request's `Authorization` header names, or why it names none.
    async fn caller(
        &self,
        store: &dyn Store,
        authorization: Option<&HeaderValue>,
    ) -> Result<Caller, ApiError> {
        let Some(value) = authorization else {
            return Err(ApiError::Unauthorized(
                "this server requires an API key: send `Authorization: Bearer <key>`".into(),
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(|| {
                ApiError::Unauthorized("the Authorization header must be `Bearer <key>`".into())
            })?;
        let refused = || ApiError::Unauthorized("the API key is not valid or was revoked".into());
        let (id, secret) = split_token(token).ok_or_else(refused)?;
        let key = self.lookup(store, id).await?.ok_or_else(refused)?;
        if !key.admits(secret) {
            return Err(refused());
        }
        Ok(Caller {
            tenant: key.key.tenant,
            key: Some((key.key.id, key.key.role)),
        })
    }
}

/// A token bucket per key: `rate` requests a second, `burst` at once.
#[derive(Default)]
pub struct RateLimits {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimits {
    /// Takes one request from the key's bucket, or says in how many seconds one is there.
    fn take(&self, key: &str, rate: f64, burst: u32) -> Result<(), u64> {
        if rate <= 0.0 {
            return Ok(());
        }
        let capacity = if burst == 0 {
            rate.max(1.0)
        } else {
            f64::from(burst)
        };
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= REMEMBERED_KEYS && !buckets.contains_key(key) {
            // Full buckets are the same as forgotten ones.
            buckets
                .retain(|_, (tokens, at)| *tokens + at.elapsed().as_secs_f64() * rate < capacity);
        }
        let (tokens, at) = buckets.entry(key.to_owned()).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(capacity);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

/// What a path is, for access.
enum Resource {
    /// Health, metrics, the API document and its UI: anyone.
    Public,
    /// Keys and tenants.
    Admin,
    /// The session list and creation.
    Sessions,
    /// One session and everything under it; None when the id is not a UUID (the handler says
    /// so).
    Session(Option<Uuid>),
}

fn resource(path: &str) -> Resource {
    if path == "/admin" || path.starts_with("/admin/") {
        return Resource::Admin;
    }
    match path.strip_prefix("/sessions") {
        Some("" | "/") => Resource::Sessions,
        Some(rest) if rest.starts_with('/') => {
            let id = rest[1..].split('/').next().unwrap_or_default();
            Resource::Session(Uuid::parse_str(id).ok())
        }
        _ => Resource::Public,
    }
}

/// Whether the caller's role may call `method` on `resource`.
fn permitted(caller: &Caller, method: &Method, resource: &Resource) -> Result<(), ApiError> {
    let Some((_, role)) = &caller.key else {
        return Ok(());
    };
    let reading = method == Method::GET || method == Method::HEAD;
    match (resource, role) {
        (Resource::Public, _) => Ok(()),
        (Resource::Admin, KeyRole::Admin) => Ok(()),
        (Resource::Admin, _) => Err(ApiError::Forbidden(format!(
            "an {} key cannot manage keys or tenants: that takes an admin key",
            role.as_str()
        ))),
        (Resource::Sessions | Resource::Session(_), KeyRole::Agent) => Ok(()),
        (Resource::Sessions | Resource::Session(_), KeyRole::Operator) if reading => Ok(()),
        (Resource::Sessions | Resource::Session(_), KeyRole::Operator) => Err(ApiError::Forbidden(
            "an operator key reads sessions and changes nothing: this takes an agent key".into(),
        )),
        (Resource::Sessions | Resource::Session(_), KeyRole::Admin) => Err(ApiError::Forbidden(
            "an admin key manages keys and tenants and reads no session: use an agent or operator key"
                .into(),
        )),
    }
}

/// Decides who calls and whether they may; the handlers find the [`Caller`] among the request's
/// extensions.
pub async fn authorize(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let admitted = admit(
        &state,
        request.method(),
        request.uri().path(),
        authorization.as_ref(),
    );
    match admitted.await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}

async fn admit(
    state: &AppState,
    method: &Method,
    path: &str,
    authorization: Option<&HeaderValue>,
) -> Result<Caller, ApiError> {
    let resource = resource(path);
    if matches!(resource, Resource::Public) {
        return Ok(Caller::open());
    }
    let store = state.store.as_ref();
    let caller = if state.keys.required(store).await? {
        state.keys.caller(store, authorization).await?
    } else {
        Caller::open()
    };
    permitted(&caller, method, &resource)?;
    if let Some(key) = caller.key_id() {
        let limits = &state.limits;
        if let Err(retry_after_secs) = state
            .rates
            .take(key, limits.rate_per_key, limits.rate_burst)
        {
            return Err(ApiError::TooManyRequests {
                detail: format!(
                    "key {key} made more than its {} requests a second; retry in {retry_after_secs} s",
                    limits.rate_per_key
                ),
                retry_after_secs,
            });
        }
    }
    if let (Resource::Session(Some(id)), Some(_)) = (&resource, &caller.key) {
        // Another tenant's session is answered as a missing one.
        let tenant = state.session_of(*id).await?.map(|s| s.tenant);
        if tenant.as_deref() != Some(caller.tenant.as_str()) {
            return Err(ApiError::session_not_found(id));
        }
    }
    Ok(caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(role: KeyRole) -> Caller {
        Caller {
            tenant: "acme".into(),
            key: Some(("0123456789abcdef".into(), role)),
        }
    }

    #[test]
    fn a_key_past_its_rate_waits_for_its_bucket_to_refill() {
        let rates = RateLimits::default();
        // A burst of 3, then refused; another key has its own bucket.
        for _ in 0..3 {
            assert_eq!(rates.take("a", 0.5, 3), Ok(()));
        }
        assert_eq!(rates.take("a", 0.5, 3), Err(2));
        assert_eq!(rates.take("b", 0.5, 3), Ok(()));
        // No rate: no limit.
        for _ in 0..100 {
            assert_eq!(rates.take("c", 0.0, 0), Ok(()));
        }
        // The default burst is one second's worth.
        for _ in 0..10 {
            assert_eq!(rates.take("d", 10.0, 0), Ok(()));
        }
        assert_eq!(rates.take("d", 10.0, 0), Err(1));
    }

    #[test]
    fn paths_are_classified_by_their_first_segment() {
        assert!(matches!(resource("/healthz"), Resource::Public));
        assert!(matches!(resource("/metrics"), Resource::Public));
        assert!(matches!(resource("/docs/"), Resource::Public));
        assert!(matches!(resource("/sessionsx"), Resource::Public));
        assert!(matches!(resource("/admin/keys"), Resource::Admin));
        assert!(matches!(resource("/sessions"), Resource::Sessions));
        assert!(matches!(resource("/sessions/"), Resource::Sessions));
        let id = Uuid::now_v7();
        assert!(matches!(
            resource(&format!("/sessions/{id}/events")),
            Resource::Session(Some(found)) if found == id
        ));
        assert!(matches!(
            resource("/sessions/x/events"),
            Resource::Session(None)
        ));
    }

    #[test]
    fn each_role_reaches_only_its_routes() {
        let session = Resource::Session(Some(Uuid::now_v7()));
        let agent = key(KeyRole::Agent);
        let operator = key(KeyRole::Operator);
        let admin = key(KeyRole::Admin);
        assert!(permitted(&agent, &Method::POST, &session).is_ok());
        assert!(permitted(&agent, &Method::DELETE, &session).is_ok());
        assert!(permitted(&agent, &Method::POST, &Resource::Admin).is_err());
        assert!(permitted(&operator, &Method::GET, &session).is_ok());
        assert!(permitted(&operator, &Method::GET, &Resource::Sessions).is_ok());
        assert!(permitted(&operator, &Method::POST, &session).is_err());
        assert!(permitted(&operator, &Method::DELETE, &session).is_err());
        assert!(permitted(&operator, &Method::POST, &Resource::Sessions).is_err());
        assert!(permitted(&admin, &Method::POST, &Resource::Admin).is_ok());
        assert!(permitted(&admin, &Method::GET, &session).is_err());
        for caller in [&agent, &operator, &admin, &Caller::open()] {
            assert!(permitted(caller, &Method::GET, &Resource::Public).is_ok());
        }
        assert!(permitted(&Caller::open(), &Method::POST, &Resource::Admin).is_ok());
    }
}
