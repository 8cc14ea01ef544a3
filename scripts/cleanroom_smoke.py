"""The clean room's Python smoke test, for the x86_64 wheel and the aarch64 one
under qemu-user: lock, guarded put/get under the fencing token, unlock, and the
lock free again. Prints "ok <token>"; the caller checks etcd holds that token.

Usage: python cleanroom_smoke.py ENDPOINTS NAME [MACHINE PATH_PART]
(MACHINE: the platform.machine() it must run on; PATH_PART: a part of the
imported etcdlock's path, proving which copy was tested.)
"""
import platform
import sys

import etcdlock

endpoints, name = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3:
    assert platform.machine() == sys.argv[3], platform.machine()
    assert sys.argv[4] in etcdlock.__file__, etcdlock.__file__
with etcdlock.Client(endpoints=endpoints.split(","), ttl=10) as client:
    guard = client.acquire(name, timeout=10)
    token = guard.fencing_token
    guard.put("cleanroom/" + name, str(token))
    assert guard.get("cleanroom/" + name) == str(token).encode()
    guard.unlock()
    again = client.try_lock(name)
    assert again is not None, "unlock did not release"
    again.unlock()
print("ok", token)
