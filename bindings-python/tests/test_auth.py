"""RBAC on an etcd of its own (auth enabled with etcdctl): a user granted only the
prefix ``/app/locks/`` locks inside it, gets PermissionDeniedError outside it, and a
wrong password is AuthFailedError."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Iterator, List

import pytest

import etcdlock

from conftest import etcdctl, harness_path


@pytest.fixture(scope="module")
def auth_endpoints() -> Iterator[List[str]]:
    # Its own etcd: enabling auth must not leak into the session etcd.
    path = harness_path()
    if not os.path.exists(path):
        pytest.fail(f"etcd harness not found at {path}; run `cargo build -p etcdlock-testkit`")
    proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = proc.stdout.readline()
        if not line:
            pytest.fail("etcd harness printed nothing")
        eps = list(json.loads(line)["endpoints"])
        etcdctl(eps, "user", "add", "root:rootpw")
        etcdctl(eps, "user", "grant-role", "root", "root")
        etcdctl(eps, "role", "add", "r")
        etcdctl(eps, "role", "grant-permission", "r", "--prefix=true", "readwrite", "/app/locks/")
        etcdctl(eps, "user", "add", "u:upw")
        etcdctl(eps, "user", "grant-role", "u", "r")
        etcdctl(eps, "auth", "enable")
        yield eps
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_rbac_permission_denied_and_auth_failed(auth_endpoints: List[str]) -> None:
    with etcdlock.Client(endpoints=auth_endpoints, ttl=5, username="u", password="upw") as c:
        with c.acquire("/app/locks/job", timeout=5) as g:
            assert g.is_held
        with pytest.raises(etcdlock.PermissionDeniedError) as ei:
            c.acquire("/other/job", timeout=5)
        assert ei.value.code == "PermissionDenied"
    with pytest.raises(etcdlock.AuthFailedError) as ei2:
        etcdlock.Client(endpoints=auth_endpoints, ttl=5, username="u", password="wrong").close()
    assert ei2.value.code == "AuthFailed"
