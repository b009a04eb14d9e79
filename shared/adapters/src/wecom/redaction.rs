//! Secrets never leave the client: tokens and corp secrets are scrubbed from every text an
//! error keeps, and reqwest's messages lose their URL (which carries the token or secret).

use domain::wecom::contact_way::REDACTED;

/// errmsg is kept for logs only; WeCom's texts are short, so anything longer is noise.
const MAX_ERRMSG_CHARS: usize = 300;

/// What a request that got no answer keeps of reqwest's `error`: its kind and causes, without
/// the URL or any of `secrets`.
pub(super) fn transport_error(error: reqwest::Error, secrets: &[&str]) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "transport error"
    };
    // reqwest's message carries the URL, and the URL carries the token or the secret.
    let error = error.without_url();
    let mut detail = format!("{kind}: {error}");
    // The useful part ("connection closed before message completed") is in the causes.
    let mut cause = std::error::Error::source(&error);
    while let Some(inner) = cause {
        detail.push_str(": ");
        detail.push_str(&inner.to_string());
        cause = inner.source();
    }
    scrub(&detail, secrets)
}

/// Makes a WeCom text safe to keep: the known `secrets` (the token in use, the corp secret)
/// and any `access_token` / `corpsecret` value are replaced, and the text is truncated.
pub(super) fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret, REDACTED);
    }
    for key in ["access_token", "corpsecret"] {
        text = redact_values_after(&text, key);
    }
    match text.char_indices().nth(MAX_ERRMSG_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// Replaces the value following each `key` (`key=V`, `key: V`, `"key":"V"`), whatever token
/// WeCom or a proxy might echo, even one we never saw.
fn redact_values_after(text: &str, key: &str) -> String {
    let is_value_char = |c: char| c.is_ascii_alphanumeric() || "-_.~%+/".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let after_key = at + key.len();
        out.push_str(&rest[..after_key]);
        rest = &rest[after_key..];
        let separator = rest
            .find(|c: char| !matches!(c, '=' | ':' | '"' | '\'' | ' '))
            .unwrap_or(rest.len());
        // Only `key=`/`key:` forms: "access_token missing" (41001's text) is no token.
        if !rest[..separator].contains(['=', ':']) {
            continue;
        }
        out.push_str(&rest[..separator]);
        rest = &rest[separator..];
        let value = rest.find(|c: char| !is_value_char(c)).unwrap_or(rest.len());
        if value > 0 {
            out.push_str(REDACTED);
            rest = &rest[value..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbing_removes_known_secrets_and_any_access_token_value() {
        let text = "invalid access_token=AbC-123_x.y, hint: [x], token2 \"access_token\":\"zzz\" \
                    corpsecret: sekret and s3cr3t inline";
        let scrubbed = scrub(text, &["s3cr3t"]);
        for leaked in ["AbC-123_x.y", "zzz", "sekret", "s3cr3t"] {
            assert!(!scrubbed.contains(leaked), "{leaked} in {scrubbed}");
        }
        assert!(scrubbed.starts_with("invalid access_token=[redacted], hint: [x]"));
        assert_eq!(scrub("access_token missing", &[]), "access_token missing");
        assert_eq!(scrub("", &[""]), "");
    }

    #[test]
    fn scrubbing_truncates_long_texts_on_a_character_boundary() {
        let long = "频".repeat(MAX_ERRMSG_CHARS + 5);
        let scrubbed = scrub(&long, &[]);
        assert_eq!(scrubbed.chars().count(), MAX_ERRMSG_CHARS + 3);
        assert!(scrubbed.ends_with("..."));
    }
}
