-- wrk script: POST /v1/purchases with a different signed transaction each time, as the account it belongs to.
-- Reads REQUESTS_FILE: one "token<TAB>jws" per line. Each wrk thread takes every Nth line (its own slice), so no two
-- requests in a run carry the same transaction until the file is exhausted; then it wraps (repeats are
-- already-granted submissions: scripts/load-test prints the server's own count of each outcome).
local lines = {}
local index = 0
local thread_count = 1
local wrapped = 0

function setup(thread)
  -- A global of the thread's own Lua state: a `local thread_id` in this file would shadow it, and every thread
  -- would then take the same lines (each transaction sent twice, the second already granted).
  thread:set("thread_id", thread_count - 1)
  thread_count = thread_count + 1
end

function init(args)
  local threads = tonumber(os.getenv("WRK_THREADS") or "2")
  local n = 0
  -- Each request is formatted here, once, so that the load generator spends its share of the two cores sending, not
  -- concatenating 5 KB bodies while the server waits for the next request.
  for line in io.lines(os.getenv("REQUESTS_FILE")) do
    if n % threads == (thread_id or 0) then
      local tab = string.find(line, "\t", 1, true)
      local token = string.sub(line, 1, tab - 1)
      local jws = string.sub(line, tab + 1)
      table.insert(lines, wrk.format("POST", "/v1/purchases",
        {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, '{"signedTransaction":"' .. jws .. '"}'))
    end
    n = n + 1
  end
end

function request()
  index = index + 1
  if index > #lines then index = 1; wrapped = wrapped + 1 end
  return lines[index]
end

function done(summary, latency, requests)
  io.write(string.format("non-2xx or socket errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
