//! Canonical JSON (spec §1): which values are canonical-able, and their bytes.
//!
//! A [`Json`] object's members are sorted by key bytes, which for UTF-8 is the code point order
//! of §1, so writing members in order gives `CJ(v)`. Strings are written as serde_json's
//! compact writer writes them, which escapes exactly `"`, `\` and U+0000–U+001F (`\b \f \n \r
//! \t`, else `\u00xx` in lower case) and writes every other character raw, as §1 says; a string
//! borrowed from its text had no escape there, so its bytes are already that (JSON allows no
//! raw `"`, `\` or control character in a string). The differential tests compare the bytes
//! with the pure path's on every vector.

use std::borrow::Cow;

use crate::json::Json;
use crate::pool::vec_with_capacity;

/// Nesting bound of §1 for inputs: a scalar at top level is depth 0, `[]` is depth 1.
pub const MAX_DEPTH: usize = 64;
/// 2^53 - 1: integers outside ±this are not canonical-able (§1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// True when `value` (nested inside `enclosing` containers) is canonical-able (§1).
///
/// A float (`-0` included) or an integer outside ±(2^53-1) says no; the pure path then judges
/// the input, and says exactly why (§6 check 1).
pub fn canonical_able(value: &Json, enclosing: usize) -> bool {
    canonical_able_within(value, enclosing, MAX_DEPTH)
}

/// [`canonical_able`] with containers at most `depth` deep: [`MAX_DEPTH`] for inputs, any depth
/// for the documents that embed them (§1, 1.1; serde_json itself reads no more than 128 levels).
fn canonical_able_within(value: &Json, enclosing: usize, depth: usize) -> bool {
    match value {
        Json::Int(integer) => (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(integer),
        Json::NotInteger => false,
        Json::Array(items) => {
            enclosing < depth
                && items
                    .iter()
                    .all(|item| canonical_able_within(item, enclosing + 1, depth))
        }
        Json::Object(members) => {
            enclosing < depth
                && members
                    .iter()
                    .all(|(_, member)| canonical_able_within(member, enclosing + 1, depth))
        }
        Json::Null | Json::Bool(_) | Json::Str(_) => true,
    }
}

/// `CJ` of the value of the JSON text `text`, when this path can tell it: the text is JSON (for
/// serde_json), and its value is canonical-able with containers at most [`MAX_DEPTH`] deep. `None`
/// says nothing of the text: the pure path decides it (a `-0` is canonical-able there, say).
///
/// The bytes are those the pure path's `CJ(decode_json(text))` gives (the last of duplicate
/// keys wins in both), which is what lets a bundle's events be folded, hashed and compared as
/// these texts (`merge.bundle`).
pub fn canonical_text(text: &[u8]) -> Option<Vec<u8>> {
    canonical_text_within(text, MAX_DEPTH)
}

/// [`canonical_text`] of a document's part (a bundle's state, its other members), at any depth.
pub fn canonical_document(text: &[u8]) -> Option<Vec<u8>> {
    canonical_text_within(text, usize::MAX)
}

fn canonical_text_within(text: &[u8], depth: usize) -> Option<Vec<u8>> {
    canonical_value(text, depth).map(|(_, written)| written)
}

/// The value of the JSON text `text` and its `CJ`, as [`canonical_text`] (`depth`: its bound).
pub fn canonical_value(text: &[u8], depth: usize) -> Option<(Json<'_>, Vec<u8>)> {
    let value: Json = serde_json::from_slice(text).ok()?;
    if !canonical_able_within(&value, 0, depth) {
        return None;
    }
    // Never longer than the text (whitespace goes, no string gains an escape it lacked there).
    let mut written = vec_with_capacity(text.len());
    write(&mut written, &value);
    Some((value, written))
}

/// `CJ(value)` appended to `out`, for a canonical-able value.
pub fn write(out: &mut Vec<u8>, value: &Json) {
    match value {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(true) => out.extend_from_slice(b"true"),
        Json::Bool(false) => out.extend_from_slice(b"false"),
        // serde_json's writer of integers (itoa), not `write!`: the formatting machinery cost
        // ~240 instructions an integer, a few hundred an event.
        Json::Int(integer) => serde_json::to_writer(&mut *out, integer).expect("writing to memory cannot fail"),
        Json::NotInteger => unreachable!("only canonical-able values are written"),
        Json::Str(text) => write_cow(out, text),
        Json::Array(items) => write_list(out, items, write),
        Json::Object(members) => {
            out.push(b'{');
            for (position, (key, member)) in members.iter().enumerate() {
                if position > 0 {
                    out.push(b',');
                }
                write_cow(out, key);
                out.push(b':');
                write(out, member);
            }
            out.push(b'}');
        }
    }
}

// A `&Cow`, not a `&str`: whether the text was borrowed is what says it needs no escaping.
#[allow(clippy::ptr_arg)]
fn write_cow(out: &mut Vec<u8>, text: &Cow<str>) {
    match text {
        Cow::Borrowed(raw) => {
            out.push(b'"');
            out.extend_from_slice(raw.as_bytes());
            out.push(b'"');
        }
        Cow::Owned(text) => write_str(out, text),
    }
}

/// `CJ(text)`: a JSON string, escaped as §1 says.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    // Most strings written here (event ids, targets, timestamps) need no escape: copied at once.
    // The test has no early exit, so that it is vectorized (ids are 71 bytes).
    let plain = !text.bytes().fold(false, |escape, byte| {
        escape | (byte < 0x20) | (byte == b'"') | (byte == b'\\')
    });
    if plain {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(out, text).expect("writing JSON to memory cannot fail");
    }
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
    write_list(out, items, write_str);
}

