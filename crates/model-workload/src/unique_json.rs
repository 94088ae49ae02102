//! JSON read as a [`serde_json::Value`] that refuses an object naming a key twice, where
//! `serde_json::from_slice::<Value>` keeps the last and says nothing: a file that says two
//! things about one field is refused, as a GGUF header with a key twice is.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Parses `bytes` as JSON, refusing a key given twice in one object ("duplicate key
/// \"hidden_size\" at line 1 column 40"). serde_json's nesting limit (128) still holds.
///
/// # Errors
/// What `serde_json::from_slice` refuses, and a key given twice.
pub fn from_slice_unique_keys(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Unique>(bytes).map(|u| u.0)
}

/// A value whose objects, at any depth, name each key once.
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unique, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text holds no NaN or infinity: every f64 parsed is finite.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {}",
                    crate::shown(&format!("{key:?}"))
                )));
            }
            let Unique(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth_and_the_rest_is_serde_jsons() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": [{"b": null, "b": null}]}"#,
            r#"{"t": {"hidden_size": 0, "hidden_size": 2048}}"#,
        ] {
            let err = from_slice_unique_keys(text.as_bytes()).unwrap_err();
            assert!(err.to_string().contains("duplicate key"), "{text}: {err}");
        }
        for text in [
            r#"{"a": 1, "b": [1, -2, 3.5, "s", true, null, {"a": {}}], "c": 1e300}"#,
            "[]",
            "18446744073709551615",
            r#""é\u0000""#,
        ] {
            let ours = from_slice_unique_keys(text.as_bytes()).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(
            from_slice_unique_keys(deep.as_bytes()).is_err(),
            "nesting limit"
        );
        assert!(from_slice_unique_keys(b"{\"a\": 1,}").is_err());
    }
}
