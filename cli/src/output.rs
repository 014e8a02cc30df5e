//! Output helpers shared by the commands.

use serde::Serialize;

use crate::Fail;

/// Prints `value` as pretty JSON on stdout, followed by a newline.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<(), Fail> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Fail(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

/// A string as a JSON string literal: quoted, with quotes, backslashes and control characters
/// escaped, so that a line stays one line whatever the text holds.
pub fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Text of possibly non-UTF-8 bytes, for display.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Pairs serialized as a JSON object, in their order.
pub struct OrderedMap<K, V>(pub Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for OrderedMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}
