// The package as an ES module: the same objects as `require('etcdlock')`
// (index.js), so a program that mixes `import` and `require` sees one Client
// class and one native library.
import cjs from './index.js';

export const { Client, Lock, Leadership, LeaderLoop, Term, MultiLock, ReentrantLock, Latch, Barrier, OnceHold, MemStore, LockError, ErrorCode, LossReason, MAX_PERMITS, MAX_MULTI } = cjs;
export default cjs;
