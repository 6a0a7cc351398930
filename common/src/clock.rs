//! Wall-clock timestamps for reports and folder names, always UTC.

use std::time::SystemTime;

/// `2026-11-30T03:41:28Z`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// `20261130T034128Z`, for folder names and run ids.
pub fn compact(rfc3339: &str) -> String {
    rfc3339
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn compact_form_drops_separators() {
        assert_eq!(super::compact("2026-11-30T03:41:28Z"), "20261130T034128Z");
        assert!(super::now_rfc3339().ends_with('Z'));
    }
}
