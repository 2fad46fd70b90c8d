//! The JSON value of an input as the checks need it: parsed by serde_json (never by hand), with
//! strings borrowed from the text where it has no escapes, and objects as sorted vectors.
//!
//! Objects keep the last of duplicate keys (§5: as Python's json, msgspec and ECMAScript do)
//! and are sorted by key bytes, which for UTF-8 is the code point order of §1; so writing a
//! value back in order gives `CJ(v)` directly (see `canonical`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Members an object is given room for before its first is read (see `visit_map`).
const MEMBERS_ROOM: usize = 16;

/// A JSON value borrowed from its text.
pub enum Json<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// A float literal (`-0` included) or an integer beyond 64 bits: never canonical-able (§1).
    NotInteger,
    /// `Borrowed` when the text had no escape in it: its bytes are then their own canonical form.
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Members sorted by key, each key once (the last given wins).
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl<'a> Json<'a> {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        let Json::Object(members) = self else { return None };
        members
            .binary_search_by(|(name, _)| name.as_ref().cmp(key))
            .ok()
            .map(|at| &members[at].1)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(text) => Some(text),
            _ => None,
        }
    }
}

/// A key, borrowed where it can be (serde's own `Cow<str>` always copies).
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(Json::Bool(value))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(Json::Int(value))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(value).map_or(Json::NotInteger, Json::Int))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Json::NotInteger)
    }
    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Borrowed(text)))
    }
    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Owned(text.to_owned())))
    }
    fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Owned(text)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // serde_json knows no object's size beforehand: room for an event's own 12 members at
        // once, not grown from 4 to 8 to 16 (three blocks, two copies; the tree lives only
        // while its text is judged).
        let room = map.size_hint().unwrap_or(MEMBERS_ROOM);
        let mut members: Vec<(Cow<'de, str>, Json<'de>)> = Vec::with_capacity(room);
        while let Some(Key(key)) = map.next_key()? {
            members.push((key, map.next_value()?));
        }
        // A stable sort keeps duplicates in the order given; then the last of each run wins.
        members.sort_by(|(a, _), (b, _)| a.cmp(b));
        members.dedup_by(|later, kept| {
            let duplicate = later.0 == kept.0;
            if duplicate {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            duplicate
        });
        Ok(Json::Object(members))
    }
}

/// Whether `text` is a JSON text that a parse into [`Json`] takes (no lone surrogate escape in
/// any string, nesting within serde_json's bound), judged without building its value: for a
/// value that a later duplicate key overrides, which spec §5 (1.1) still holds to the text-level
/// rules although no one reads it.
pub fn text_rules_hold(text: &str) -> bool {
    serde_json::from_str::<Skipped>(text).is_ok()
}

/// A JSON value parsed as [`Json`] parses it (each string decoded, and so its escapes checked)
/// and let go at once.
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkippedVisitor)
    }
}

struct SkippedVisitor;

impl<'de> Visitor<'de> for SkippedVisitor {
    type Value = Skipped;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skipped, A::Error> {
        while seq.next_element::<Skipped>()?.is_some() {}
        Ok(Skipped)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skipped, A::Error> {
        while map.next_key::<Skipped>()?.is_some() {
            map.next_value::<Skipped>()?;
        }
        Ok(Skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::{text_rules_hold, Json};

    #[test]
    fn the_last_duplicate_wins_and_keys_sort() {
        let value: Json = serde_json::from_str(r#"{"b":1,"a":2,"b":3,"a":4,"b":5}"#).unwrap();
        let Json::Object(members) = value else { panic!() };
        let flat: Vec<(&str, i64)> = members
            .iter()
            .map(|(k, v)| (k.as_ref(), if let Json::Int(i) = v { *i } else { -1 }))
            .collect();
        assert_eq!(flat, [("a", 4), ("b", 5)]);
    }

    #[test]
    fn strings_borrow_only_without_escapes() {
        let value: Json = serde_json::from_str(r#"["plain é", "esc\n"]"#).unwrap();
        let Json::Array(items) = value else { panic!() };
        assert!(matches!(&items[0], Json::Str(std::borrow::Cow::Borrowed("plain é"))));
        assert!(matches!(&items[1], Json::Str(std::borrow::Cow::Owned(text)) if text == "esc\n"));
    }

    #[test]
    fn text_rules_are_judged_without_a_value() {
        for good in [r#"{"a":["\ud83d\ude00",1.5,-0,null,true]}"#, r#""\\ud800""#, "[[[]]]"] {
            assert!(text_rules_hold(good), "{good}");
        }
        let deep = "[".repeat(1000) + &"]".repeat(1000);
        for bad in [
            r#""\ud800""#,
            r#"{"a":{"b":["\udc00"]}}"#,
            r#"{"\ud800":1}"#,
            "[1,]",
            deep.as_str(),
        ] {
            assert!(!text_rules_hold(bad), "{bad}");
            assert!(serde_json::from_str::<Json>(bad).is_err(), "{bad}");
        }
    }
}
