//! Output helpers shared by the commands.

use std::time::Duration;

use serde::Serialize;

use crate::Fail;

/// `print!` to stdout that survives a closed stdout (`slotpartner recover | head -1`): a write
/// error is ignored, so that a run moving money is never cut short by its reader going away.
/// The exit status still says how the run went.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(::std::format_args!($($arg)*))
    };
}

/// `println!` to stdout that survives a closed stdout (see `out!`).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write_stdout(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

/// Writes to stdout, ignoring a failure (a reader gone, a full disk): what `out!` and `outln!`
/// call.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_fmt(args);
}

/// Prints `value` as pretty JSON on stdout, followed by a newline.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<(), Fail> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Fail(format!("cannot write JSON: {e}")))?;
    crate::outln!("{text}");
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

/// A duration as an operator writes it: `90d`, `36h`, `10m`, `45s`, `1.5s`.
pub fn age_text(duration: Duration) -> String {
    let secs = duration.as_secs();
    if duration.subsec_millis() != 0 {
        return format!("{}s", duration.as_secs_f64());
    }
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs >= size && secs % size == 0 {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}

/// An elapsed time, rounded to its two largest units: `45s`, `12m 5s`, `3h 5m`, `2d 4h`.
pub fn elapsed_text(duration: Duration) -> String {
    let secs = duration.as_secs();
    let parts = [(secs / 86_400, "d"), (secs / 3600 % 24, "h"), (secs / 60 % 60, "m"), (secs % 60, "s")];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    let shown: Vec<String> = parts[first..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0 || first == 3)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    shown.join(" ")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn durations_read_as_written() {
        for (secs, want) in [(90 * 86_400, "90d"), (36 * 3600, "36h"), (600, "10m"), (45, "45s"), (0, "0s")] {
            assert_eq!(super::age_text(Duration::from_secs(secs)), want);
        }
        assert_eq!(super::age_text(Duration::from_millis(1500)), "1.5s");
        for (secs, want) in
            [(0, "0s"), (45, "45s"), (725, "12m 5s"), (3600, "1h"), (11_100, "3h 5m"), (187_200, "2d 4h")]
        {
            assert_eq!(super::elapsed_text(Duration::from_secs(secs)), want);
        }
    }
}
