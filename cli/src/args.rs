//! Argument parsers of the command line: names, prefixes, durations, limits and metadata, each refused with the reason.

use super::*;

/// A duration flag, in core's one syntax (`250ms`, `5s`, `2m`, `1h`, plain
/// seconds), or `inf` / `never` where "no limit" makes sense. NaN, negative,
/// overflowing and unitless-garbage values are usage errors (exit 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// No limit.
    Never,
    /// This long.
    After(Duration),
}

impl Limit {
    /// `None` for [`Limit::Never`].
    pub fn duration(self) -> Option<Duration> {
        match self {
            Limit::Never => None,
            Limit::After(d) => Some(d),
        }
    }
}

/// Parse a [`Limit`]: core's duration syntax, or `inf` / `never`.
/// `KEY=VALUE` for `--meta`.
pub fn parse_meta(v: &str) -> Result<(String, String), String> {
    match v.split_once('=') {
        Some((k, val)) if !k.is_empty() => Ok((k.to_string(), val.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {v:?}")),
    }
}

pub fn parse_limit(v: &str) -> Result<Limit, String> {
    match v.trim() {
        "inf" | "never" => Ok(Limit::Never),
        d => parse_finite(d).map(Limit::After),
    }
}

/// Decode a name given on the command line: `\n`, `\t`, `\r`, `\0`,
/// `\xHH`, `\u{H..}` and `\\` become the characters they name (the
/// escapes `status`, `list` and `watch` print), so every name can be typed.
/// A backslash before anything else is kept as is.
pub fn parse_name(v: &str) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut it = v.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.peek().copied() {
            Some('n') => {
                it.next();
                out.push('\n');
            }
            Some('t') => {
                it.next();
                out.push('\t');
            }
            Some('r') => {
                it.next();
                out.push('\r');
            }
            Some('0') => {
                it.next();
                out.push('\0');
            }
            Some('\\') => {
                it.next();
                out.push('\\');
            }
            Some('x') => {
                it.next();
                let h: String = (0..2).filter_map(|_| it.next()).collect();
                let b = u8::from_str_radix(&h, 16)
                    .ok()
                    .filter(|b| *b < 0x80)
                    .ok_or_else(|| format!("bad escape \\x{h} (\\x00 to \\x7f)"))?;
                out.push(b as char);
            }
            Some('u') => {
                it.next();
                if it.next() != Some('{') {
                    return Err("bad escape: \\u needs {HEX}".into());
                }
                let h: String = it.by_ref().take_while(|c| *c != '}').collect();
                let ch = u32::from_str_radix(&h, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("bad escape \\u{{{h}}}"))?;
                out.push(ch);
            }
            _ => out.push('\\'),
        }
    }
    if out.is_empty() {
        return Err("a name cannot be empty".into());
    }
    Ok(out)
}

/// A prefix given on the command line (`list`, `watch`): decoded as
/// [`parse_name`] decodes a name; empty (or absent) means every lock under
/// the client's namespace.
pub fn parse_prefix(v: &str) -> Result<String, String> {
    if v.is_empty() {
        return Ok(String::new());
    }
    parse_name(v)
}

/// Parse a duration that must be finite (core's syntax).
pub fn parse_finite(v: &str) -> Result<Duration, String> {
    etcdlock::parse_duration("value", v)
        .map_err(|e| e.message().trim_start_matches("value: ").to_string())
}
