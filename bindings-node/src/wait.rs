//! Promises settled from core's shared runtime, and the cancel handle an
//! `AbortSignal` drives.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use etcdlock::bridge;
use etcdlock::CancellationToken;
use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::errors::*;

pub(crate) type Resolver<T> = Box<dyn FnOnce(Env) -> napi::Result<T> + Send>;

/// Create a Promise and settle it from `fut`, started on this (the JS)
/// thread, so its first request leaves from here, and finished on the shared
/// core runtime, which settles the Promise (a panic rejects it with an
/// `Internal` error).
pub(crate) fn promise<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = napi::Result<T>> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<T, Resolver<T>>()?;
    js(etcdlock::runtime::start(async move {
        let r = AssertUnwindSafe(fut).catch_unwind().await;
        etcdlock::runtime::on_runtime().await;
        match r {
            Ok(Ok(v)) => deferred.resolve(Box::new(move |_| Ok(v))),
            Ok(Err(e)) => deferred.reject(e),
            Err(p) => deferred.reject(to_js_err(&bridge::panic_error(p))),
        }
    }))?;
    Ok(promise)
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
        NativeCancel { token: CancellationToken::new() }
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

