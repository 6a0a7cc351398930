"""pymongo doing what sql-bench crud does on a MongoDB-wire server, on sql-bench's own collections:
find_one({_id: k}) on fairbench.crud_read (k an int64, uniform in 1..rows) or insert_one({_id, v})
into fairbench.crud_write with w:1, j:true (keys negative: sql-bench's are positive), from THREADS
threads, each with a connection of its own opened before the window. Prints
"OPS_PER_S CPU_US_PER_OP" (this process's user+system CPU during the window).

    python mongo_crud.py URL read|write THREADS SECONDS [ROWS] [LEG]
"""

import random
import resource
import sys
import threading
import time

from bson.int64 import Int64
from pymongo import MongoClient
from pymongo.write_concern import WriteConcern


def main():
    url, op, threads, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    rows = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
    leg = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    client = MongoClient(url, maxPoolSize=threads, minPoolSize=threads, directConnection=True)
    db = client.get_database("fairbench", write_concern=WriteConcern(w=1, j=True))
    reads, writes = db.crud_read, db.crud_write
    value = "v" * 100
    counts = [0] * threads
    errors = []
    ready = threading.Barrier(threads + 1)
    start = threading.Event()
    deadline = [0.0]

    def worker(n):
        rng = random.Random(leg * 1000 + n)
        # Opens this thread's connection before the window (min pool + a first round trip).
        client.admin.command("ping")
        ready.wait()
        start.wait()
        done = 0
        try:
            if op == "read":
                while time.monotonic() < deadline[0]:
                    doc = reads.find_one({"_id": Int64(rng.randint(1, rows))})
                    if doc is None or len(doc["v"]) != 100:
                        raise RuntimeError(f"bad read: {doc!r}")
                    done += 1
            else:
                base = -(leg * 10**12 + n * 10**9)
                while time.monotonic() < deadline[0]:
                    writes.insert_one({"_id": Int64(base - done - 1), "v": value})
                    done += 1
        except Exception as e:  # noqa: BLE001 - any failure ends the leg with its message
            errors.append(repr(e))
        counts[n] = done

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    ready.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    began = time.monotonic()
    deadline[0] = began + seconds
    start.set()
    for t in pool:
        t.join()
    elapsed = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    if errors:
        sys.exit(f"mongo_crud: {errors[0]}")
    total = sum(counts)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print("%.1f %.2f" % (total / elapsed, cpu * 1e6 / max(total, 1)))


if __name__ == "__main__":
    main()
