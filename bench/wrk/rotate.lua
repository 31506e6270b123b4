-- Rotate through a list of requests, one after another on every connection.
--
--   wrk -s bench/wrk/rotate.lua http://127.0.0.1:PORT -- requests.tsv
--
-- requests.tsv: one request per line, "NAME<TAB>METHOD<TAB>PATH<TAB>BODY" (BODY
-- may be empty; a JSON body is sent with content-type application/json).  In a
-- BODY, "%N%" becomes a counter unique to this thread and request, so that a
-- request can defeat a server-side cache (e.g. the encoder's result cache).
-- At the end the status counts of all threads are printed, one line per
-- status: "status CODE COUNT" (read by bench/bench_load.py).  wrk does not
-- pair a response with its request across connections, so statuses are not
-- attributed to request names; bench_load.py checks each request once alone.

local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

local function split(line)
  local fields = {}
  for field in (line .. "\t"):gmatch("([^\t]*)\t") do
    table.insert(fields, field)
  end
  return fields
end

function init(args)
  local path = args[1]
  if path == nil then
    error("usage: wrk -s rotate.lua URL -- requests.tsv")
  end
  specs = {}
  for line in io.lines(path) do
    if line ~= "" then
      local f = split(line)
      table.insert(specs, { name = f[1], method = f[2], path = f[3], body = f[4] or "" })
    end
  end
  if #specs == 0 then
    error("no requests in " .. path)
  end
  index = 0
  counts = {}
end

function request()
  index = index % #specs + 1
  local s = specs[index]
  local headers = { ["Accept-Encoding"] = "gzip" }
  local body = nil
  if s.body ~= "" then
    counter = counter + 1
    body = s.body:gsub("%%N%%", tostring(id) .. "x" .. tostring(counter))
    headers["Content-Type"] = "application/json"
  end
  return wrk.format(s.method, s.path, headers, body)
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    local c = thread:get("counts")
    for key, n in pairs(c) do
      total[key] = (total[key] or 0) + n
    end
  end
  for code, n in pairs(total) do
    io.write(string.format("status %d %d\n", code, n))
  end
end
