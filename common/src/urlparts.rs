//! The parts of a target URL that common reads without knowing the client behind it: the
//! scheme, the user and password, the host and port, and the query parameters (read, removed,
//! added). Written by hand because every client parses its URL again in its own way.

/// The scheme of `scheme://…` (lower-cased), or `None` for a bare word like `sqlite`.
pub fn scheme(url: &str) -> Option<String> {
    url.find("://").map(|end| url[..end].to_ascii_lowercase())
}

/// `(start, end)` byte offsets of the authority (`user:password@host:port`) after `://`.
fn authority_span(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    Some((start, end))
}

/// The user and password of `scheme://user:password@host`, percent-decoded.
pub fn userinfo(url: &str) -> Option<(String, Option<String>)> {
    let (start, end) = authority_span(url)?;
    let at = url[start..end].rfind('@')?;
    let info = &url[start..start + at];
    Some(match info.split_once(':') {
        Some((user, password)) => (percent_decode(user), Some(percent_decode(password))),
        None => (percent_decode(info), None),
    })
}

/// `url` with `password` in its userinfo (percent-encoded), replacing any there; a URL with no
/// user gets an empty one (`redis://:password@host`).
pub fn with_password(url: &str, password: &str) -> String {
    let Some((start, end)) = authority_span(url) else {
        return url.to_owned();
    };
    let authority = &url[start..end];
    let (user, host) = match authority.rfind('@') {
        Some(at) => {
            let info = &authority[..at];
            (
                info.split_once(':').map_or(info, |(u, _)| u),
                &authority[at + 1..],
            )
        }
        None => ("", authority),
    };
    format!(
        "{}{user}:{}@{host}{}",
        &url[..start],
        percent_encode(password),
        &url[end..]
    )
}

/// Host and port of the first host of the authority; brackets of an IPv6 literal removed.
pub fn host_port(url: &str) -> Option<(String, Option<u16>)> {
    let (start, end) = authority_span(url)?;
    let authority = &url[start..end];
    let hosts = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    let first = hosts.split(',').next().unwrap_or("");
    if let Some(rest) = first.strip_prefix('[') {
        let close = rest.find(']')?;
        let port = rest[close + 1..]
            .strip_prefix(':')
            .and_then(|p| p.parse().ok());
        return Some((rest[..close].to_owned(), port));
    }
    Some(match first.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().ok()),
        None => (first.to_owned(), None),
    })
}

/// The query parameters as written (`key`, percent-decoded `value`), in order.
pub fn query_pairs(url: &str) -> Vec<(String, String)> {
    let Some(start) = url.find('?') else {
        return Vec::new();
    };
    let end = url[start..].find('#').map_or(url.len(), |i| start + i);
    url[start + 1..end]
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) => (key.to_owned(), percent_decode(value)),
            None => (pair.to_owned(), String::new()),
        })
        .collect()
}

/// A parameter key compared the way every client family spells it: lower case, no `-` or `_`
/// (`ssl-mode`, `ssl_mode` and `sslMode` are one key).
pub fn normalized_key(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '-' && *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The value of the first parameter whose normalized key is one of `keys`, with the key as
/// written.
pub fn param(url: &str, keys: &[&str]) -> Option<(String, String)> {
    query_pairs(url)
        .into_iter()
        .find(|(key, _)| keys.contains(&normalized_key(key).as_str()))
}

/// `url` without the parameters whose normalized key is one of `keys` (a `?` left with nothing
/// after it goes too).
pub fn without_params(url: &str, keys: &[&str]) -> String {
    let Some(start) = url.find('?') else {
        return url.to_owned();
    };
    let end = url[start..].find('#').map_or(url.len(), |i| start + i);
    let kept: Vec<&str> = url[start + 1..end]
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !pair.is_empty() && !keys.contains(&normalized_key(key).as_str())
        })
        .collect();
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    format!("{}{query}{}", &url[..start], &url[end..])
}

/// `url` with `key=value` appended to its query (in the value, what a query cannot hold
/// percent-encoded; a path keeps its slashes).
pub fn with_param(url: &str, key: &str, value: &str) -> String {
    let (base, fragment) = url.split_at(url.find('#').unwrap_or(url.len()));
    let separator = if base.contains('?') { '&' } else { '?' };
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_graphic() && !matches!(byte, b'&' | b'=' | b'#' | b'%' | b'+' | b'?') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("{base}{separator}{key}={encoded}{fragment}")
}

/// `%XX` sequences decoded (an invalid one is kept as written); `+` is left alone, as URLs of
/// databases mean it.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Everything but unreserved characters percent-encoded, so any secret fits in a URL.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_of_a_url() {
        let url =
            "postgres://bench:p%40ss@db.example.com:6432,other:1/app?sslmode=verify-full&x=1#f";
        assert_eq!(scheme(url).as_deref(), Some("postgres"));
        assert_eq!(userinfo(url), Some(("bench".into(), Some("p@ss".into()))));
        assert_eq!(host_port(url), Some(("db.example.com".into(), Some(6432))));
        assert_eq!(
            host_port("mqtts://[::1]:8883"),
            Some(("::1".into(), Some(8883)))
        );
        assert_eq!(host_port("https://h/"), Some(("h".into(), None)));
        assert_eq!(scheme("sqlite"), None);
        assert_eq!(
            param(url, &["sslmode"]),
            Some(("sslmode".into(), "verify-full".into()))
        );
        assert_eq!(
            param("mysql://h/db?ssl-mode=REQUIRED", &["sslmode"]),
            Some(("ssl-mode".into(), "REQUIRED".into()))
        );
    }

    #[test]
    fn parameters_come_and_go() {
        let url = "postgres://h/db?sslmode=require&application_name=x&sslrootcert=%2Fca.pem#frag";
        assert_eq!(
            without_params(url, &["sslmode", "sslrootcert"]),
            "postgres://h/db?application_name=x#frag"
        );
        assert_eq!(
            without_params("https://h/?cacert=/x", &["cacert"]),
            "https://h/"
        );
        assert_eq!(
            with_param("mongodb://h/", "tls", "true"),
            "mongodb://h/?tls=true"
        );
        assert_eq!(
            with_param("mongodb://h/?a=1", "tlsCAFile", "/c a&b.pem"),
            "mongodb://h/?a=1&tlsCAFile=/c%20a%26b.pem"
        );
    }

    #[test]
    fn passwords_are_put_in_encoded() {
        assert_eq!(
            with_password("postgres://bench@h:1/db", "p@ss:/"),
            "postgres://bench:p%40ss%3A%2F@h:1/db"
        );
        assert_eq!(
            with_password("postgres://bench:old@h/db", "new"),
            "postgres://bench:new@h/db"
        );
        assert_eq!(
            with_password("redis://127.0.0.1:6379", "pw"),
            "redis://:pw@127.0.0.1:6379"
        );
        let url = with_password("mqtt://u@h", "a%b c");
        assert_eq!(userinfo(&url).unwrap().1.as_deref(), Some("a%b c"));
        assert_eq!(percent_decode("100%"), "100%");
    }
}
