//! A Txn checked as etcd checks it before applying it: its size, and no key written twice in one branch.

use super::*;

/// etcd's Txn checks: op counts, and no key written twice in one branch.
pub(super) fn check_txn(t: &pb::TxnRequest) -> Result<(), Status> {
    pub(super) fn ops(t: &pb::TxnRequest) -> Result<(), Status> {
        if t.compare.len() > MAX_TXN_OPS
            || t.success.len() > MAX_TXN_OPS
            || t.failure.len() > MAX_TXN_OPS
        {
            return Err(err(
                tonic::Code::InvalidArgument,
                "too many operations in txn request",
            ));
        }
        for op in t.success.iter().chain(&t.failure) {
            if let Some(pb::request_op::Request::RequestTxn(n)) = &op.request {
                ops(n)?;
            }
        }
        Ok(())
    }
    /// The keys a branch puts (nested Txns: both their branches) and its deletes.
    pub(super) fn branch(ops: &[pb::RequestOp]) -> Result<BranchWrites, Status> {
        let dup = || {
            err(
                tonic::Code::InvalidArgument,
                "duplicate key given in txn request",
            )
        };
        let mut puts = HashSet::new();
        let mut dels = Vec::new();
        for op in ops {
            match &op.request {
                Some(pb::request_op::Request::RequestPut(p)) if !puts.insert(p.key.clone()) => {
                    return Err(dup());
                }
                Some(pb::request_op::Request::RequestDeleteRange(d)) => {
                    dels.push((d.key.clone(), d.range_end.clone()))
                }
                Some(pb::request_op::Request::RequestTxn(n)) => {
                    let (sp, sd) = branch(&n.success)?;
                    let (fp, fd) = branch(&n.failure)?;
                    for k in sp.union(&fp) {
                        if !puts.insert(k.clone()) {
                            return Err(dup());
                        }
                    }
                    dels.extend(sd);
                    dels.extend(fd);
                }
                _ => {}
            }
        }
        if puts
            .iter()
            .any(|k| dels.iter().any(|(s, e)| in_range(k, s, e)))
        {
            return Err(dup());
        }
        Ok((puts, dels))
    }
    ops(t)?;
    branch(&t.success)?;
    branch(&t.failure)?;
    Ok(())
}
