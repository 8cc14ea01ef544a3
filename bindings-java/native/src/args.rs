//! Handles (native objects as Java `long`s) and Java arguments as core values.

use crate::prelude::*;

pub(crate) fn into_handle<T>(v: Arc<T>) -> jlong {
    Arc::into_raw(v) as jlong
}

/// Borrow the object behind a handle (a new strong reference).
///
/// # Safety
/// `h` must be a live handle of type `T` made by [`into_handle`]; the Java side
/// guarantees it (handles are private, freed once, and pinned while in use).
pub(crate) unsafe fn borrow<T>(h: jlong, what: &str) -> NResult<Arc<T>> {
    if h == 0 {
        return Err(NErr::Lock(Error::new(ErrorCode::Closed, format!("the {what} was closed"))));
    }
    let p = h as *const T;
    Arc::increment_strong_count(p);
    Ok(Arc::from_raw(p))
}

/// # Safety
/// As [`borrow`]; called exactly once per handle.
pub(crate) unsafe fn free<T>(h: jlong) -> Option<Arc<T>> {
    if h == 0 {
        None
    } else {
        Some(Arc::from_raw(h as *const T))
    }
}

// ---------------------------------------------------------------------------
// Argument conversion

pub(crate) fn opt_string(env: &Env<'_>, s: &JString<'_>) -> NResult<Option<String>> {
    if s.is_null() {
        return Ok(None);
    }
    Ok(Some(s.try_to_string(env)?))
}

pub(crate) fn req_string(env: &Env<'_>, s: &JString<'_>, what: &str) -> NResult<String> {
    opt_string(env, s)?.ok_or_else(|| invalid(format!("{what} must not be null")))
}

pub(crate) fn req_bytes(env: &Env<'_>, a: &JByteArray<'_>, what: &str) -> NResult<Vec<u8>> {
    if a.is_null() {
        return Err(invalid(format!("{what} must not be null")));
    }
    Ok(env.convert_byte_array(a)?)
}



/// Options of one acquisition: a timeout in ms (negative: no limit) by
/// core's one rule, and the cancellation token.
pub(crate) fn lock_opts(timeout_ms: jlong, cancel: Option<CancellationToken>) -> NResult<LockOptions> {
    let mut o = bridge::lock_options((timeout_ms >= 0).then_some(timeout_ms as f64), bridge::Unit::Millis)?;
    o.cancel = cancel;
    Ok(o)
}
