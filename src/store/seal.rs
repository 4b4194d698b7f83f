//! Secret property values at rest in `__mirror_state`, sealed with AES-256-GCM (as Apache Kafka
//! encrypts the dynamic password configs it stores with `password.encoder.secret`).
//!
//! Whoever may read the state topic must not learn a mirror's password. So the value of every
//! secret property (`domain::secrets::is_secret_property`) that is not a reference is written
//! sealed: `${sealed:v1:<key id>:<base64 of nonce ‖ ciphertext ‖ tag>}`, with a random 96-bit
//! nonce per value, and the mirror's name and the property's name as associated data, so a sealed
//! value copied into another mirror or property does not open. The key id (16 hex digits of a
//! SHA-256 over the key) says which key sealed it: after a rotation, values sealed under the
//! previous key still open ([`Sealer::unseal`] tries the key whose id matches), and the next write
//! seals them under the new one.
//!
//! The key is 32 random bytes, base64 in a file (`[secrets] key_file`,
//! `KMIRROR_SECRETS_KEY_FILE`; `kmirror secrets generate-key` writes one). Every instance of a
//! deployment needs the same key: any of them may write a mirror record and load every other.
//!
//! Only the engine's persistence calls this module: in memory (and for the clients it builds)
//! the engine holds the plain values; the API and the pages show `[redacted]` as before.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use sha2::{Digest, Sha256};

pub use crate::domain::secrets::is_sealed;
use crate::domain::secrets::{Reference, SEALED_PREFIX as PREFIX, is_secret_property};
const NONCE_LEN: usize = 12;

/// A key that seals and opens secret values.
#[derive(Clone)]
pub struct SecretKey {
    id: String,
    cipher: Aes256Gcm,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Why a key could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{what} is not base64 of 32 bytes (generate one with `kmirror secrets generate-key`)")]
    Malformed { what: String },
}

impl SecretKey {
    /// A key from its 32 bytes.
    #[must_use]
    pub fn from_bytes(bytes: &[u8; 32]) -> SecretKey {
        let digest = Sha256::new().chain_update(b"kmirror secret key id\0").chain_update(bytes).finalize();
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        SecretKey { id, cipher: Aes256Gcm::new(bytes.into()) }
    }

    /// A key from its base64 text (surrounding whitespace ignored); `what` names it in errors.
    ///
    /// # Errors
    ///
    /// [`KeyError::Malformed`] unless the text is base64 of exactly 32 bytes.
    pub fn from_base64(text: &str, what: &str) -> Result<SecretKey, KeyError> {
        let malformed = || KeyError::Malformed { what: what.to_string() };
        let bytes = B64.decode(text.trim()).map_err(|_| malformed())?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| malformed())?;
        Ok(SecretKey::from_bytes(&bytes))
    }

    /// The key in the file at `path`.
    ///
    /// # Errors
    ///
    /// [`KeyError`] when the file cannot be read or does not hold a key. The error never quotes
    /// the file's contents.
    pub fn read(path: &Path) -> Result<SecretKey, KeyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KeyError::Unreadable { path: path.display().to_string(), reason: e.kind().to_string() })?;
        SecretKey::from_base64(&text, &path.display().to_string())
    }

    /// A new random key and its base64 text (what a key file holds).
    #[must_use]
    pub fn generate() -> (SecretKey, String) {
        let bytes: [u8; 32] = rand::random();
        (SecretKey::from_bytes(&bytes), B64.encode(bytes))
    }

    /// The key's id, stored beside every value it seals.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// A sealed value that does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsealError {
    /// Sealed under a key this instance does not have.
    #[error(
        "property {property:?} of mirror {mirror:?} is stored encrypted under key {key_id}, which this instance does \
         not have{have}: configure the key it was written with ([secrets] key_file, or previous_key_file while \
         rotating keys)"
    )]
    UnknownKey { mirror: String, property: String, key_id: String, have: String },
    /// The right key, but the value does not open (corrupt, or moved from another mirror or
    /// property).
    #[error(
        "property {property:?} of mirror {mirror:?} is stored encrypted but does not decrypt with key {key_id} \
         (corrupt, or copied from another mirror or property): set the property again"
    )]
    Corrupt { mirror: String, property: String, key_id: String },
}

/// Seals and opens the secret values of mirror records, under the configured keys.
#[derive(Debug, Clone, Default)]
pub struct Sealer {
    current: Option<SecretKey>,
    previous: Option<SecretKey>,
    allow_plaintext: bool,
}

impl Sealer {
    /// A sealer with the current key (seals and opens), the previous one (opens only, while
    /// rotating), and whether plaintext secrets may be stored when there is no key.
    #[must_use]
    pub fn new(current: Option<SecretKey>, previous: Option<SecretKey>, allow_plaintext: bool) -> Sealer {
        Sealer { current, previous, allow_plaintext }
    }

