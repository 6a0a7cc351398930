//! Safe file names for per-cell exports: a slug of the workload and the system (lower-case
//! ASCII letters, digits and `-`), distinct within one report.

use crate::results::Report;

/// `read 16c` → `read-16c`; `PostgreSQL 16/main` → `postgresql-16-main`; nothing usable → `x`.
pub fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches('-');
    let mut slug: String = trimmed.chars().take(60).collect();
    while slug.ends_with('-') {
        slug.pop();
    }
    if slug.is_empty() {
        "x".to_owned()
    } else {
        slug
    }
}

/// The file stem of each cell of `report`, in cell order: `<workload>--<system>`, with `-2`,
/// `-3`, … on a stem another cell already took (two workloads that differ only in
/// punctuation).
pub fn cell_stems(report: &Report) -> Vec<String> {
    let mut taken: Vec<String> = Vec::with_capacity(report.cells.len());
    for cell in &report.cells {
        let base = format!("{}--{}", slug(&cell.workload), slug(&cell.system));
        let mut stem = base.clone();
        let mut n = 2;
        while taken.contains(&stem) {
            stem = format!("{base}-{n}");
            n += 1;
        }
        taken.push(stem);
    }
    taken
}

/// `hdr/<stem>.hgrm`, the percentile distribution of a cell.
pub fn hgrm_file(stem: &str) -> String {
    format!("hdr/{stem}.hgrm")
}

/// `hdr/<stem>.hlog`, the interval log of a cell.
pub fn hlog_file(stem: &str) -> String {
    format!("hdr/{stem}.hlog")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_and_stems_distinct() {
        assert_eq!(slug("read 16c"), "read-16c");
        assert_eq!(slug("PostgreSQL 16/main"), "postgresql-16-main");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("ÄÖ"), "x");
        assert_eq!(slug(&"a".repeat(100)).len(), 60);
        let mut report = crate::report::tests::sample();
        report.cells[1].workload = "write-1c".into();
        report.cells[1].system = "a".into();
        let stems = cell_stems(&report);
        assert_eq!(stems[0], "write-1c--a");
        assert_eq!(stems[1], "write-1c--a-2");
        assert_eq!(stems[3], "read-16c--a");
    }
}
