//! Self-contained HTML pages (`report.html`, `compare.html`): one file with its CSS, its
//! charts (inline SVG, drawn by Rust) and a few lines of JavaScript inline, nothing fetched at
//! view time. This module owns the page frame and the HTML form of a [`Table`].

mod report;

pub use report::{Html, render_html};

use std::fmt::Write as _;

use crate::report::Table;
use crate::report::chart::escape;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// A whole page: `title` in the head, `body` (already HTML) in `<main>`, the script last.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n{body}</main>\n\
         <script>\n{JS}</script>\n</body>\n</html>\n",
        escape(title)
    )
}

/// A verdict word at the end of a figure, coloured by what it says.
fn decorate(text: &str) -> String {
    let mut html = escape(text);
    for word in ["faster", "slower", "parity", "inconclusive"] {
        html = html.replace(
            &format!(" {word}"),
            &format!(" <span class=\"v-{word}\">{word}</span>"),
        );
    }
    html
}

/// A [`Table`] as an HTML table under its title; figures right-aligned.
pub fn table(t: &Table) -> String {
    let mut html = format!(
        "<div class=\"table-wrap\"><table>\n<caption>{}</caption>\n<thead><tr>",
        escape(&t.title)
    );
    for h in &t.header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        html.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = if i > 0 && t.numeric {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(html, "<td{class}>{}</td>", decorate(cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody></table></div>\n");
    html
}

/// A bulleted list of text lines.
pub fn list(lines: &[String]) -> String {
    let mut html = String::from("<ul class=\"plain\">\n");
    for line in lines {
        let _ = writeln!(html, "<li>{}</li>", escape(line));
    }
    html.push_str("</ul>\n");
    html
}

/// An SVG document as an element of the page (without an XML prolog).
pub fn figure(svg: &str) -> String {
    let body = match svg.find("<svg") {
        Some(at) => &svg[at..],
        None => svg,
    };
    format!("<figure>\n{body}</figure>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_escape_and_colour_verdicts() {
        let t = Table {
            title: "Against <a>".into(),
            header: vec!["workload".into(), "b".into()],
            rows: vec![vec!["w & x".into(), "1.20× [1.10–1.30] faster".into()]],
            numeric: true,
        };
        let html = table(&t);
        assert!(html.contains("<caption>Against &lt;a&gt;</caption>"));
        assert!(html.contains("<td>w &amp; x</td>"));
        assert!(html.contains(
            r#"<td class="num">1.20× [1.10–1.30] <span class="v-faster">faster</span></td>"#
        ));
        let doc = page("t", "<p>x</p>");
        assert!(
            doc.starts_with("<!DOCTYPE html>")
                && doc.contains("<style>")
                && doc.contains("<script>")
        );
        assert!(
            !doc.contains("http://") && !doc.contains("https://"),
            "nothing fetched"
        );
        assert_eq!(
            figure("<?xml version=\"1.0\"?>\n<svg></svg>"),
            "<figure>\n<svg></svg></figure>\n"
        );
    }
}
