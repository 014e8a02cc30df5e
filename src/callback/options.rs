//! Limits and names that govern how callback bodies are read. Every default is documented in the
//! docs/assumptions.md.

/// How callback bodies are read. Plain data: cheap to clone, shareable across threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptions {
    /// Largest body accepted, in bytes. Default 64 KiB.
    pub max_body_bytes: usize,
    /// Deepest nesting of arrays and objects, counting the top-level object as 1. Default 32,
    /// at most `json::MAX_DEPTH_CEILING`.
    pub max_depth: usize,
    /// Longest identifier or code accepted, in bytes of UTF-8. Default 256.
    pub max_identifier_bytes: usize,
    /// Name of the service's consecutive event index field. Default `index` (the spec does not
    /// show it; the service's own events use `index`).
    pub index_field: String,
    /// Refuse an event whose index field is present but not a non-negative integer (within
    /// `i64`). Default false: the spec shows neither the index's name nor its format, so such an
    /// event is handled with no index (`Event::index` is `None`, `Event::index_unreadable` is
    /// true, the raw value stays readable among the extra fields); a guessed field never
    /// refuses money.
    pub strict_index: bool,
    /// Refuse events other than the three known ones instead of passing them through. Default
    /// false: unknown events are passed through as `EventKind::Other`.
    pub reject_unknown_events: bool,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_body_bytes: 64 * 1024,
            max_depth: 32,
            max_identifier_bytes: 256,
            index_field: "index".to_owned(),
            strict_index: false,
            reject_unknown_events: false,
        }
    }
}
