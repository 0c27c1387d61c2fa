//! The worker's report channel, sealed so that candidate code cannot speak on it.
//!
//! Everything in the worker's process is untrusted once a candidate is mapped, including
//! every file descriptor: a launcher can write a forged `done` line to each of them. So
//! each line the worker sends carries a sequence number and an HMAC-SHA256 under a key
//! that the orchestrator makes fresh for each evaluation and hands over on the worker's
//! stdin, which the worker reads to the end and closes before anything untrusted runs.
//! A line that fails the MAC, repeats or skips a number, or follows the final report is
//! tampering, and the orchestrator rejects the candidate for it.
//!
//! The key still lives in the worker's memory, which candidate code shares: a candidate
//! that searches its own address space for it could sign a forgery. The seal stops blind
//! forgery (writing to every descriptor) and replays; the orchestrator's consistency
//! check of the report against the request (`report_check`) is the second line.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt::Write as _;

type HmacSha256 = Hmac<Sha256>;

pub const KEY_BYTES: usize = 32;

/// A per-evaluation key.
#[derive(Clone)]
pub struct Key([u8; KEY_BYTES]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from the operating system's random source.
    pub fn fresh() -> Key {
        let mut k = [0u8; KEY_BYTES];
        rand::fill(&mut k);
        Key(k)
    }

    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    pub fn from_hex(s: &str) -> Option<Key> {
        let s = s.trim();
        if s.len() != 2 * KEY_BYTES {
            return None;
        }
        let mut k = [0u8; KEY_BYTES];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Key(k))
    }

    fn mac(&self, seq: u64, body: &str) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        m.update(&seq.to_le_bytes());
        m.update(body.as_bytes());
        m
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The worker's side: numbers and signs each line.
pub struct Sealer {
    key: Key,
    next: u64,
}

impl Sealer {
    pub fn new(key: Key) -> Sealer {
        Sealer { key, next: 0 }
    }

    /// `SEQ MAC BODY` for a one-line body (JSON has no raw newlines).
    pub fn seal(&mut self, body: &str) -> String {
        let seq = self.next;
        self.next += 1;
        let tag = self.key.mac(seq, body).finalize().into_bytes();
        format!("{seq} {} {body}\n", hex(&tag))
    }
}

/// Why a line on the channel is not the worker's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tamper {
    /// Not of the form `SEQ MAC BODY`.
    Malformed,
    BadMac {
        seq: u64,
    },
    /// A valid line out of order: a replay or a dropped line.
    OutOfOrder {
        expected: u64,
        got: u64,
    },
}

impl std::fmt::Display for Tamper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tamper::Malformed => f.write_str("a line that is not a sealed report line"),
            Tamper::BadMac { seq } => write!(f, "line {seq} with a MAC that does not match this evaluation's key"),
            Tamper::OutOfOrder { expected, got } => {
                write!(f, "a correctly sealed line numbered {got} where {expected} was due (a replay)")
            }
        }
    }
}

/// The orchestrator's side: checks each line in order.
pub struct Opener {
    key: Key,
    next: u64,
}

impl Opener {
    pub fn new(key: Key) -> Opener {
        Opener { key, next: 0 }
    }

    /// The body of a line the worker sealed, or why it is not one.
    pub fn open<'a>(&mut self, line: &'a str) -> Result<&'a str, Tamper> {
        let mut parts = line.splitn(3, ' ');
        let (Some(seq), Some(tag), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Tamper::Malformed);
        };
        let seq: u64 = seq.parse().map_err(|_| Tamper::Malformed)?;
        let tag = unhex(tag).ok_or(Tamper::Malformed)?;
        let body = body.strip_suffix('\n').unwrap_or(body);
        self.key.mac(seq, body).verify_slice(&tag).map_err(|_| Tamper::BadMac { seq })?;
        if seq != self.next {
            return Err(Tamper::OutOfOrder { expected: self.next, got: seq });
        }
        self.next += 1;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_lines_open_in_order() {
        let key = Key::fresh();
        let mut s = Sealer::new(key.clone());
        let mut o = Opener::new(key);
        let a = s.seal(r#"{"event":"phase"}"#);
        let b = s.seal(r#"{"event":"done"}"#);
        assert_eq!(o.open(&a), Ok(r#"{"event":"phase"}"#));
        assert_eq!(o.open(&b), Ok(r#"{"event":"done"}"#));
    }

    #[test]
    fn forgeries_and_replays_are_refused() {
        let key = Key::fresh();
        let mut s = Sealer::new(key.clone());
        let mut o = Opener::new(key);
        let done = r#"{"event":"done","report":{"outcome":{"outcome":"passed"}}}"#;
        assert_eq!(o.open(done), Err(Tamper::Malformed), "an unsealed report");
        let other = Sealer::new(Key::fresh()).seal(done);
        assert_eq!(o.open(&other), Err(Tamper::BadMac { seq: 0 }), "sealed under another evaluation's key");
        let first = s.seal(r#"{"event":"phase"}"#);
        assert!(o.open(&first).is_ok());
        assert_eq!(o.open(&first), Err(Tamper::OutOfOrder { expected: 1, got: 0 }), "a replay");
        let mut tampered = s.seal(r#"{"event":"done","report":{"outcome":{"outcome":"rejected"}}}"#);
        tampered = tampered.replace("rejected", "passed\"");
        assert!(matches!(o.open(&tampered), Err(Tamper::BadMac { .. })), "an edited body");
    }

    #[test]
    fn keys_round_trip_through_hex() {
        let k = Key::fresh();
        let back = Key::from_hex(&k.to_hex()).unwrap();
        assert_eq!(back.0, k.0);
        assert!(Key::from_hex("zz").is_none());
        assert!(Key::from_hex(&"g".repeat(64)).is_none());
    }
}
