//! Promises settled from core's shared runtime, and the cancel handle an
//! `AbortSignal` drives.

use etcdlock::poison::Locked;
use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::sync::{Arc, Mutex};

use etcdlock::bridge;
use etcdlock::CancellationToken;
use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use crate::errors::*;

/// Create a Promise and settle it from `fut`, started on this (the JS)
/// thread, so its first request leaves from here, and finished on the shared
/// core runtime, which hands the outcome to this thread's [`Settler`] (a
/// panic rejects it with an `Internal` error).
pub(crate) fn promise<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = napi::Result<T>> + Send + 'static,
{
    let raw = env.raw();
    let settler = Settler::of(raw)?;
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    status(
        unsafe { sys::napi_create_promise(raw, &mut deferred, &mut promise) },
        "create a Promise",
    )?;
    let mut pending = Pending::new(raw, settler, deferred);
    js(etcdlock::runtime::start(async move {
        pending.armed = true;
        let r = AssertUnwindSafe(fut).catch_unwind().await;
        etcdlock::runtime::on_runtime().await;
        pending.settle(match r {
            Ok(r) => r,
            Err(p) => Err(to_js_err(&bridge::panic_error(p))),
        });
    }))?;
    Ok(Object::from_raw(raw, promise))
}

fn status(s: sys::napi_status, what: &str) -> napi::Result<()> {
    if s == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(internal(format!("could not {what} (napi status {s})")))
    }
}

// One threadsafe function per JavaScript environment settles every Promise
// this addon makes there (napi-rs's `create_deferred` makes one per Promise:
// a libuv async handle, an async resource, an env cleanup hook, created and
// torn down for each call). It is referenced while any of them is pending,
// so a pending `lock()` keeps the process alive and an idle client does not;
// the count and the references live on the environment's own thread.

/// The threadsafe function, shared with the runtime threads that settle
/// through it; `None` once the environment tore down (a settle then drops).
struct Settler {
    tsfn: Mutex<Option<Tsfn>>,
}

#[derive(Clone, Copy)]
struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function may be called from any thread; the `Settler`'s
// mutex keeps every call before the environment's teardown releases it.
unsafe impl Send for Tsfn {}

struct Local {
    env: sys::napi_env,
    settler: Arc<Settler>,
    pending: usize,
}

