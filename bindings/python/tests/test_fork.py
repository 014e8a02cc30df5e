"""Forking a process whose threads are busy with the journal, as pre-forking servers do: children
made by ``os.fork`` and by a ``multiprocessing`` pool with the fork start method each handle an
event of their own in the SQLite journal they inherited, while two threads of the parent keep
beginning and finishing events in it. Every child must succeed within a bounded time (a child
that inherited a lock held by one of those threads hangs, or fails with "database is locked")."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
import unittest
import warnings

from support import TOKEN

from slotpartner import Journal, Outcome, Receiver

CHILDREN = 20
POOL_TASKS = 30
# Far beyond what one event takes, and beyond the journal's lock time-out (5 s).
DEADLINE = 30.0

# The journal and receiver of the parent, inherited by pool workers (set by the test).
_inherited: dict[str, object] = {}


def refund(transaction_id: int) -> bytes:
    return (
        f'{{"event":"gameSessionBuyRefund","index":{transaction_id},"gameSessionIdentifier":"gs-1",'
        f'"playerIdentifier":"fork-player","transactionId":{transaction_id},"buyTransactionId":1,'
        f'"gameSessionId":5,"partnerGameRequestIdentifier":"req-1","gameId":12,"isMobile":false}}'
    ).encode()


def handle(receiver: Receiver, transaction_id: int) -> Outcome:
    """Begins the event, finishing it when it is new; the claim's outcome."""
    event = receiver.handle(TOKEN, "127.0.0.1", refund(transaction_id))
    claim = event.begin()
    if claim.outcome is Outcome.NEW:
        event.reply()
        event.finish()
    return claim.outcome


def child_work(transaction_id: int, reopen: bool) -> str:
    """What a child does: an event of its own, new, then its repeat answered from the journal.
    Returns "" or what went wrong."""
    journal = Journal(str(_inherited["url"])) if reopen else _inherited["journal"]
    receiver = Receiver(TOKEN, sources="any", journal=journal)  # type: ignore[arg-type]
    first = handle(receiver, transaction_id)
    if first is not Outcome.NEW:
        return f"event {transaction_id}: {first}, expected NEW"
    again = handle(receiver, transaction_id)
    if again is not Outcome.DONE:
        return f"event {transaction_id} again: {again}, expected DONE"
    return ""


def pool_task(transaction_id: int) -> str:
    try:
        return child_work(transaction_id, reopen=transaction_id % 2 == 1)
    except Exception as error:  # reported to the parent, which fails the test
        return f"event {transaction_id}: {type(error).__name__}: {error}"


class Busy:
    """Two threads beginning and finishing events of their own until stopped, a little apart."""

    def __init__(self, receiver: Receiver, base: int) -> None:
        self.stop = threading.Event()
        self.handled = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.run, args=(receiver, base + t * 1_000_000), daemon=True) for t in range(2)
        ]
        for thread in self.threads:
            thread.start()

    def run(self, receiver: Receiver, first: int) -> None:
        n = first
        while not self.stop.is_set():
            n += 1
            # 0.3 to 1 ms between events (a server's own work): back to back, two threads could
            # keep SQLite's write lock from the children longer than the lock time-out.
            time.sleep(0.0003 + (n * 7919 % 700) / 1e6)
            try:
                outcome = handle(receiver, n)
                with self.lock:
                    if outcome is Outcome.NEW:
                        self.handled += 1
                    else:
                        self.errors.append(f"event {n}: {outcome}")
            except Exception as error:
                with self.lock:
                    self.errors.append(f"event {n}: {type(error).__name__}: {error}")

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(DEADLINE)


class ForkTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="sp-fork-")
        self.url = f"sqlite:{self.dir.name}/journal.db"
        self.journal = Journal(self.url)
        self.receiver = Receiver(TOKEN, sources="any", journal=self.journal)
        # The parent used the journal before it forks, as a PHP-FPM master or a server may.
        self.assertIs(handle(self.receiver, 1), Outcome.NEW)
        _inherited.update(journal=self.journal, url=self.url)
        self.busy = Busy(self.receiver, 10_000_000)
        time.sleep(0.05)  # the threads are well inside the journal

    def tearDown(self) -> None:
        self.busy.finish()
        _inherited.clear()
        self.journal.close()
        self.dir.cleanup()

    def check_parent(self, children: int) -> None:
        self.busy.finish()
        self.assertEqual(self.busy.errors, [], "the parent's threads failed")
        self.assertGreater(self.busy.handled, 0, "the parent's threads were not busy with the journal")
        self.assertEqual(self.journal.status().handled, 1 + self.busy.handled + children)

    def test_os_fork_while_threads_use_the_journal(self) -> None:
        pids: dict[int, int] = {}
        with warnings.catch_warnings():
            # Python 3.12 and later warn about fork() in a process with threads: that is the point.
            warnings.simplefilter("ignore", DeprecationWarning)
            for i in range(CHILDREN):
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        problem = child_work(100 + i, reopen=i % 2 == 1)
                        if problem:
                            print(f"child {i}: {problem}", file=sys.stderr, flush=True)
                        else:
                            code = 0
                    except BaseException as error:
                        print(f"child {i}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
                    finally:
                        os._exit(code)
                pids[pid] = i
                time.sleep(0.002 * (i % 3))
        statuses: dict[int, str] = {}
        deadline = time.monotonic() + DEADLINE
        while len(statuses) < len(pids) and time.monotonic() < deadline:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.01)
            elif pid in pids:
                code = os.waitstatus_to_exitcode(status)
                statuses[pid] = "ok" if code == 0 else f"exit status {code}"
        for pid in pids:
            if pid not in statuses:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                statuses[pid] = f"hung: killed after {DEADLINE:.0f} s"
        failures = {pids[pid]: why for pid, why in statuses.items() if why != "ok"}
        self.assertEqual(failures, {}, f"{CHILDREN - len(failures)}/{CHILDREN} children handled their event")
        self.check_parent(CHILDREN)

    def test_multiprocessing_fork_pool_while_threads_use_the_journal(self) -> None:
        # maxtasksperchild=1: a fresh worker for every task, forked by the pool's own thread while
        # the busy threads run, so that every task runs in a process forked at a random moment.
        context = multiprocessing.get_context("fork")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pool = context.Pool(3, maxtasksperchild=1)
            try:
                results = pool.map_async(pool_task, range(200, 200 + POOL_TASKS), chunksize=1).get(DEADLINE)
            except multiprocessing.TimeoutError:
                self.fail(f"the pool's workers did not handle {POOL_TASKS} events within {DEADLINE:.0f} s")
            finally:
                pool.terminate()
                pool.join()
        self.assertEqual([r for r in results if r], [], f"{results.count('')}/{POOL_TASKS} tasks succeeded")
        self.check_parent(POOL_TASKS)

    def test_a_child_leaving_does_not_release_its_parents_claim(self) -> None:
        # A worker claims an event, forks a helper that frees its copy of the event and leaves:
        # the claim stays the parent's, which finishes it; the child could not have.
        event = self.receiver.handle(TOKEN, "127.0.0.1", refund(9_000_001))
        self.assertIs(event.begin().outcome, Outcome.NEW)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            code = 1
            try:
                try:
                    event.finish()
                except Exception:  # not the child's claim: refused
                    code = 0
                del event  # freed in the child: must not release the parent's claim
                gc.collect()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child finished its parent's claim")
        event.reply()
        event.finish()  # still the parent's claim
        again = self.receiver.handle(TOKEN, "127.0.0.1", refund(9_000_001)).begin()
        self.assertIs(again.outcome, Outcome.DONE)

    def test_a_call_in_progress_at_the_fork_does_not_hang_the_child(self) -> None:
        # A thread of the parent is inside a call on the journal handle at the fork (held open
        # here on purpose): the child must still use and close the handle it inherited.
        self.journal._enter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    signal.alarm(int(DEADLINE))
                    self.journal.status()
                    self.journal.close()
                    code = 0
                finally:
                    os._exit(code)
        finally:
            self.journal._leave()
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child hung or failed on the inherited handle")


if __name__ == "__main__":
    unittest.main()
