//! Redaction of credentials in connection strings, so they can be printed and stored.

/// Replaces the password in `scheme://user:password@host/…` and any `password=` query
/// parameter with `***`; everything else is kept as written.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = out[authority_start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| authority_start + i);
        if let Some(at) = out[authority_start..authority_end].rfind('@') {
            let userinfo = &out[authority_start..authority_start + at];
            if let Some(colon) = userinfo.find(':') {
                let start = authority_start + colon + 1;
                out.replace_range(start..authority_start + at, "***");
            }
        }
    }
    redact_password_params(&out)
}

fn redact_password_params(url: &str) -> String {
    let Some(query_start) = url.find('?') else {
        return url.to_owned();
    };
    let (base, query) = url.split_at(query_start + 1);
    let params: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}{}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_hidden_everything_else_kept() {
        assert_eq!(
            redact_url("postgres://bench:s3cr@t@127.0.0.1:5432/db"),
            "postgres://bench:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact_url("mysql://root@127.0.0.1/db"),
            "mysql://root@127.0.0.1/db"
        );
        assert_eq!(
            redact_url("postgres://127.0.0.1/db?user=a&password=b&x=1"),
            "postgres://127.0.0.1/db?user=a&password=***&x=1"
        );
        assert_eq!(redact_url("sqlite"), "sqlite");
        assert_eq!(
            redact_url("sqlite:///tmp/a:b@c.db"),
            "sqlite:///tmp/a:b@c.db"
        );
    }
}
