//! Prints the `_search` bodies search-bench sends for one workload, one JSON document a line,
//! in the order every connection cycles through them (for scripts/opensearch-parity).
//!
//! `cargo run --release -p search-bench --example query_bodies -- match 200000 256 42`
//! (workload: match, phrase, bool or agg; documents; queries; seed, as given to search-bench).

use search_bench::corpus::Corpus;
use search_bench::queries::{QueryKind, QuerySet};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| {
        args.get(i)
            .map(|a| common::human::parse_count(a).expect("a count like 20k"))
            .unwrap_or(default)
    };
    let word = args.first().map(String::as_str).unwrap_or("match");
    let Some(kind) = QueryKind::ALL.into_iter().find(|k| k.key() == word) else {
        eprintln!("error: workload {word} is not one of match, phrase, bool, agg");
        std::process::exit(2);
    };
    let (docs, queries, seed) = (number(1, 200_000), number(2, 256), number(3, 42));
    let corpus = Corpus::generate(seed, docs);
    for body in QuerySet::generate(kind, &corpus, seed, queries as usize).bodies {
        println!("{}", String::from_utf8_lossy(&body));
    }
}
