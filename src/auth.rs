//! API keys and tenants: who may call ctxd, and whose sessions they see.
//!
//! A key is `ctxd_<id>_<secret>`: the id (16 hex digits) finds the key's row and is safe to show
//! and log; the secret (32 random bytes, base64url) is shown once when the key is created and
//! stored only as its SHA-256 digest. A digest of 256 random bits needs no slow password hash:
//! nothing can be guessed from it. Digests are compared in constant time.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use crate::domain::FieldError;

/// The tenant of every session created without a key (open mode), and of keys that name none.
pub const DEFAULT_TENANT: &str = "default";

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum KeyRole {
    /// Creates sessions, appends, compacts, takes turns and recalls: its tenant's sessions only.
    Agent,
    /// Reads its tenant's sessions (context, records, events) and changes nothing.
    Operator,
    /// Manages keys and tenants; reads no session.
    Admin,
}

impl KeyRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "agent" => Some(Self::Agent),
            "operator" => Some(Self::Operator),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }
}

/// A key as listed: everything but its secret.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ApiKey {
    /// The key's public id (the part after `ctxd_`); revoke it by this id.
    pub id: String,
    pub tenant: String,
    pub role: KeyRole,
    /// What the key is for, as its creator named it.
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked key is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key as stored: its row and the digest of its secret.
#[derive(Debug, Clone)]
pub struct StoredKey {
    pub key: ApiKey,
    pub secret_hash: Vec<u8>,
}

impl StoredKey {
    /// Whether `secret` is this key's, compared in constant time; never for a revoked key.
    pub fn admits(&self, secret: &str) -> bool {
        self.key.revoked_at.is_none() && bool::from(digest(secret).ct_eq(&self.secret_hash[..]))
    }
}

/// A new key: the one time its secret exists outside the caller.
pub struct IssuedKey {
    pub stored: StoredKey,
    /// The whole bearer token, `ctxd_<id>_<secret>`.
    pub token: String,
}

const PREFIX: &str = "ctxd_";
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;

/// Makes a key for `tenant` with `role`.
pub fn issue(tenant: &str, role: KeyRole, name: &str) -> Result<IssuedKey, String> {
    let mut id = [0u8; ID_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut id).map_err(|e| format!("no randomness for a key: {e}"))?;
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness for a key: {e}"))?;
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    Ok(IssuedKey {
        token: format!("{PREFIX}{id}_{secret}"),
        stored: StoredKey {
            key: ApiKey {
                id,
                tenant: tenant.to_owned(),
                role,
                name: name.to_owned(),
                created_at: Utc::now(),
                revoked_at: None,
            },
            secret_hash: digest(&secret).to_vec(),
        },
    })
}

/// A bearer token split into its key id and secret; None when it is not shaped as a key.
pub fn split_token(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let shaped = id.len() == ID_BYTES * 2
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && !secret.is_empty()
        && secret.len() <= 128;
    shaped.then_some((id, secret))
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// A tenant: the owner of sessions and keys.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Tenant {
    /// 1 to 63 characters: lowercase letters, digits, `-` and `_`, starting with a letter or digit.
    pub id: String,
    pub created_at: DateTime<Utc>,
}

pub const TENANT_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,62}$";

/// The errors of a tenant id, under `field`.
pub fn validate_tenant(field: &str, id: &str) -> Vec<FieldError> {
    let valid = (1..=63).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if valid {
        Vec::new()
    } else {
        vec![FieldError::new(
            field,
            "must be 1 to 63 lowercase letters, digits, `-` or `_`, starting with a letter or digit",
        )]
    }
}

pub const MAX_KEY_NAME_CHARS: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_key_admits_its_secret_and_nothing_else() {
        let issued = issue("acme", KeyRole::Agent, "ci").unwrap();
        let (id, secret) = split_token(&issued.token).expect("shaped as a key");
        assert_eq!(id, issued.stored.key.id);
        assert!(issued.stored.admits(secret));
        assert!(!issued.stored.admits(&format!("{secret}x")));
        assert!(!issued.stored.admits(""));
        // The secret is nowhere in what is stored.
        assert!(!format!("{:?}", issued.stored).contains(secret));
        let mut revoked = issued.stored.clone();
        revoked.key.revoked_at = Some(Utc::now());
        assert!(!revoked.admits(secret));
        // Two keys never share an id or a secret.
        let other = issue("acme", KeyRole::Agent, "ci").unwrap();
        assert_ne!(other.token, issued.token);
        assert_ne!(other.stored.key.id, issued.stored.key.id);
    }

    #[test]
    fn tokens_not_shaped_as_keys_are_refused_before_any_lookup() {
        for token in [
            "",
            "ctxd_",
            "sk-abc",
            "ctxd_0123456789abcdef",
            "ctxd_0123456789abcdef_",
            "ctxd_0123456789abcdeg_secret",
            "ctxd_0123_secret",
        ] {
            assert_eq!(split_token(token), None, "{token}");
        }
        assert_eq!(
            split_token("ctxd_0123456789abcdef_se_cret"),
            Some(("0123456789abcdef", "se_cret"))
        );
    }

    #[test]
    fn tenant_ids_are_short_lowercase_slugs() {
        for good in ["default", "acme", "a", "team-7_x", &"a".repeat(63)] {
            assert!(validate_tenant("tenant", good).is_empty(), "{good}");
        }
        for bad in ["", "Acme", "-a", "_a", "a b", "a/b", &"a".repeat(64), "é"] {
            assert_eq!(validate_tenant("tenant", bad).len(), 1, "{bad}");
        }
    }
}
