"""Threads: how many, how sequences are dealt to them, and BLAS inside them.

The kernels release the GIL, so shards of sequences run on plain threads.
Their BLAS calls are small matrix products that lose to BLAS's own threads
(start-up and spinning cost more than the products, and compete with the
shard threads), so BLAS runs single-threaded while skcrf works. The limit is
process-wide (it is how BLAS libraries work), so it is counted: overlapping
fits in several threads share one limit, and the original thread counts come
back when the last of them ends.
"""

import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager

import numpy as np

from ._blas import cython_blas

# threadpoolctl (a scikit-learn dependency) is imported when BLAS is limited
# first: tagging with Viterbi never calls BLAS, and the import costs 5 ms

_blas_lock = threading.Lock()
_blas_users = 0
_blas_limiter = None
_controller = None
_controller_modules = -1


def _release_openblas_control():
    # threadpoolctl >= 3.6 lets only one "controlling" thread change a
    # pthreads OpenBLAS and silently ignores the others; the limit may be set
    # by one thread and restored by another, so control is released around
    # both (under _blas_lock, so no other change is in flight).
    import threadpoolctl

    controller = getattr(threadpoolctl, "OpenBLASController", None)
    clear = getattr(controller, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


def _blas_controller():
    """The threadpoolctl controller of the loaded libraries (call under ``_blas_lock``).

    Making one scans every loaded shared library (4-5 ms with numpy's and
    scipy's OpenBLAS, about a tenth of a whole predict of the Treebank test
    split), so it is kept, and made again only when modules were imported
    since (a new BLAS comes with the module that loads it). Setting and
    restoring a limit through it takes microseconds.
    """
    global _controller, _controller_modules
    import threadpoolctl

    if _controller is None or len(sys.modules) != _controller_modules:
        _controller = threadpoolctl.ThreadpoolController()
        _controller_modules = len(sys.modules)
    return _controller


@contextmanager
def single_blas_thread():
    """BLAS limited to one thread inside the block; nests and overlaps safely."""
    global _blas_users, _blas_limiter
    with _blas_lock:
        if _blas_users == 0:
            # the BLAS the kernels call is loaded first (they load it on first
            # use), or its threads would escape the limit set here
            cython_blas()
            _release_openblas_control()
            _blas_limiter = _blas_controller().limit(limits=1, user_api="blas")
            _release_openblas_control()
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _release_openblas_control()
                _blas_limiter.restore_original_limits()
                _release_openblas_control()
                _blas_limiter = None


def _cgroup_cpu_limit(root="/sys/fs/cgroup"):
    """The CPUs a cgroup CPU quota allows (rounded up), or None without a quota.

    cgroup v2 (``cpu.max``: ``"quota period"`` or ``"max period"``), else v1
    (``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us``, -1 for none).
    """
    try:
        with open(os.path.join(root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        try:
            with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
                quota = f.read().strip()
            with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
                period = f.read().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, -(-quota_us // period_us))


@functools.cache
def _cpu_quota():
    return _cgroup_cpu_limit()


def usable_cores():
    """The cores a call may use: the calling thread's CPU affinity, within a cgroup CPU quota.

    The thread's (what ``os.sched_getaffinity(0)`` reports on Linux), not
    the process's: a caller pinned to one core gets one thread, and the
    threads it starts inherit its affinity anyway.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        cores = os.cpu_count() or 1
    quota = _cpu_quota()
    return max(1, cores if quota is None else min(cores, quota))


def effective_n_threads(n_jobs):
    """Threads to use for ``n_jobs``, never more than :func:`usable_cores`.

    None means 1; a positive count is capped at the usable cores (more
    threads than cores only wait for each other); -1 means all usable
    cores, -2 all but one, and so on (at least 1).
    """
    if n_jobs is None:
        return 1
    cores = usable_cores()
    if n_jobs < 0:
        return max(1, cores + 1 + int(n_jobs))
    return max(1, min(int(n_jobs), cores))


def split_sequences(lengths, n_shards):
    """Deal sequences into ``n_shards`` shards of similar token counts.

    Sequences are sorted by length and dealt round-robin, so every shard gets
    a similar number of tokens (within one longest sequence) and a similar
    length profile. Each shard lists its sequences in increasing index order.

    There are never more shards than sequences with a token: each shard is a
    thread, and a thread without work (``n_jobs=500`` on 3 sequences) costs
    its start and its buffers for nothing. Empty sequences are dealt too.

    Examples
    --------
    >>> [s.tolist() for s in split_sequences([5, 1, 4, 2], 2)]
    [[0, 3], [1, 2]]
    >>> [s.tolist() for s in split_sequences([3, 0, 2, 0], 500)]
    [[0, 1], [2, 3]]
    """
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    n_shards = max(1, min(int(n_shards), int(np.count_nonzero(lengths))))
    return [np.sort(order[k::n_shards]) for k in range(n_shards)]


# The threads that serve predictions: kept for the process (a pool made per
# call costs about 2 ms, a tenth of a predict of the Treebank test split).
_pool_lock = threading.Lock()
_pool = None
_POOL_PREFIX = "skcrf-worker"


def _forget_pool():
    # a forked child has the pool object but none of its threads
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def thread_map(function, n_threads, *iterables):
    """``list(map(function, *iterables))`` on up to ``n_threads`` threads.

    The calling thread runs the first task itself (it would only wait), the
    others go to a pool kept for the process (at least ``n_threads - 1``
    threads, as many as any call asked for; calls from many threads share
    it, their tasks queued in order). Every task has ended when the call
    returns or raises; the first task's exception comes first, then the
    others' in order. A call from one of the pool's own threads runs in its
    thread (nothing waits for a task that waits for it).
    """
    global _pool
    if n_threads <= 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        return list(map(function, *iterables))
    tasks = list(zip(*iterables))
    if len(tasks) <= 1:
        return [function(*task) for task in tasks]
    with _pool_lock:
        if _pool is None or _pool._max_workers < n_threads - 1:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its tasks in flight still finish
            _pool = ThreadPoolExecutor(n_threads - 1, thread_name_prefix=_POOL_PREFIX)
        pool = _pool
    futures = [pool.submit(function, *task) for task in tasks[1:]]
    try:
        first = function(*tasks[0])
    finally:
        wait(futures)  # no task left writing into the caller's buffers
    return [first, *(future.result() for future in futures)]
