//! Tables for people (KIP-1279 style: upper-case headers, columns two spaces apart, `-` for
//! unknown) and JSON for scripts.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table};
use serde::Serialize;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// A borderless table with `headers`.
pub fn table(headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(comfy_table::presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(headers.iter().copied());
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
        c.set_cell_alignment(CellAlignment::Left);
        c.set_constraint(ColumnConstraint::ContentWidth);
    }
    t
}

/// A two-column table without a header (`Name  value` lines).
pub fn pairs(rows: &[(&str, String)]) -> String {
    let mut t = Table::new();
    t.load_style(comfy_table::presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
    for (k, v) in rows {
        t.add_row(vec![k.to_string(), v.clone()]);
    }
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    render(&t)
}

/// The table as text, without trailing blanks.
pub fn render(t: &Table) -> String {
    t.to_string().lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// Prints a table, or `empty` when it has no rows.
pub fn print_table(t: &Table, empty: &str) {
    if t.row_count() == 0 {
        println!("{empty}");
    } else {
        println!("{}", render(t));
    }
}

/// Prints `v` as pretty JSON.
pub fn print_json<T: Serialize + ?Sized>(v: &T) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("kmirror: cannot print JSON: {e}"),
    }
}

/// A value or `-`.
pub fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// `text` cut to `max` characters (with `...`), on one line.
pub fn truncate(text: &str, max: usize) -> String {
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max.saturating_sub(3)).collect();
        s.push_str("...");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_kip_style() {
        let mut t = table(&["MIRROR", "TOPIC", "LAG"]);
        t.add_row(vec!["a-to-b", "orders-eu", "0"]);
        t.add_row(vec!["a-to-b", "orders", "10"]);
        assert_eq!(render(&t), "MIRROR  TOPIC      LAG\na-to-b  orders-eu  0\na-to-b  orders     10");
    }

    #[test]
    fn pairs_align() {
        assert_eq!(pairs(&[("Name", "m".into()), ("Data path", "running".into())]), "Name       m\nData path  running");
    }

    #[test]
    fn truncation() {
        assert_eq!(truncate("short", 80), "short");
        assert_eq!(truncate("a\nb", 80), "a b");
        let long = "x".repeat(100);
        assert_eq!(truncate(&long, 80).chars().count(), 80);
        assert!(truncate(&long, 80).ends_with("..."));
        assert_eq!(or_dash(None::<i64>), "-");
        assert_eq!(or_dash(Some(5)), "5");
    }
}
