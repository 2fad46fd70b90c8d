//! Canonical JSON (spec §1): which values are canonical-able, and their bytes.
//!
//! `serde_json` builds objects as `BTreeMap`s (the crate's `preserve_order` feature is off), so
//! keys iterate in byte order, which for UTF-8 is the code point order of §1, and its compact
//! writer escapes exactly `"`, `\` and U+0000–U+001F (`\b \f \n \r \t`, else `\u00xx` in lower
//! case) and writes every other character raw: `serde_json::to_vec` of a canonical-able value is
//! `CJ(v)`, byte for byte (the differential tests compare it with the pure path on every vector).

use serde_json::Value;

/// Nesting bound of §1 for inputs: a scalar at top level is depth 0, `[]` is depth 1.
pub const MAX_DEPTH: usize = 64;
/// 2^53 - 1: integers outside ±this are not canonical-able (§1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// True when `value` (nested inside `enclosing` containers) is canonical-able (§1).
///
/// A float (serde_json's `f64`, which includes `-0`) or an integer outside ±(2^53-1) says no;
/// the pure path then judges the input, and says exactly why (§6 check 1).
pub fn canonical_able(value: &Value, enclosing: usize) -> bool {
    match value {
        Value::Number(number) => number
            .as_i64()
            .is_some_and(|integer| (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&integer)),
        Value::Array(items) => enclosing < MAX_DEPTH && items.iter().all(|item| canonical_able(item, enclosing + 1)),
        Value::Object(members) => {
            enclosing < MAX_DEPTH && members.values().all(|member| canonical_able(member, enclosing + 1))
        }
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

/// `CJ(value)` appended to `out`, for a canonical-able value (a `Value`, a `Map`).
pub fn write<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("writing JSON to memory cannot fail");
}

/// `CJ(text)`: a JSON string, escaped as §1 says.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("writing JSON to memory cannot fail");
}

/// `CJ` of a string or null.
pub fn write_opt_str(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => write_str(out, text),
        None => out.extend_from_slice(b"null"),
    }
}

/// `CJ` of an array of strings, in the order given.
pub fn write_str_array<'a>(out: &mut Vec<u8>, items: impl IntoIterator<Item = &'a str>) {
    out.push(b'[');
    for (position, item) in items.into_iter().enumerate() {
        if position > 0 {
            out.push(b',');
        }
        write_str(out, item);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cj(text: &str) -> String {
        let value: Value = serde_json::from_str(text).unwrap();
        let mut out = Vec::new();
        write(&mut out, &value);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn keys_sort_by_code_point_and_characters_stay_raw() {
        assert_eq!(cj(r#"{"b":1,"a":[true,null],"日":"\u00e9\u001f\n"}"#), "{\"a\":[true,null],\"b\":1,\"日\":\"é\\u001f\\n\"}");
        // U+FB33 sorts before U+1F602 by code point (UTF-16 order would swap them).
        assert_eq!(cj("{\"\u{1F602}\":1,\"\u{FB33}\":2}"), "{\"\u{FB33}\":2,\"\u{1F602}\":1}");
    }

    #[test]
    fn floats_unsafe_integers_and_depth_are_not_canonical_able() {
        let able = |text: &str| canonical_able(&serde_json::from_str(text).unwrap(), 0);
        assert!(able("[9007199254740991,-9007199254740991]"));
        assert!(!able("9007199254740992"));
        assert!(!able("1.0"));
        assert!(!able("-0"));
        assert!(able(&format!("{}{}", "[".repeat(64), "]".repeat(64))));
        assert!(!able(&format!("{}{}", "[".repeat(65), "]".repeat(65))));
    }
}
