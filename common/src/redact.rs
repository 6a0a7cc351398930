//! Redaction of credentials, so that URLs, error messages and files can be printed and stored:
//! passwords in URLs, secret parameters (`password=`, `api_key=`, `token=`, …), `Authorization`
//! and API-key header values, and every secret fairbench itself read from a file or a variable
//! (registered here, replaced wherever it appears in what a run prints or writes).

use std::borrow::Cow;
use std::sync::Mutex;

use crate::urlparts::normalized_key;

/// What a redacted value reads as.
pub const MASK: &str = "***";

/// Parameter keys (normalized: lower case, no `-`/`_`) whose values are secrets.
pub const SECRET_PARAMS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "sslpassword",
    "apikey",
    "token",
    "accesstoken",
    "authtoken",
    "secret",
    "clientsecret",
];

/// Header names (lower case) whose values are credentials.
const SECRET_HEADERS: &[&str] = &["authorization", "x-api-key", "api-key", "x-auth-token"];

/// Words that name an `Authorization` scheme and are kept in front of the masked credential.
const AUTH_SCHEMES: &[&str] = &["basic", "bearer", "apikey", "token", "digest", "negotiate"];

/// Secrets shorter than this are not replaced literally: replacing a two-letter password in
/// every output would mangle the output (they are still masked in URLs and parameters).
pub const MIN_LITERAL_SECRET: usize = 4;

/// Secrets read from files and variables in this process, replaced wherever they appear.
static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Replaces the password in `scheme://user:password@host/…` and the value of every secret
/// query parameter ([`SECRET_PARAMS`]) with `***`; everything else is kept as written.
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
                out.replace_range(start..authority_start + at, MASK);
            }
        }
    }
    redact_secret_params(&out)
}

fn redact_secret_params(url: &str) -> String {
    let Some(query_start) = url.find('?') else {
        return url.to_owned();
    };
    let (base, query) = url.split_at(query_start + 1);
    let params: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_secret_key(key) => format!("{key}={MASK}"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}{}", params.join("&"))
}

fn is_secret_key(key: &str) -> bool {
    SECRET_PARAMS.contains(&normalized_key(key).as_str())
}

/// Any text (an error chain, a log line): every URL in it redacted as [`redact_url`] does,
/// `key=value` secrets outside URLs (`password=… dbname=…`), `Authorization:` and API-key
/// header values, and every registered secret.
pub fn redact_text(text: &str) -> String {
    let out = redact_urls_in(text);
    let out = redact_key_values(&out);
    let out = redact_headers(&out);
    scrub(&out).into_owned()
}

fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `password=…`, `api_key=…` and the other [`SECRET_PARAMS`] wherever they stand in text.
fn redact_key_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(eq) = rest.find('=') {
        let key_start = rest[..eq]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
            .map_or(0, |i| i + 1);
        let value_end = rest[eq + 1..]
            .find(|c: char| c.is_whitespace() || matches!(c, '&' | ';' | ',' | '"' | '\'' | ')'))
            .map_or(rest.len(), |i| eq + 1 + i);
        out.push_str(&rest[..=eq]);
        let value = &rest[eq + 1..value_end];
        if is_secret_key(&rest[key_start..eq]) && !value.is_empty() {
            out.push_str(MASK);
        } else {
            out.push_str(value);
        }
        rest = &rest[value_end..];
    }
    out.push_str(rest);
    out
}

