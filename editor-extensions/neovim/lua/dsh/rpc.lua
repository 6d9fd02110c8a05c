---@mod dsh.rpc JSON-RPC 2.0 over a child's stdio, one message per line.
---
--- Spawns the agent with `vim.system`, splits its stdout into lines (a read
--- may end mid-line), answers the agent's requests through handlers and
--- resumes callers by id. When the process exits every pending callback
--- fires with an error, so nothing waits forever. A request dsh withdraws
--- (`$/cancel_request`) calls the canceller its handler registered.

local M = {}

---@class dsh.Rpc
---@field private proc vim.SystemObj
---@field private next_id integer
---@field private pending table<integer, fun(err: table|nil, result: any)>
---@field private handlers table<string, fun(params: table, respond: fun(result: any, err: table|nil), on_cancel: fun(fn: fun()))>
---@field private cancellers table<any, fun()>  by the id of a request of dsh's still open
---@field private on_notify fun(method: string, params: table)
---@field private buffer string
---@field exited boolean
local Rpc = {}
Rpc.__index = Rpc

---@param cmd string[]
---@param opts {env: table<string,string>|nil, cwd: string|nil, handlers: table, on_notify: fun(method: string, params: table), on_exit: fun(code: integer)|nil, log: fun(line: string)|nil}
---@return dsh.Rpc
function M.start(cmd, opts)
  local self = setmetatable({
    next_id = 0,
    pending = {},
    cancellers = {},
    handlers = opts.handlers or {},
    on_notify = opts.on_notify,
    buffer = "",
    exited = false,
    log = opts.log or function() end,
  }, Rpc)
  self.proc = vim.system(cmd, {
    stdin = true,
    env = opts.env,
    cwd = opts.cwd,
    stdout = function(_, data)
      if data then
        vim.schedule(function()
          self:receive(data)
        end)
      end
    end,
    stderr = function(_, data)
      if data then
        self.log(data)
      end
    end,
  }, function(result)
    vim.schedule(function()
      self.exited = true
      local pending = self.pending
      self.pending = {}
      for _, callback in pairs(pending) do
        callback({ code = -32099, message = "dsh exited" }, nil)
      end
      if opts.on_exit then
        opts.on_exit(result.code)
      end
    end)
  end)
  return self
end

---@private
function Rpc:receive(data)
  self.buffer = self.buffer .. data
  while true do
    local newline = self.buffer:find("\n", 1, true)
    if not newline then
      return
    end
    local line = self.buffer:sub(1, newline - 1)
    self.buffer = self.buffer:sub(newline + 1)
    if line:match("^%s*{") then
      local ok, message = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
      if ok and type(message) == "table" then
        self:dispatch(message)
      end
    end
  end
end

---@private
function Rpc:dispatch(message)
  if message.method and message.id ~= nil then
    local handler = self.handlers[message.method]
    local id = message.id
    local answered = false
    local function respond(result, err)
      if answered then
        return
      end
      answered = true
      self.cancellers[id] = nil
      if err then
        self:write({ jsonrpc = "2.0", id = id, error = err })
      else
        self:write({ jsonrpc = "2.0", id = id, result = result == nil and vim.NIL or result })
      end
    end
    if not handler then
      respond(nil, { code = -32601, message = "dsh.nvim does not handle " .. message.method })
      return
    end
    local function on_cancel(fn)
      if not answered then
        self.cancellers[id] = fn
      end
    end
    local ok, err = pcall(handler, message.params or {}, respond, on_cancel)
    if not ok then
      respond(nil, { code = -32603, message = tostring(err) })
    end
  elseif message.method == "$/cancel_request" then
    local id = message.params and message.params.requestId
    local cancel = id ~= nil and self.cancellers[id]
    if cancel then
      self.cancellers[id] = nil
      cancel()
    end
  elseif message.method then
    self.on_notify(message.method, message.params or {})
  elseif message.id ~= nil then
    local callback = self.pending[message.id]
    self.pending[message.id] = nil
    if callback then
      callback(message.error, message.result)
    end
  end
end

---@private
function Rpc:write(message)
  if self.exited then
    return
  end
  self.proc:write(vim.json.encode(message) .. "\n")
end

--- Sends a request; `callback(err, result)` runs on the main loop.
---@param method string
---@param params table
---@param callback fun(err: table|nil, result: any)|nil
---@return integer id
function Rpc:request(method, params, callback)
  self.next_id = self.next_id + 1
  local id = self.next_id
  if self.exited then
    if callback then
      callback({ code = -32099, message = "dsh is not running" }, nil)
    end
    return id
  end
  self.pending[id] = callback or function() end
  self:write({ jsonrpc = "2.0", id = id, method = method, params = params })
  return id
end

---@param method string
---@param params table
function Rpc:notify(method, params)
  self:write({ jsonrpc = "2.0", method = method, params = params })
end

--- Closes stdin (dsh stops its sessions and exits), then kills it if it
--- is still there after `grace_ms`.
---@param grace_ms integer|nil
function Rpc:stop(grace_ms)
  if self.exited then
    return
  end
  pcall(function()
    self.proc:write(nil)
  end)
  local proc = self.proc
  vim.defer_fn(function()
    if not self.exited then
      pcall(proc.kill, proc, "sigterm")
    end
  end, grace_ms or 3000)
end

--- Waits (blocking, up to `ms`) for the process to exit: for VimLeavePre.
---@param ms integer
function Rpc:wait(ms)
  pcall(function()
    self.proc:wait(ms)
  end)
end

---@return integer|nil
function Rpc:pid()
  return self.proc and self.proc.pid
end

return M
