//! Handles (native objects as Java `long`s) and Java arguments as core values.

use crate::prelude::*;
use etcdlock::bridge::Handles;
use std::any::Any;

/// Every native object Java holds, by number: a stale, foreign, twice-freed
/// or mistyped handle is a typed error (`Closed`, `InvalidArgument`), never
/// a dangling pointer or another object's memory.
static OBJECTS: Handles<dyn Any + Send + Sync> = Handles::new("etcdlock object");

/// Hand `v` to Java: its handle (never 0).
pub(crate) fn into_handle<T: Any + Send + Sync>(v: Arc<T>) -> jlong {
    OBJECTS.insert_arc(v) as jlong
}

/// The object behind a handle (a new strong reference). `Closed` for a
/// handle already freed (or 0: Java's "closed"), `InvalidArgument` for a
/// number never handed out or an object of another type.
pub(crate) fn borrow<T: Any + Send + Sync>(h: jlong, what: &str) -> NResult<Arc<T>> {
    let closed = || {
        NErr::Lock(Error::new(
            ErrorCode::Closed,
            format!("the {what} was closed"),
        ))
    };
    if h == 0 {
        return Err(closed());
    }
    let any = OBJECTS.get(h as u64).map_err(|e| match e.code() {
        ErrorCode::Closed => closed(),
        _ => NErr::Lock(e),
    })?;
    any.downcast::<T>().map_err(|_| {
        NErr::Lock(Error::new(
            ErrorCode::InvalidArgument,
            format!("handle {h} is not a {what}"),
        ))
    })
}

/// Take a handle back from Java: its object the first time, `None` after
/// (or for 0, or for an object of another type, which stays).
pub(crate) fn free<T: Any + Send + Sync>(h: jlong) -> Option<Arc<T>> {
    if h == 0 {
        return None;
    }
    let id = h as u64;
    match OBJECTS.get(id).ok()?.downcast::<T>() {
        Ok(_) => OBJECTS.remove(id)?.downcast::<T>().ok(),
        Err(_) => None,
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

/// The extras of an acquisition from Java's `AcquireOptions` value (null:
/// none), read through its own accessors (`lockDelayMs`, `leaseTimeMs`,
/// `metadataPairs`, `detectDeadlock`), so one value carries them across instead of three
/// arguments.
pub(crate) fn options_extras(env: &mut Env<'_>, opts: &JObject<'_>) -> NResult<bridge::Extras> {
    if opts.is_null() {
        return Ok(bridge::Extras::default());
    }
    let lock_delay_ms = env
        .call_method(opts, jni_str!("lockDelayMs"), jni_sig!("()D"), &[])?
        .d()?;
    let lease_time_ms = env
        .call_method(opts, jni_str!("leaseTimeMs"), jni_sig!("()D"), &[])?
        .d()?;
    let pairs = env
        .call_method(
            opts,
            jni_str!("metadataPairs"),
            jni_sig!("()[Ljava/lang/String;"),
            &[],
        )?
        .l()?;
    let pairs = env.cast_local::<JObjectArray<'_, JString<'_>>>(pairs)?;
    let detect_deadlock = env
        .call_method(opts, jni_str!("detectDeadlock"), jni_sig!("()Z"), &[])?
        .z()?;
    Ok(bridge::Extras {
        detect_deadlock,
        ..extras(env, lock_delay_ms, lease_time_ms, &pairs)?
    })
}

/// A `String[]` as strings; null elements are refused (`what` names them).
pub(crate) fn req_strings(
    env: &mut Env<'_>,
    a: &JObjectArray<'_, JString<'_>>,
    what: &str,
) -> NResult<Vec<String>> {
    if a.is_null() {
        return Err(invalid(format!("{what}s must not be null")));
    }
    let n = a.len(env)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let s = a.get_element(env, i)?;
        out.push(req_string(env, &s, what)?);
    }
    Ok(out)
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
        let mut it = req_strings(env, metadata, "a metadata key or value")?.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            pairs.push((k, v));
        }
    }
    Ok(bridge::Extras {
        lock_delay: span(lock_delay_ms),
        lease_time: span(lease_time_ms),
        metadata: pairs,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code<T>(r: NResult<T>) -> Option<ErrorCode> {
        match r {
            Err(NErr::Lock(e)) => Some(e.code()),
            _ => None,
        }
    }

    #[test]
    fn a_handle_reaches_only_its_own_object_and_only_while_it_lives() {
        let h = into_handle(Arc::new(7u32));
        assert_ne!(h, 0);
        // Another type behind the number: refused, and the object stays.
        assert_eq!(
            code(borrow::<String>(h, "guard")),
            Some(ErrorCode::InvalidArgument)
        );
        assert!(free::<String>(h).is_none());
        assert_eq!(*borrow::<u32>(h, "guard").ok().unwrap(), 7);
        // Freed once; after that the number is closed, never reused.
        assert_eq!(free::<u32>(h).map(|v| *v), Some(7));
        assert!(free::<u32>(h).is_none());
        assert_eq!(code(borrow::<u32>(h, "guard")), Some(ErrorCode::Closed));
        assert_eq!(code(borrow::<u32>(0, "guard")), Some(ErrorCode::Closed));
        assert_ne!(into_handle(Arc::new(8u32)), h);
        // A number never handed out.
        assert_eq!(
            code(borrow::<u32>(i64::MAX, "guard")),
            Some(ErrorCode::InvalidArgument)
        );
    }
}
