#!/bin/sh
# rustdoc with RUSTC_BOOTSTRAP=1, for scripts/api_check.sh (through cargo's
# $RUSTDOC): its JSON output (-Z unstable-options --output-format json) on a
# stable toolchain, without setting RUSTC_BOOTSTRAP for cargo's rustc builds.
RUSTC_BOOTSTRAP=1 exec rustdoc "$@"
