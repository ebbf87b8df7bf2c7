-- wrk script: one POST /v1/tasks per request, each with a unique id, due in an hour.
local counter = 0
local thread_id = 0
function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
end
function init(args)
  counter = 0
end
request = function()
  counter = counter + 1
  local body = string.format('{"id":"w%d-%d","callback_url":"http://127.0.0.1:9/never","delay_ms":3600000,"payload":{"order":%d}}', tid, counter, counter)
  return wrk.format("POST", "/v1/tasks", {["Content-Type"]="application/json"}, body)
end
response = function(status, headers, body)
  if status ~= 201 then
    io.write("status " .. status .. "\n")
  end
end
