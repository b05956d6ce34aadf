"""The timed window: client threads released together on one Runner, the sensors read over
exactly their calls."""

import threading
import time

from .sensors import SensorLog


def time_clients(call, new_state, clients, msg):
    """`clients` threads, released together, each timing synchronous calls until the minimum
    duration AND count (or the maximum duration); power read from just before the release to the
    end of the last call (the client that ends last takes the closing reading itself: waiting for
    the threads to join first lagged the window's end 22 ms behind the calls on a busy 2-core
    host)."""
    barrier = threading.Barrier(clients + 1)
    results = [None] * clients
    sampler = SensorLog(msg.get("power"))
    running, running_lock = [clients], threading.Lock()
    min_s, max_s = float(msg.get("min_duration_s", 1.0)), float(msg.get("max_duration_s", 600.0))
    min_count = int(msg.get("min_count", 10))

    def client(index):
        try:
            state = new_state()
            clock = time.perf_counter_ns
            times = []
            append = times.append
            barrier.wait()
            t_begin = clock()
            min_end, max_end = t_begin + int(min_s * 1e9), t_begin + int(max_s * 1e9)
            n = 0
            while True:
                t0 = clock()
                call(state)
                t1 = clock()
                append((t0, t1))
                n += 1
                if (n >= min_count and t1 >= min_end) or t1 >= max_end:
                    break
            results[index] = times
            with running_lock:
                running[0] -= 1
                last = running[0] == 0
            if last:
                sampler.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            barrier.abort()
            results[index] = exc

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    sampler.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join()
    power = sampler.stop()
    errors = [r for r in results if isinstance(r, BaseException)]
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]
    return {"calls": results, "clients": clients, "power": power}