/// A JSON array of `items`, each written by `each`, in the order given.
pub fn write_list<T>(out: &mut Vec<u8>, items: impl IntoIterator<Item = T>, mut each: impl FnMut(&mut Vec<u8>, T)) {
    out.push(b'[');
    for (position, item) in items.into_iter().enumerate() {
        if position > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cj(text: &str) -> String {
        let value: Json = serde_json::from_str(text).unwrap();
        let mut out = Vec::new();
        write(&mut out, &value);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_written_as_serde_json_escapes_them() {
        // Every character below 0x80 alone, between plain text, and a few beyond.
        let texts: Vec<String> = (0u8..0x80)
            .map(|byte| format!("sha256:{}ab", byte as char))
            .chain(["", "é日\u{1F602}", "\u{7f}", "a\"b\\c"].map(String::from))
            .collect();
        for text in &texts {
            let mut out = Vec::new();
            write_str(&mut out, text);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(text).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn keys_sort_by_code_point_and_characters_stay_raw() {
        assert_eq!(
            cj(r#"{"b":1,"a":[true,null,-5],"日":"\u00e9\u001f\n\/","x":"é"}"#),
            "{\"a\":[true,null,-5],\"b\":1,\"x\":\"é\",\"日\":\"é\\u001f\\n/\"}"
        );
        // U+FB33 sorts before U+1F602 by code point (UTF-16 order would swap them).
        assert_eq!(
            cj("{\"\u{1F602}\":1,\"\u{FB33}\":2}"),
            "{\"\u{FB33}\":2,\"\u{1F602}\":1}"
        );
    }

    #[test]
    fn a_text_is_written_canonically_or_left_to_the_pure_path() {
        let cj_of = |text: &[u8]| canonical_text(text).map(|out| String::from_utf8(out).unwrap());
        assert_eq!(
            cj_of(br#" {"b": [1, "\u00e9\n"], "a": null, "c": {"y": 1, "x": true}, "a": "\/"} "#).as_deref(),
            Some(r#"{"a":"/","b":[1,"é\n"],"c":{"x":true,"y":1}}"#)
        );
        let undecided: [&[u8]; 7] = [
            b"1.5",
            b"-0",
            b"9007199254740992",
            b"[1,]",
            b"{} x",
            br#""\ud800""#,
            b"\"\xff\"",
        ];
        for text in undecided {
            assert_eq!(cj_of(text), None, "{text:?}");
        }
    }

    #[test]
    fn floats_unsafe_integers_and_depth_are_not_canonical_able() {
        let able = |text: &str| canonical_able(&serde_json::from_str(text).unwrap(), 0);
        assert!(able("[9007199254740991,-9007199254740991]"));
        assert!(!able("9007199254740992"));
        assert!(!able("18446744073709551616"));
        assert!(!able("1.0"));
        assert!(!able("-0"));
        assert!(able(&format!("{}{}", "[".repeat(64), "]".repeat(64))));
        assert!(!able(&format!("{}{}", "[".repeat(65), "]".repeat(65))));
    }
}
