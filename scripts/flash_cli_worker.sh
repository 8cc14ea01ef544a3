#!/usr/bin/env bash
# The CLI worker of the flash sale: each purchase is `etcdlock run` around a
# shell snippet that reads the stock with etcdctl and writes it back in an
# etcdctl txn guarded by the fencing token (compare our lock key's
# create_revision), so even a shell script cannot write as a stale holder.
# Contract: see cli/src/flash.rs (FLASH_* variables, one JSON line per attempt).
# With FLASH_STORE=postgres the stock is a row in PostgreSQL (psql, PG*
# variables): read it, then one SQL statement that moves the fence to the
# token, writes the stock and the sale only if the fence moved (pg_purchase).
set -uo pipefail
ETCDLOCK=${ETCDLOCK_BIN:-etcdlock}
export ETCDCTL_API=3
ctl() { etcdctl --endpoints="$FLASH_ENDPOINTS" "$@"; }
export -f ctl

# One purchase on PostgreSQL under `etcdlock run`: prints the stock before it.
# The write is one statement: the fence's row moves to our token unless a newer
# one is there (then no row comes out of `fence`, and nothing is written).
pg_purchase() {
  local before after
  before=$(psql -X -A -t -v ON_ERROR_STOP=1 -v sku="$FLASH_STOCK_KEY" <<<"SELECT stock FROM flash_stock WHERE sku = :'sku'")
  before=${before:-0}
  if [ "$before" -gt 0 ]; then
    after=$(psql -X -A -t -q -v ON_ERROR_STOP=1 -v lock="$FLASH_LOCK" -v token="$ETCDLOCK_FENCING_TOKEN" \
      -v sku="$FLASH_STOCK_KEY" -v stock="$((before - 1))" -v worker="$FLASH_WORKER_ID" <<'SQL'
WITH fence AS (
  INSERT INTO etcdlock_fence AS f (resource, token) VALUES (:'lock', :token)
  ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
  RETURNING token),
stock AS (UPDATE flash_stock SET stock = :stock FROM fence WHERE sku = :'sku' RETURNING fence.token)
INSERT INTO flash_sales (token, lang, worker) SELECT token, 'cli', :'worker' FROM stock RETURNING token
SQL
)
    [ "$after" = "$ETCDLOCK_FENCING_TOKEN" ] || { echo "cli worker: token $ETCDLOCK_FENCING_TOKEN refused" >&2; exit 1; }
  fi
  echo "$before"
}
export -f pg_purchase

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
    if [ "${FLASH_STORE:-etcd}" = postgres ]; then
      before=$(pg_purchase) || exit 1
      sold=$([ "$before" -gt 0 ] && echo true || echo false)
    else
      before=$(ctl get "$FLASH_STOCK_KEY" --print-value-only); before=${before:-0}
      sold=false
      if [ "$before" -gt 0 ]; then
        res=$(printf "create(\"%s\") = \"%s\"\n\nput %s %s\nput %s%020d cli\n\n\n" \
                "$ETCDLOCK_KEY" "$ETCDLOCK_FENCING_TOKEN" "$FLASH_STOCK_KEY" "$((before - 1))" \
                "$FLASH_SALES_PREFIX" "$ETCDLOCK_FENCING_TOKEN" | ctl txn | head -1)
        [ "$res" = SUCCESS ] && sold=true
      fi
    fi
    echo "{\"lang\":\"cli\",\"worker\":\"$FLASH_WORKER_ID\",\"sold\":$sold,\"token\":$ETCDLOCK_FENCING_TOKEN,\"wait_ms\":$(( (got - FLASH_START) / 1000000 )),\"stock_before\":$before,\"t_ms\":$(( $(date +%s%N) / 1000000 ))}"
  ')
  echo "$out"

done
