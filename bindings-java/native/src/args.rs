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
        return Err(NErr::Lock(Error::new(
            ErrorCode::Closed,
            format!("the {what} was closed"),
        )));
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

/// Options of one acquisition with its extras (lock-delay, lease time,
/// metadata), built only by core's `bridge::acquire_options` (one rule and
/// one message per value in every language; nothing is checked here).
pub(crate) fn acquire_opts(
    timeout_ms: jlong,
    extras: bridge::Extras,
    cancel: Option<CancellationToken>,
) -> NResult<LockOptions> {
    let mut o = bridge::acquire_options(
        (timeout_ms >= 0).then_some(timeout_ms as f64),
        extras,
        bridge::Unit::Millis,
    )?;
    o.cancel = cancel;
    Ok(o)
}

/// The extras of an acquisition as Java passes them: spans in milliseconds
/// (fractions allowed; NaN: not given; a negative one reaches core, which
/// refuses it), metadata as alternating keys and values (null: none).
pub(crate) fn extras(
    env: &mut Env<'_>,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: &JObjectArray<'_, JString<'_>>,
) -> NResult<bridge::Extras> {
    let span = |v: jdouble| (!v.is_nan()).then_some(v);
    let mut pairs = Vec::new();
    if !metadata.is_null() {
        let n = metadata.len(env)?;
        if n % 2 != 0 {
            return Err(invalid("metadata comes as key, value pairs"));
        }
        let mut items = Vec::with_capacity(n);
        for i in 0..n {
            let s = metadata.get_element(env, i)?;
            items.push(req_string(env, &s, "a metadata key or value")?);
        }
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            pairs.push((k, v));
        }
    }
    Ok(bridge::Extras {
        lock_delay: span(lock_delay_ms),
        lease_time: span(lease_time_ms),
        metadata: pairs,
    })
}
