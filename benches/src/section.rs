//! [`Section`]: what each measuring module returns to the `perf` report.

/// One area's figures: JSON keys for the report and lines for the human table.
#[derive(Debug, Default)]
pub struct Section {
    /// Top-level keys this section adds to the `perf --json` object.
    pub json: serde_json::Map<String, serde_json::Value>,
    /// Human-readable table lines.
    pub table: Vec<String>,
}
