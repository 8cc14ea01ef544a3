#!/usr/bin/env bash
# The CLI worker of the flash sale: each purchase is `etcdlock run` around a
# shell snippet that reads the stock with etcdctl and writes it back in an
# etcdctl txn guarded by the fencing token (compare our lock key's
# create_revision), so even a shell script cannot write as a stale holder.
# Contract: see cli/src/flash.rs (FLASH_* variables, one JSON line per attempt).
set -uo pipefail
ETCDLOCK=${ETCDLOCK_BIN:-etcdlock}
export ETCDCTL_API=3
ctl() { etcdctl --endpoints="$FLASH_ENDPOINTS" "$@"; }
export -f ctl

for ((n = 0; n < FLASH_ATTEMPTS; n++)); do
  start=$(date +%s%N)
  if [ "${FLASH_NO_LOCK:-0}" = 1 ]; then
    before=$(ctl get "$FLASH_STOCK_KEY" --print-value-only)
    before=${before:-0}
    if [ "$before" -gt 0 ]; then
      ctl put "$FLASH_STOCK_KEY" "$((before - 1))" >/dev/null
      ctl put "${FLASH_SALES_PREFIX}nolock-cli-$FLASH_WORKER_ID-$n" cli >/dev/null
    fi
    echo "{\"lang\":\"cli\",\"worker\":\"$FLASH_WORKER_ID\",\"sold\":$([ "$before" -gt 0 ] && echo true || echo false),\"token\":0,\"wait_ms\":0,\"stock_before\":$before,\"t_ms\":$(($(date +%s%N) / 1000000))}"

    continue
  fi
  out=$(FLASH_START=$start "$ETCDLOCK" --endpoints "$FLASH_ENDPOINTS" run "$FLASH_LOCK" -- bash -c '
    got=$(date +%s%N)
    before=$(ctl get "$FLASH_STOCK_KEY" --print-value-only); before=${before:-0}
    sold=false
    if [ "$before" -gt 0 ]; then
      res=$(printf "create(\"%s\") = \"%s\"\n\nput %s %s\nput %s%020d cli\n\n\n" \
              "$ETCDLOCK_KEY" "$ETCDLOCK_FENCING_TOKEN" "$FLASH_STOCK_KEY" "$((before - 1))" \
              "$FLASH_SALES_PREFIX" "$ETCDLOCK_FENCING_TOKEN" | ctl txn | head -1)
      [ "$res" = SUCCESS ] && sold=true
    fi
    echo "{\"lang\":\"cli\",\"worker\":\"$FLASH_WORKER_ID\",\"sold\":$sold,\"token\":$ETCDLOCK_FENCING_TOKEN,\"wait_ms\":$(( (got - FLASH_START) / 1000000 )),\"stock_before\":$before,\"t_ms\":$(( $(date +%s%N) / 1000000 ))}"
  ')
  echo "$out"

done
