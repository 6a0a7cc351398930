"""OpenSearch Benchmark parameter source: search-bench's _search bodies (bodies.ndjson beside this
file, one JSON document a line), cycled in order by every client, against the index named in the
operation."""

import json
import os


class Bodies:
    def __init__(self, workload, params, **kwargs):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "bodies.ndjson")) as f:
            self._bodies = [json.loads(line) for line in f if line.strip()]
        self._index = params["index"]
        self._next = 0

    def partition(self, partition_index, total_partitions):
        return self

    @property
    def infinite(self):
        return True

    def params(self):
        body = self._bodies[self._next % len(self._bodies)]
        self._next += 1
        return {
            "index": self._index,
            "type": None,
            "cache": None,
            "detailed-results": False,
            "calculate-recall": False,
            "request-params": {},
            "response-compression-enabled": False,
            "body": body,
        }


def register(registry):
    registry.register_param_source("search-bench-bodies", Bodies)
