//! A plain table and its two renderings: aligned text for the terminal, and Markdown.

/// Rows of text under a header; the first column is the row label.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Figures are right-aligned; a table of words (`false`) is left-aligned throughout.
    pub numeric: bool,
}

impl Table {
    /// Aligned columns: the label column left-aligned, figures right-aligned.
    pub fn to_text(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = width - cell.chars().count();
                if i > 0 {
                    out.push_str("   ");
                }
                if i == 0 || !self.numeric {
                    out.push_str(cell);
                    out.push_str(&" ".repeat(pad));
                } else {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(cell);
                }
            }
            out.trim_end().to_owned()
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&self.header));
        out.push('\n');
        let rule: usize = widths.iter().sum::<usize>() + 3 * (columns.saturating_sub(1));
        out.push_str(&"─".repeat(rule));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    /// A GitHub-flavoured Markdown table under a bold title.
    pub fn to_markdown(&self) -> String {
        let escape = |cell: &str| cell.replace('|', "\\|");
        let mut out = format!("**{}**\n\n", self.title);
        out.push_str(&format!(
            "| {} |\n",
            self.header
                .iter()
                .map(|h| escape(h))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| {
                if i == 0 || !self.numeric {
                    "---"
                } else {
                    "---:"
                }
            })
            .collect();
        out.push_str(&format!("|{}|\n", align.join("|")));
        for row in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                row.iter()
                    .map(|c| escape(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        Table {
            title: "Throughput".into(),
            header: vec!["workload".into(), "a".into(), "bb|c".into()],
            rows: vec![
                vec!["write 1c".into(), "1,000".into(), "5".into()],
                vec!["read 16c".into(), "12".into(), "13,660".into()],
            ],
            numeric: true,
        }
    }

    #[test]
    fn text_aligns_figures_right() {
        let text = sample().to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "workload       a     bb|c");
        assert_eq!(lines[3], "write 1c   1,000        5");
        assert_eq!(lines[4], "read 16c      12   13,660");
    }

    #[test]
    fn markdown_escapes_pipes() {
        let md = sample().to_markdown();
        assert!(md.contains("| workload | a | bb\\|c |"));
        assert!(md.contains("|---|---:|---:|"));
    }
}
