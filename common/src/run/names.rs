//! The names systems are reported under: distinct, and the reference one of them.

use anyhow::bail;

/// Checks that no two systems share a name and that `reference` (when given) names one of
/// them; returns the reference, by default the first system. `urls` (redacted) go into the
/// advice for a clash; `flag` is how the user names a system (`--target`, `--broker`).
pub fn check_names(
    names: &[String],
    urls: &[String],
    reference: Option<&str>,
    flag: &str,
) -> anyhow::Result<String> {
    let what = flag.trim_start_matches('-');
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            let url = urls.get(i).map_or("URL", String::as_str);
            bail!(
                "two {what}s are named `{name}`; tell them apart with NAME=URL (for example {flag} {name}2={url})"
            );
        }
    }
    match reference {
        Some(reference) if !names.iter().any(|n| n == reference) => bail!(
            "--reference {reference} names no {what} ({what}s: {})",
            names.join(", ")
        ),
        Some(reference) => Ok(reference.to_owned()),
        None => names
            .first()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no {what} to measure")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_reference_defaults_to_the_first_and_must_exist() {
        let n = names(&["pg", "sqlite"]);
        assert_eq!(check_names(&n, &[], None, "--target").unwrap(), "pg");
        assert_eq!(
            check_names(&n, &[], Some("sqlite"), "--target").unwrap(),
            "sqlite"
        );
        let error = check_names(&n, &[], Some("maria"), "--target").unwrap_err();
        assert_eq!(
            error.to_string(),
            "--reference maria names no target (targets: pg, sqlite)"
        );
    }

    #[test]
    fn a_clash_says_how_to_tell_them_apart() {
        let n = names(&["mosquitto", "mosquitto"]);
        let urls = names(&["mqtt://a:1", "mqtt://b:2"]);
        let error = check_names(&n, &urls, None, "--broker").unwrap_err();
        assert_eq!(
            error.to_string(),
            "two brokers are named `mosquitto`; tell them apart with NAME=URL (for example --broker mosquitto2=mqtt://b:2)"
        );
    }
}
