"""A Python client for scripts/ui_check.py, driven over stdin, one command a line:

  lock NAME      wait for NAME in a thread; prints `held NAME TOKEN MS` (MS: the
                 wall clock, ms since the epoch, when the call returned)
  unlock NAME    release it; prints `released NAME MS`
  quit           close the client and exit

Usage: driver.py ENDPOINTS  (the Python package etcdlock must be importable)
"""

import os
import sys
import threading
import time

import etcdlock

out = threading.Lock()
guards = {}


def say(*words):
    with out:
        print(*words, flush=True)


def now_ms():
    return int(time.time() * 1000)


def take(client, name):
    try:
        g = client.acquire(name)
        guards[name] = g
        say("held", name, g.fencing_token, now_ms())
    except Exception as e:  # reported to the test, which fails on it
        say("error", name, repr(e).replace("\n", " "))


def main():
    client = etcdlock.Client(endpoints=sys.argv[1])
    say("ready")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "lock":
            threading.Thread(target=take, args=(client, words[1]), daemon=True).start()
        elif words[0] == "unlock":
            guards.pop(words[1]).unlock()
            say("released", words[1], now_ms())
        elif words[0] == "quit":
            break
    client.close()
    os._exit(0)  # lock calls still waiting in their threads end with the process


if __name__ == "__main__":
    main()
