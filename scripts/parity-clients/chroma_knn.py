"""Chroma's own Python client (chromadb.HttpClient) running what vector-bench runs on the collection
vector-bench built and kept: for each ef, the collection's configuration set to that ef_search
(as vector-bench does), then every query once at concurrency 1 (recall@k against the same exact
truth file vector-bench was given) and a window of THREADS threads cycling through the queries
(queries/s). Prints one line per ef: "EF RECALL QPS CPU_US_PER_QUERY REPORTED_EF".

    python chroma_knn.py HOST:PORT COLLECTION QUERIES.fvecs TRUTH.ivecs K THREADS SECONDS EF,EF,…
"""

import resource
import sys
import threading
import time

import chromadb
import numpy as np


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=dtype)
    d = raw[:1].view(np.int32)[0]
    return raw.reshape(-1, d + 1)[:, 1:]


def main():
    hostport, name, query_path, truth_path = sys.argv[1:5]
    k, threads, seconds = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    efs = [int(e) for e in sys.argv[8].split(",")]
    host, port = hostport.rsplit(":", 1)
    queries = read_vecs(query_path, np.float32).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    truth = read_vecs(truth_path, np.int32)[:, :k]
    rows = [q.tolist() for q in queries]
    # One client (one HTTP connection pool) per thread, opened before any window.
    clients = [chromadb.HttpClient(host=host, port=int(port)) for _ in range(threads)]
    collections = [c.get_collection(name) for c in clients]
    for ef in efs:
        collections[0].modify(configuration={"hnsw": {"ef_search": ef}})
        reported = clients[0].get_collection(name).configuration["hnsw"]["ef_search"]
        found = 0
        for i, q in enumerate(rows):
            ids = collections[0].query(query_embeddings=[q], n_results=k, include=[])["ids"][0]
            found += len(set(int(x) for x in ids) & set(int(t) for t in truth[i]))
        recall = found / (len(rows) * k)
        counts = [0] * threads
        deadline = [0.0]
        start = threading.Event()

        def worker(n):
            c, done, i = collections[n], 0, n
            start.wait()
            while time.monotonic() < deadline[0]:
                c.query(query_embeddings=[rows[i % len(rows)]], n_results=k, include=[])
                done, i = done + 1, i + 1
            counts[n] = done

        pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        before = resource.getrusage(resource.RUSAGE_SELF)
        began = time.monotonic()
        deadline[0] = began + seconds
        start.set()
        for t in pool:
            t.join()
        elapsed = time.monotonic() - began
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        total = sum(counts)
        print(f"{ef} {recall:.4f} {total / elapsed:.1f} {cpu * 1e6 / max(total, 1):.1f} {reported}", flush=True)


if __name__ == "__main__":
    main()
