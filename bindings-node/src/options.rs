//! Client options as JavaScript gives them: index.js hands over each option
//! with its name and a value of one JS type; core finds the option by name
//! (camelCase or the short TLS names) and the value is converted by the
//! option's kind into core's option text. Nothing here knows a particular
//! option, so a new core option needs only its `options.d.ts` line.

use etcdlock::bridge::{self, OptionKind, Unit};
use etcdlock::ClientOptions;
use napi_derive::napi;

use crate::errors::*;

/// One client option: its name and its value (one of the fields is set).
#[napi(object)]
pub struct NativeOption {
    pub name: String,
    pub text: Option<String>,
    pub number: Option<f64>,
    pub flag: Option<bool>,
    pub list: Option<Vec<String>>,
}

/// Core's client options from the given ones over the `ETCDLOCK_*`
/// environment (core's one rule: a given option wins).
pub(crate) fn client_options(given: Vec<NativeOption>) -> napi::Result<ClientOptions> {
    let mut pairs = Vec::with_capacity(given.len());
    for o in given {
        let key = bridge::option_key(&o.name)
            .ok_or_else(|| to_js_err(&bridge::unknown_option(&o.name)))?;
        pairs.push((key, option_text(key, o)?));
    }
    js(bridge::client_options(pairs))
}

fn option_text(key: &str, o: NativeOption) -> napi::Result<String> {
    let kind = bridge::option_kind(key).expect("option_key returns known keys");
    let want = match kind {
        OptionKind::List => "an array of strings or a comma-separated string",
        OptionKind::WholeSeconds => "a whole number of seconds",
        OptionKind::Duration => "a number of milliseconds",
        OptionKind::Bool => "a boolean",
        OptionKind::Text => "a string",
    };
    match (kind, o.text, o.number, o.flag, o.list) {
        (OptionKind::List, _, _, _, Some(l)) => js(bridge::list_value(key, &l)),
        (OptionKind::List, Some(t), _, _, _) => {
            let items: Vec<&str> = t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            js(bridge::list_value(key, &items))
        }
        (OptionKind::WholeSeconds, _, Some(n), _, _) => Ok(format!("{n}")),
        (OptionKind::Duration, _, Some(n), _, _) => Ok(bridge::duration_value(n, Unit::Millis)),
        (OptionKind::Bool, _, _, Some(b), _) => Ok(b.to_string()),
        (OptionKind::Text, Some(t), _, _, _) => Ok(t),
        _ => Err(invalid(format!("{} must be {want}", o.name))),
    }
}