    /// The current key's id, if there is a key.
    #[must_use]
    pub fn key_id(&self) -> Option<&str> {
        self.current.as_ref().map(SecretKey::id)
    }

    /// Whether a plaintext secret given on create or update may be accepted: it will be sealed
    /// (there is a key), or the deployment allows plaintext secrets at rest.
    #[must_use]
    pub fn accepts_plaintext(&self) -> bool {
        self.current.is_some() || self.allow_plaintext
    }

    /// `properties` as they are stored: every secret value that is not a reference sealed under
    /// the current key (a value sealed under another key is opened and sealed again: rotation).
    /// Without a key they are stored as given; a value that does not open stays as it was.
    #[must_use]
    pub fn seal_properties(&self, mirror: &str, properties: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        properties.iter().map(|(k, v)| (k.clone(), self.seal(mirror, k, v))).collect()
    }

    fn seal(&self, mirror: &str, name: &str, value: &str) -> String {
        if !is_secret_property(name) || Reference::parse(value).is_some() {
            return value.to_string();
        }
        let Some(key) = &self.current else { return value.to_string() };
        let plain = if is_sealed(value) {
            match self.unseal(mirror, name, value) {
                Ok(p) => p,
                // Kept as it is: this instance cannot open it, so it cannot be re-sealed either.
                Err(_) => return value.to_string(),
            }
        } else {
            value.to_string()
        };
        let nonce: [u8; NONCE_LEN] = rand::random();
        let aad = associated_data(mirror, name);
        let Ok(ct) = key.cipher.encrypt(Nonce::from_slice(&nonce), Payload { msg: plain.as_bytes(), aad: &aad }) else {
            // AES-GCM encryption fails only for inputs beyond 64 GiB: a property is at most 64 KiB.
            return value.to_string();
        };
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&ct);
        format!("{PREFIX}{}:{}}}", key.id, B64.encode(blob))
    }

    /// The plain value of a stored one (a value that is not sealed is returned as it is: a
    /// reference, a public value, or a plaintext secret stored before there was a key).
    ///
    /// # Errors
    ///
    /// [`UnsealError`] when the value is sealed under a key this instance does not have, or does
    /// not open.
    pub fn unseal(&self, mirror: &str, name: &str, value: &str) -> Result<String, UnsealError> {
        let Some(rest) = value.strip_prefix(PREFIX).and_then(|r| r.strip_suffix('}')) else {
            return Ok(value.to_string());
        };
        let corrupt = |key_id: &str| UnsealError::Corrupt {
            mirror: mirror.to_string(),
            property: name.to_string(),
            key_id: key_id.to_string(),
        };
        let Some((key_id, blob)) = rest.split_once(':') else { return Err(corrupt("?")) };
        let key = [&self.current, &self.previous].into_iter().flatten().find(|k| k.id == key_id).ok_or_else(|| {
            let have: Vec<&str> = [&self.current, &self.previous].into_iter().flatten().map(|k| k.id()).collect();
            UnsealError::UnknownKey {
                mirror: mirror.to_string(),
                property: name.to_string(),
                key_id: key_id.to_string(),
                have: if have.is_empty() {
                    " (none is configured)".into()
                } else {
                    format!(" (it has {})", have.join(", "))
                },
            }
        })?;
        let blob = B64.decode(blob).map_err(|_| corrupt(key_id))?;
        if blob.len() < NONCE_LEN {
            return Err(corrupt(key_id));
        }
        let (nonce, ct) = blob.split_at(NONCE_LEN);
        let aad = associated_data(mirror, name);
        let plain = key
            .cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad: &aad })
            .map_err(|_| corrupt(key_id))?;
        String::from_utf8(plain).map_err(|_| corrupt(key_id))
    }

    /// `properties` as the engine uses them, every sealed value opened. A value that does not
    /// open stays sealed (a client built with it fails with [`crate::kafka::client`]'s error,
    /// so that mirror alone fails), and the first such error is returned beside.
    #[must_use]
    pub fn unseal_properties(
        &self,
        mirror: &str,
        properties: &BTreeMap<String, String>,
    ) -> (BTreeMap<String, String>, Option<UnsealError>) {
        let mut first = None;
        let out = properties
            .iter()
            .map(|(k, v)| match self.unseal(mirror, k, v) {
                Ok(plain) => (k.clone(), plain),
                Err(e) => {
                    first.get_or_insert(e);
                    (k.clone(), v.clone())
                }
            })
            .collect();
        (out, first)
    }
}

