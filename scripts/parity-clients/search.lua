-- wrk script: POSTs search-bench's _search bodies (one JSON document a line in the file named by
-- PARITY_BODIES) in the order search-bench cycles through them, on keep-alive connections.
local bodies = {}
for line in io.lines(os.getenv("PARITY_BODIES")) do bodies[#bodies + 1] = line end
local next_body = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end
