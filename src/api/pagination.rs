//! Opaque page tokens for server-side paginated listings.
//!
//! A token is the hex encoding of `v1 ␟ listing ␟ query ␟ position`, where `query` is the
//! canonical form of the listing's sort and filters. A token is only accepted by the listing and
//! query it was issued for, so a client cannot page through one ordering with a token from
//! another; anything else (altered, truncated, foreign) is an `invalid-page-token` problem.
//! Positions are plain numbers or cursors chosen by each listing.

use super::problem::{ApiError, ProblemType};

/// Default and maximum page sizes (the default lives with the wire types, whose audit listing
/// shows that many per-topic results of an operation).
pub use crate::presentation::dto::DEFAULT_PAGE_SIZE;
pub const MAX_PAGE_SIZE: usize = 1000;

const VERSION: &str = "v1";
const SEP: char = '\u{1f}';

/// The page size a request asks for, checked against the limits.
pub fn page_size(requested: Option<u32>) -> Result<usize, ApiError> {
    match requested {
        None => Ok(DEFAULT_PAGE_SIZE),
        Some(n) if (1..=MAX_PAGE_SIZE as u32).contains(&n) => Ok(n as usize),
        Some(n) => Err(ApiError::new(
            ProblemType::InvalidQuery,
            format!("page_size must be between 1 and {MAX_PAGE_SIZE} (got {n})"),
        )),
    }
}

/// Encodes a position of `listing` under `query`.
pub fn encode(listing: &str, query: &str, position: &str) -> String {
    let raw = format!("{VERSION}{SEP}{listing}{SEP}{query}{SEP}{position}");
    let mut out = String::with_capacity(raw.len() * 2);
    for b in raw.bytes() {
        out.push(char::from_digit(u32::from(b >> 4), 16).expect("nibble"));
        out.push(char::from_digit(u32::from(b & 0xf), 16).expect("nibble"));
    }
    out
}

/// Decodes a token issued by [`encode`] for the same `listing` and `query`, returning its
/// position.
pub fn decode(token: &str, listing: &str, query: &str) -> Result<String, ApiError> {
    let invalid = |why: &str| ApiError::new(ProblemType::InvalidPageToken, format!("invalid page_token: {why}"));
    if !token.len().is_multiple_of(2) || token.len() > 8192 {
        return Err(invalid("malformed"));
    }
    let bytes: Option<Vec<u8>> =
        (0..token.len()).step_by(2).map(|i| token.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    let raw = bytes.and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| invalid("malformed"))?;
    let mut fields = raw.splitn(4, SEP);
    let (Some(v), Some(l), Some(q), Some(position)) = (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(invalid("malformed"));
    };
    if v != VERSION || l != listing {
        return Err(invalid("it was not issued by this listing"));
    }
    if q != query {
        return Err(invalid("it was issued for other filters or another sort order; start again without it"));
    }
    Ok(position.to_string())
}

/// Decodes a numeric offset position.
pub fn decode_offset(token: &str, listing: &str, query: &str) -> Result<usize, ApiError> {
    decode(token, listing, query)?
        .parse()
        .map_err(|_| ApiError::new(ProblemType::InvalidPageToken, "invalid page_token: malformed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_are_bound_to_their_query() {
        let t = encode("partitions", "m|lag||", "200");
        assert_eq!(decode_offset(&t, "partitions", "m|lag||").unwrap(), 200);
        assert_eq!(decode(&t, "partitions", "m|topic||").unwrap_err().problem, ProblemType::InvalidPageToken);
        assert_eq!(decode(&t, "audit", "m|lag||").unwrap_err().problem, ProblemType::InvalidPageToken);
        for bad in ["", "zz", "abc", "00", &t[..20]] {
            assert!(decode_offset(bad, "partitions", "m|lag||").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn page_sizes_are_bounded() {
        assert_eq!(page_size(None).unwrap(), 100);
        assert_eq!(page_size(Some(1000)).unwrap(), 1000);
        assert!(page_size(Some(0)).is_err());
        assert!(page_size(Some(1001)).is_err());
    }
}