fn associated_data(mirror: &str, property: &str) -> Vec<u8> {
    format!("kmirror sealed v1\0{mirror}\0{property}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn key(byte: u8) -> SecretKey {
        SecretKey::from_bytes(&[byte; 32])
    }

    #[test]
    fn secrets_are_sealed_and_open_again_everything_else_is_stored_as_given() {
        let s = Sealer::new(Some(key(1)), None, false);
        let p = props(&[
            ("sasl.password", "hunter2-plain"),
            ("sasl.username", "alice"),
            ("ssl.key.password", "${file:/run/secrets/pw}"),
        ]);
        let stored = s.seal_properties("m1", &p);
        assert!(is_sealed(&stored["sasl.password"]), "{stored:?}");
        assert!(!stored["sasl.password"].contains("hunter2"));
        assert!(stored["sasl.password"].contains(key(1).id()), "the key id is beside the ciphertext");
        assert_eq!(stored["sasl.username"], "alice");
        assert_eq!(stored["ssl.key.password"], "${file:/run/secrets/pw}", "a reference holds no secret");
        // A random nonce per value: the same secret seals differently each time.
        assert_ne!(s.seal_properties("m1", &p)["sasl.password"], stored["sasl.password"]);
        let (opened, e) = s.unseal_properties("m1", &stored);
        assert_eq!((opened, e), (p, None));
    }

    #[test]
    fn a_sealed_value_opens_only_for_its_mirror_and_property() {
        let s = Sealer::new(Some(key(1)), None, false);
        let stored = s.seal_properties("m1", &props(&[("sasl.password", "hunter2")]));
        let v = &stored["sasl.password"];
        assert!(matches!(s.unseal("m2", "sasl.password", v), Err(UnsealError::Corrupt { .. })));
        assert!(matches!(s.unseal("m1", "ssl.key.password", v), Err(UnsealError::Corrupt { .. })));
        let mut tampered = v.clone();
        tampered.insert(tampered.len() - 3, 'A');
        assert!(s.unseal("m1", "sasl.password", &tampered).is_err());
        assert!(s.unseal("m1", "sasl.password", "${sealed:v1:nocolon}").is_err());
    }

    #[test]
    fn rotation_opens_with_the_previous_key_and_seals_with_the_new_one() {
        let old = Sealer::new(Some(key(1)), None, false);
        let stored = old.seal_properties("m", &props(&[("sasl.password", "hunter2")]));
        let rotated = Sealer::new(Some(key(2)), Some(key(1)), false);
        assert_eq!(rotated.unseal("m", "sasl.password", &stored["sasl.password"]).unwrap(), "hunter2");
        let again = rotated.seal_properties("m", &stored);
        assert!(again["sasl.password"].contains(key(2).id()), "re-sealed under the new key: {again:?}");
        // The new key alone opens it; the old key alone does not.
        assert_eq!(
            Sealer::new(Some(key(2)), None, false).unseal("m", "sasl.password", &again["sasl.password"]).unwrap(),
            "hunter2"
        );
        let e = old.unseal("m", "sasl.password", &again["sasl.password"]).unwrap_err();
        assert!(matches!(&e, UnsealError::UnknownKey { key_id, .. } if key_id == key(2).id()), "{e}");
        assert!(e.to_string().contains("previous_key_file") && !e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn without_a_key_values_are_kept_as_given_and_sealed_ones_stay_sealed() {
        let none = Sealer::default();
        assert!(!none.accepts_plaintext());
        assert!(Sealer::new(None, None, true).accepts_plaintext());
        assert!(Sealer::new(Some(key(1)), None, false).accepts_plaintext());
        let p = props(&[("sasl.password", "plain")]);
        assert_eq!(none.seal_properties("m", &p), p);
        let sealed = Sealer::new(Some(key(1)), None, false).seal_properties("m", &p);
        let (opened, e) = none.unseal_properties("m", &sealed);
        assert_eq!(opened, sealed, "left sealed");
        assert!(e.unwrap().to_string().contains("none is configured"));
        // Old records with a plaintext secret keep working, and are sealed on the next write.
        let s = Sealer::new(Some(key(1)), None, false);
        assert_eq!(s.unseal_properties("m", &p), (p.clone(), None));
        assert!(is_sealed(&s.seal_properties("m", &p)["sasl.password"]));
    }

    #[test]
    fn key_files_hold_base64_of_32_bytes_and_errors_never_quote_them() {
        let (k, text) = SecretKey::generate();
        assert_eq!(SecretKey::from_base64(&format!("{text}\n"), "k").unwrap().id(), k.id());
        for bad in ["", "not base64!", "AAAA", &B64.encode([0u8; 31])] {
            let e = SecretKey::from_base64(bad, "the key file").unwrap_err();
            assert!(e.to_string().contains("generate-key"), "{e}");
        }
        let e = SecretKey::read(Path::new("/nonexistent/kmirror.key")).unwrap_err();
        assert!(matches!(e, KeyError::Unreadable { .. }));
        assert!(!format!("{k:?}").contains(&text), "Debug shows the id only");
        assert_eq!(k.id().len(), 16);
    }
}
