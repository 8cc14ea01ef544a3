"""One APScheduler job on many nodes, run by one node per tick.

Run this on every node (here: as many processes as you like). Each scheduler
fires the job every 2 seconds on its own clock; ``client.once`` lets exactly
one of them run each tick: the first to take the job's run-once record keeps
it for ``at_least`` seconds after it started, longer than the schedulers'
jitter and the nodes' clock skew, shorter than the interval.

    ETCDLOCK_ENDPOINTS=127.0.0.1:2379 python apscheduler_once.py [SECONDS] [LOGFILE]

Every run appends "<tick> <pid>" to LOGFILE (default: stdout only).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Optional

from apscheduler.schedulers.blocking import BlockingScheduler  # type: ignore[import-untyped]

import etcdlock


def main(seconds: float, log: Optional[str]) -> None:
    client = etcdlock.Client()

    @client.once("reports/hourly-rollup", at_most=60, at_least=1.5)
    def rollup() -> None:
        tick = int(time.time()) // 2 * 2  # the tick this run belongs to (cron second */2)
        line = f"{tick} {os.getpid()}\n"
        print("ran", line, end="", flush=True)
        if log:
            with open(log, "a") as f:  # one short append per run
                f.write(line)

    scheduler = BlockingScheduler()
    # misfire_grace_time: a run more than 1 s late is skipped, never run late
    # (a late run after at_least would be a second run of the same tick).
    scheduler.add_job(rollup, "cron", second="*/2", misfire_grace_time=1, max_instances=1, coalesce=True)
    stop = None
    if seconds > 0:  # for the test: stop after SECONDS (0: run until killed)
        # From a timer thread, not as a job: a job that shuts the scheduler
        # down races the scheduler's own removal of that one-shot job
        # (APScheduler 3 then raises JobLookupError out of start()).
        stop = threading.Timer(seconds, scheduler.shutdown, kwargs={"wait": False})
        stop.daemon = True
        stop.start()
    try:
        scheduler.start()
    finally:
        if stop is not None:
            stop.cancel()
        client.close()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0, sys.argv[2] if len(sys.argv) > 2 else None)