thread_local! {
    /// This JS thread's environment's settler (the main thread and each
    /// worker thread have their own environment).
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

impl Settler {
    /// This thread's settler for `env`, made on first use.
    fn of(env: sys::napi_env) -> napi::Result<Arc<Settler>> {
        if let Some(s) = LOCAL.with_borrow(|l| {
            l.as_ref()
                .filter(|l| l.env == env)
                .map(|l| l.settler.clone())
        }) {
            return Ok(s);
        }
        let mut name = ptr::null_mut();
        status(
            unsafe {
                sys::napi_create_string_utf8(env, c"etcdlock settle".as_ptr(), 15, &mut name)
            },
            "name the settler",
        )?;
        let mut tsfn = ptr::null_mut();
        status(
            unsafe {
                sys::napi_create_threadsafe_function(
                    env,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name,
                    0,
                    1,
                    ptr::null_mut(),
                    None,
                    ptr::null_mut(),
                    Some(settle_on_js_thread),
                    &mut tsfn,
                )
            },
            "create the settler",
        )?;
        // Referenced only while a Promise is pending ([`Pending::new`]).
        status(
            unsafe { sys::napi_unref_threadsafe_function(env, tsfn) },
            "unreference the settler",
        )?;
        let settler = Arc::new(Settler {
            tsfn: Mutex::new(Some(Tsfn(tsfn))),
        });
        let hook = Arc::into_raw(settler.clone()) as *mut c_void;
        status(
            unsafe { sys::napi_add_env_cleanup_hook(env, Some(env_teardown), hook) },
            "watch the environment's teardown",
        )?;
        LOCAL.with_borrow_mut(|l| {
            *l = Some(Local {
                env,
                settler: settler.clone(),
                pending: 0,
            })
        });
        Ok(settler)
    }

    fn send(&self, s: Box<Settle>) {
        let tsfn = self.tsfn.locked();
        let Some(t) = *tsfn else { return };
        let data = Box::into_raw(s);
        let st = unsafe {
            sys::napi_call_threadsafe_function(
                t.0,
                data.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if st != sys::Status::napi_ok {
            // Closing (the environment is going): nobody is left to settle for.
            drop(unsafe { Box::from_raw(data) });
        }
    }
}

/// The environment is going: release the threadsafe function (queued settles
/// are dropped) and forget this thread's settler.
unsafe extern "C" fn env_teardown(arg: *mut c_void) {
    let settler = unsafe { Arc::from_raw(arg as *const Settler) };
    if let Some(t) = settler.tsfn.locked().take() {
        unsafe {
            sys::napi_release_threadsafe_function(t.0, sys::ThreadsafeFunctionReleaseMode::abort)
        };
    }
    let _ = LOCAL.try_with(|l| {
        let mut l = l.borrow_mut();
        if l.as_ref()
            .is_some_and(|l| Arc::ptr_eq(&l.settler, &settler))
        {
            *l = None;
        }
    });
}

/// One pending Promise's count on its thread: the first references the
/// settler (the process stays alive), the last unreferences it.
fn count(env: sys::napi_env, up: bool) {
    LOCAL.with_borrow_mut(|l| {
        let Some(l) = l.as_mut().filter(|l| l.env == env) else {
            return;
        };
        let was = l.pending;
        l.pending = if up { was + 1 } else { was.saturating_sub(1) };
        let Some(t) = *l.settler.tsfn.locked() else {
            return;
        };
        match (was, l.pending) {
            (0, 1) => unsafe {
                sys::napi_ref_threadsafe_function(env, t.0);
            },
            (1, 0) => unsafe {
                sys::napi_unref_threadsafe_function(env, t.0);
            },
            _ => {}
        }
    });
}

/// A settled outcome on its way to the JS thread.
struct Settle {
    deferred: sys::napi_deferred,
    outcome: Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send>,
}

// SAFETY: the deferred is only used on its environment's thread (in
// `settle_on_js_thread`), the only one napi calls that on.
unsafe impl Send for Settle {}

unsafe extern "C" fn settle_on_js_thread(
    env: sys::napi_env,
    _cb: sys::napi_value,
    _ctx: *mut c_void,
    data: *mut c_void,
) {
    let s = unsafe { Box::from_raw(data.cast::<Settle>()) };
    if env.is_null() {
        return; // the environment is tearing down
    }
    let Settle { deferred, outcome } = *s;
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| outcome(env)))
        .unwrap_or_else(|p| Err(to_js_err(&bridge::panic_error(p))));
    match r {
        Ok(v) => unsafe {
            sys::napi_resolve_deferred(env, deferred, v);
        },
        Err(e) => {
            let mut v = unsafe { ToNapiValue::to_napi_value(env, e) };
            if v.is_err() {
                v = unsafe {
                    ToNapiValue::to_napi_value(env, internal("could not build the error"))
                };
            }
            if let Ok(v) = v {
                unsafe { sys::napi_reject_deferred(env, deferred, v) };
            }
        }
    }
    count(env, false);
}

/// A Promise the runtime will settle. Dropped unsettled after it started
/// (its future dropped: the runtime shutting down), it rejects; dropped
/// before (the future never ran: `runtime::start` failed, on the JS thread),
/// it only uncounts.
struct Pending {
    env: sys::napi_env,
    settler: Arc<Settler>,
    deferred: sys::napi_deferred,
    armed: bool,
    settled: bool,
}

// SAFETY: `env` and `deferred` are only dereferenced on the JS thread (in
// `settle_on_js_thread`, or `count` where `env` is compared, never used,
// off that thread's own environment).
unsafe impl Send for Pending {}

impl Pending {
    fn new(env: sys::napi_env, settler: Arc<Settler>, deferred: sys::napi_deferred) -> Pending {
        count(env, true);
        Pending {
            env,
            settler,
            deferred,
            armed: false,
            settled: false,
        }
    }

    fn settle<T: ToNapiValue + Send + 'static>(&mut self, r: napi::Result<T>) {
        self.settled = true;
        let outcome: Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send> =
            match r {
                Ok(v) => Box::new(move |env| unsafe { T::to_napi_value(env, v) }),
                Err(e) => Box::new(move |_| Err(e)),
            };
        self.settler.send(Box::new(Settle {
            deferred: self.deferred,
            outcome,
        }));
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        if self.armed {
            self.settle::<()>(Err(internal(
                "the call was dropped before it finished (the runtime is shutting down)",
            )));
        } else {
            count(self.env, false);
        }
    }
}

/// A cancellation handle an `AbortSignal` drives (core `CancellationToken`).
#[napi]
pub struct NativeCancel {
    pub(crate) token: CancellationToken,
}

#[napi]
impl NativeCancel {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeCancel {
            token: CancellationToken::new(),
        }
    }

    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }
}

impl Default for NativeCancel {
    fn default() -> Self {
        Self::new()
    }
}
