//! A barrier's side: arrive, wait until all parties have, leave.

use super::*;

impl Barrier {
    /// The barrier's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many parties it waits for.
    pub fn parties(&self) -> u32 {
        self.parties
    }

    /// Arrive and wait for the others: returns this party's arrival index
    /// (0 for the first, `parties - 1` for the one that released everyone)
    /// when all `parties` have arrived, in every party at once. `Timeout`
    /// after `timeout` (this party leaves: its place is free again);
    /// `InvalidArgument` if the barrier already released, or already has its
    /// parties waiting.
    pub async fn wait(&self, timeout: Option<Duration>) -> Result<u32> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorCode::Closed,
                format!("barrier {} was closed", show(&self.name)),
            ));
        }
        let c = &self.client;
        c.check_open()?;
        let deadline = deadline_of(timeout);
        let gate = [&self.base[..], b"gate"].concat();
        let done = [&self.base[..], b"done"].concat();
        let prefix = [&self.base[..], b"p/"].concat();
        let session = c.session_by(c.request_bound()).await?;
        let key = session.reserve_key(&prefix);
        // Our arrival key goes when this call ends however it ends (returned,
        // timed out, or its future dropped: a cancelled party never counts).
        let _arrival = Arrival {
            client: c.clone(),
            session: session.clone(),
            key: key.clone(),
        };
        let t = self.arrive_txn(&gate, &done, &prefix, &key, session.lease);
        let r = super::txn_now(c, t).await?;
        if !r.succeeded() {
            return Err(if kvs(r.op_responses().first()).is_empty() {
                gone("barrier", &self.name)
            } else {
                finished(&self.name)
            });
        }
        let rev = revision(&r);
        let ops = r.op_responses();
        let here: Vec<&[u8]> = kvs(ops.get(1))
            .iter()
            .filter(|kv| is_direct_child(&prefix, kv.key()))
            .map(|kv| kv.key())
            .collect();
        let index = here
            .iter()
            .position(|k| *k == key.as_slice())
            .unwrap_or(here.len()) as u32;
        if index >= self.parties {
            return Err(Error::invalid(format!(
                "barrier {} already has its {} parties waiting",
                show(&self.name),
                self.parties
            )));
        }
        if index + 1 == self.parties {
            self.release(&gate, &done).await?;
            return Ok(index);
        }
        self.await_release(&gate, rev, deadline, timeout).await?;
        Ok(index)
    }

    /// The arrival Txn: while the gate stands, put our key and read the
    /// arrivals in order; else read whether the barrier released.
    fn arrive_txn(&self, gate: &[u8], done: &[u8], prefix: &[u8], key: &[u8], lease: i64) -> Txn {
        Txn::new()
            .when([Compare::create_revision(
                gate.to_vec(),
                CompareOp::Greater,
                0,
            )])
            .and_then([
                TxnOp::put(
                    key.to_vec(),
                    format!("{{\"parties\":{}}}", self.parties),
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(
                    prefix.to_vec(),
                    Some(
                        GetOptions::new()
                            .with_prefix()
                            .with_keys_only()
                            .with_sort(SortTarget::Create, SortOrder::Ascend),
                    ),
                ),
            ])
            .or_else([TxnOp::get(
                done.to_vec(),
                Some(GetOptions::new().with_keys_only()),
            )])
    }

    /// The last party: open the gate for everyone, in one Txn.
    async fn release(&self, gate: &[u8], done: &[u8]) -> Result<()> {
        let t = Txn::new()
            .when([Compare::create_revision(
                gate.to_vec(),
                CompareOp::Greater,
                0,
            )])
            .and_then([
                TxnOp::delete(gate.to_vec(), None),
                TxnOp::put(
                    done.to_vec(),
                    "",
                    Some(PutOptions::new().with_lease(self.lease)),
                ),
            ]);
        super::txn_now(&self.client, t).await?;
        Ok(())
    }

    /// Wait until the gate (read at `rev`) is gone: released by the last
    /// party, or `Timeout` at `deadline`.
    async fn await_release(
        &self,
        gate: &[u8],
        rev: i64,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let c = &self.client;
        let mut released = Released {
            client: c,
            gate: gate.to_vec(),
            first: Some(rev),
            live: Vec::new(),
        };
        let ends = super::sync_ends(c, deadline);
        match wait_out(c, ends, Own::Nothing, true, &mut released).await {
            Ok(_) => Ok(()),
            Err(Stop::End(Interrupt::Deadline)) => Err(Error::new(
                ErrorCode::Timeout,
                format!(
                    "barrier {}: not all {} parties arrived within the timeout ({:?})",
                    show(&self.name),
                    self.parties,
                    timeout.unwrap_or_default()
                ),
            )),
            Err(stop) => Err(super::sync_stop(stop)),
        }
    }

    /// Stop renewing the barrier's lease from this handle (idempotent; drop
    /// does it too).
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.session.unshare(self.lease);
        }
    }
}

/// A barrier's [`Driver`]: the gate stands (read, or known at the
/// arrival's revision `first`) until the last party deletes it; wait for
/// that delete. A delete (or a gap) is the release only once a read finds
/// the gate gone.
struct Released<'a> {
    client: &'a Client,
    gate: Vec<u8>,
    first: Option<i64>,
    live: Vec<i64>,
}

impl Driver for Released<'_> {
    async fn turn(&mut self, _watches: &mut Vec<i64>) -> Result<Turn> {
        if let Some(rev) = self.first.take() {
            return Ok(Turn::behind(rev, self.gate.clone(), false));
        }
        let read = TxnOp::get(self.gate.clone(), Some(GetOptions::new().with_keys_only()));
        let r = super::txn_now(self.client, Txn::new().and_then([read])).await?;
        Ok(match kvs(r.op_responses().first()).is_empty() {
            true => Turn::go(revision(&r)),
            false => Turn::behind(revision(&r), self.gate.clone(), false),
        })
    }

    async fn wake(&mut self, client: &Client, watches: &mut Vec<i64>, turn: &Turn) {
        key_deleted(client, watches, &mut self.live, turn).await
    }
}

/// A party's arrival key, deleted when its wait ends (see [`Barrier::wait`]).
pub(super) struct Arrival {
    pub(super) client: Client,
    pub(super) session: Arc<Session>,
    pub(super) key: Vec<u8>,
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let (c, s, key) = (
            self.client.clone(),
            self.session.clone(),
            std::mem::take(&mut self.key),
        );
        if c.is_closed() {
            // Closing revoked the session's lease, and the key with it.
            s.release_key(&key);
            return;
        }
        c.inner.handle.clone().spawn(async move {
            let _ =
                super::txn_now(&c, Txn::new().and_then([TxnOp::delete(key.clone(), None)])).await;
            s.release_key(&key);
        });
    }
}

impl Drop for Barrier {
    fn drop(&mut self) {
        self.close();
    }
}
