"""mypy --strict: a return inside `with guard:` is a return (Guard.__exit__
returns None, so the block cannot swallow an exception and fall through)."""

import etcdlock


def token(client: etcdlock.Client, name: str) -> int:
    with client.acquire(name) as g:
        return g.fencing_token


def token_or_none(client: etcdlock.Client, name: str) -> int:
    g = client.try_lock(name)
    if g is None:
        return 0
    with g:
        return g.fencing_token