/// `Authorization: Basic …`, `"authorization": "Bearer …"`, `x-api-key: …`: the credential.
fn redact_headers(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for header in SECRET_HEADERS {
        let mut from = 0;
        while let Some(found) = lower[from..].find(header) {
            let name_end = from + found + header.len();
            from = name_end;
            let after = &lower[name_end..];
            let separators = after
                .find(|c: char| !matches!(c, '"' | '\'' | ':' | ' '))
                .unwrap_or(after.len());
            if !after[..separators].contains(':') {
                continue;
            }
            let mut start = name_end + separators;
            if let Some(word_len) = lower[start..].find(' ')
                && AUTH_SCHEMES.contains(&&lower[start..start + word_len])
            {
                start += word_len + 1;
            }
            let end = lower[start..]
                .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';'))
                .map_or(text.len(), |i| start + i);
            if end > start && &text[start..end] != MASK {
                spans.push((start, end));
            }
        }
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end) in spans {
        if start < copied {
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str(MASK);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// Remembers a secret read from a file or a variable, so that [`scrub`] (and so every file a
/// run writes, its summary and its error line) replaces it wherever it appears.
pub fn register_secret(secret: &str) {
    if secret.len() < MIN_LITERAL_SECRET {
        return;
    }
    let mut secrets = SECRETS.lock().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_owned());
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

fn registered() -> Vec<String> {
    SECRETS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `text` with every registered secret replaced (borrowed when there is none in it).
pub fn scrub(text: &str) -> Cow<'_, str> {
    let secrets = registered();
    if !secrets.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for secret in &secrets {
        out = out.replace(secret.as_str(), MASK);
    }
    Cow::Owned(out)
}

/// The bytes of a file about to be written, with every registered secret replaced, raw and as
/// a JSON string spells it.
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let secrets = registered();
    let mut forms: Vec<Vec<u8>> = Vec::new();
    for secret in &secrets {
        forms.push(secret.as_bytes().to_vec());
        let json = serde_json::to_string(secret).unwrap_or_default();
        let inner = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'));
        let escaped = inner.unwrap_or(&json).as_bytes().to_vec();
        if escaped != secret.as_bytes() {
            forms.push(escaped);
        }
    }
    if !forms.iter().any(|f| contains(bytes, f)) {
        return Cow::Borrowed(bytes);
    }
    let mut out = bytes.to_vec();
    for form in &forms {
        out = replace_bytes(&out, form, MASK.as_bytes());
    }
    Cow::Owned(out)
}

/// Replaces the panic hook, once, with one that redacts the message ([`redact_text`]) before
/// it is printed; a message with nothing to redact goes to the previous hook unchanged.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info.to_string();
            let clean = redact_text(&text);
            if clean == text {
                previous(info);
            } else {
                let thread = std::thread::current();
                eprintln!(
                    "\nthread '{}' {clean}",
                    thread.name().unwrap_or("<unnamed>")
                );
            }
        }));
    });
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn api_keys_and_tokens_in_parameters_are_hidden() {
        assert_eq!(
            redact_url("https://es.example.com:9200/?api_key=abc123&cacert=/ca.pem"),
            "https://es.example.com:9200/?api_key=***&cacert=/ca.pem"
        );
        assert_eq!(
            redact_url("qdrant://h:6334?apikey=k1&token=t2&api-key=k3&Access_Token=t4"),
            "qdrant://h:6334?apikey=***&token=***&api-key=***&Access_Token=***"
        );
        assert_eq!(
            redact_url("mqtts://u:pw@h?sslmode=verify-full"),
            "mqtts://u:***@h?sslmode=verify-full"
        );
    }

    #[test]
    fn urls_and_secrets_inside_text_are_hidden() {
        let text = "error sending request for url (https://elastic:hunter22@10.0.0.5:9200/_bulk?x=1) | \
                    caused by: password=letmein dbname=app";
        assert_eq!(
            redact_text(text),
            "error sending request for url (https://elastic:***@10.0.0.5:9200/_bulk?x=1) | \
             caused by: password=*** dbname=app"
        );
        assert_eq!(
            redact_text("cannot reach \"mongodb://u:pw@h/\" (token=abc, retry)"),
            "cannot reach \"mongodb://u:***@h/\" (token=***, retry)"
        );
        assert_eq!(redact_text("a=b c==d x="), "a=b c==d x=");
    }

    #[test]
    fn authorization_and_api_key_headers_are_hidden() {
        assert_eq!(
            redact_text("Authorization: Basic ZWxhc3RpYzpodW50ZXIy\nHost: h"),
            "Authorization: Basic ***\nHost: h"
        );
        assert_eq!(
            redact_text(r#"{"authorization": "ApiKey VnVhQ2ZHY0JDZGJrU","x":1}"#),
            r#"{"authorization": "ApiKey ***","x":1}"#
        );
        assert_eq!(
            redact_text("x-api-key: abc, authorization:Bearer t0k"),
            "x-api-key: ***, authorization:Bearer ***"
        );
        assert_eq!(
            redact_text("the authorization failed"),
            "the authorization failed"
        );
    }

    #[test]
    fn registered_secrets_are_replaced_everywhere() {
        register_secret("zq-registered-secret-1");
        register_secret("ab");
        assert_eq!(
            scrub("user zq-registered-secret-1 said ab"),
            "user *** said ab"
        );
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
        register_secret("zq\"quoted\\secret");
        let json = serde_json::to_vec(&serde_json::json!({"m": "x zq\"quoted\\secret y"})).unwrap();
        let clean = scrub_bytes(&json);
        let text = String::from_utf8(clean.into_owned()).unwrap();
        assert_eq!(text, r#"{"m":"x *** y"}"#);
        assert_eq!(redact_text("e: zq-registered-secret-1"), "e: ***");
    }
}
