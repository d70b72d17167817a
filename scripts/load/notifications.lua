-- wrk script: POST /v1/notifications/appstore, a different signed Notifications V2 body each time (as Apple posts
-- them: no account, the signature is the credential). Reads REQUESTS_FILE, one body per line; each wrk thread takes
-- every Nth line, so no two requests in a run carry the same notification until the file is exhausted.
local lines = {}
local index = 0
local thread_count = 1

function setup(thread)
  -- A global of the thread's own Lua state: a `local thread_id` in this file would shadow it, and every thread
  -- would then take the same lines (each transaction sent twice, the second already granted).
  thread:set("thread_id", thread_count - 1)
  thread_count = thread_count + 1
end

function init(args)
  local threads = tonumber(os.getenv("WRK_THREADS") or "2")
  local n = 0
  for line in io.lines(os.getenv("REQUESTS_FILE")) do
    if n % threads == (thread_id or 0) then table.insert(lines, line) end
    n = n + 1
  end
end

function request()
  index = index + 1
  if index > #lines then index = 1 end
  return wrk.format("POST", "/v1/notifications/appstore", {["Content-Type"] = "application/json"}, lines[index])
end

function done(summary, latency, requests)
  io.write(string.format("non-2xx or socket errors: %d\n", summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
