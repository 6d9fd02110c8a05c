---@mod dsh dsh.nvim: the dsh coding agent in Neovim, over ACP.
---
--- Spawns `dsh acp` and speaks the Agent Client Protocol itself: a chat
--- buffer, permission prompts with the proposed diff, dsh's questions,
--- prompts queued or steered while a turn runs, tool-call locations in the
--- quickfix list, files served from loaded buffers. Works without
--- `setup()`; see `:help dsh`.

local chat_mod = require("dsh.chat")
local client = require("dsh.client")
local form = require("dsh.form")
local queue_mod = require("dsh.queue")
local rpc_mod = require("dsh.rpc")

local M = {}

---@class dsh.Config
---@field cmd string[]      the agent command (default {"dsh", "acp"})
---@field env table<string,string>  added to Neovim's environment for it
---@field mode string|nil   permission mode for new sessions
---@field model string|nil  model for new sessions
---@field follow boolean    jump to each tool call's first location
---@field open boolean      show the chat window when a prompt is sent
local defaults = { cmd = { "dsh", "acp" }, env = {}, mode = nil, model = nil, follow = false, open = true }

M.config = vim.deepcopy(defaults)

local S = {
  rpc = nil, ---@type dsh.Rpc|nil
  chat = nil, ---@type dsh.Chat|nil
  session_id = nil,
  config_options = {},
  prompts = queue_mod.new(), ---@type dsh.Queue
  usage = nil,
  title = nil,
  last_diff = nil,
  listeners = { update = {}, permission = {}, question = {}, done = {} },
  on_ready = {}, -- callbacks waiting for a session
  starting = false,
  log = {},
}

local function emit(event, payload)
  for _, fn in ipairs(S.listeners[event] or {}) do
    local ok, err = pcall(fn, payload)
    if not ok then
      vim.notify("dsh: a " .. event .. " listener failed: " .. tostring(err), vim.log.levels.WARN)
    end
  end
end

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = "dsh" })
end

local function option_value(id)
  for _, option in ipairs(S.config_options) do
    if option.id == id then
      return option.currentValue
    end
  end
end

--- The session's cost as the winbar shows it: `$0.0123` (USD), `0.0123 EUR`;
--- nil when dsh sent none (no price configured for the model).
local function cost_text(cost)
  if type(cost) ~= "table" or type(cost.amount) ~= "number" then
    return nil
  end
  local amount = (cost.amount >= 1 and "%.2f" or "%.4f"):format(cost.amount)
  if cost.currency == "USD" then
    return "$" .. amount
  end
  return amount .. " " .. tostring(cost.currency or "")
end

local function refresh_winbar()
  if not S.chat then
    return
  end
  local parts = { "dsh" }
  if S.title then
    parts[#parts + 1] = S.title
  end
  parts[#parts + 1] = option_value("mode") or "?"
  parts[#parts + 1] = option_value("model") or "?"
  if S.usage then
    parts[#parts + 1] = string.format("%dk/%dk tokens", math.floor(S.usage.used / 1000), math.floor(S.usage.size / 1000))
    parts[#parts + 1] = cost_text(S.usage.cost)
  end
  if S.prompts:busy() then
    local waiting = #S.prompts.waiting
    parts[#parts + 1] = waiting > 0 and ("working… (%d waiting)"):format(waiting) or "working…"
  end
  local bar = table.concat(parts, " · "):gsub("%%", "%%%%")
  for _, win in ipairs(vim.fn.win_findbuf(S.chat.buf)) do
    vim.wo[win].winbar = bar
  end
end

local function ensure_chat()
  if not S.chat or not vim.api.nvim_buf_is_valid(S.chat.buf) then
    S.chat = chat_mod.new()
    S.chat:set_pending(S.prompts.waiting)
  end
  return S.chat
end

--- The chat and the winbar after the line of prompts changed.
local function prompts_changed()
  ensure_chat():set_pending(S.prompts.waiting)
  refresh_winbar()
end

--- A prompt in the chat, as its turn starts (or as dsh puts it into one).
local function show_prompt(chat, text)
  chat:heading("You")
  chat:lines(vim.split(text, "\n", { plain = true }))
  chat:heading("dsh")
end

--- Shows the chat in a window (a vertical split on the right).
function M.open()
  local chat = ensure_chat()
  local wins = vim.fn.win_findbuf(chat.buf)
  if #wins > 0 then
    vim.api.nvim_set_current_win(wins[1])
  else
    vim.cmd("botright vsplit")
    vim.api.nvim_win_set_buf(0, chat.buf)
    vim.wo.wrap = true
    vim.wo.linebreak = true
    vim.wo.foldmethod = "expr"
    vim.wo.foldexpr = "getline(v:lnum)=~'^│ '?1:0"
    vim.wo.foldlevel = 0
  end
  refresh_winbar()
end

--- Jumps to a location in a window that is not the chat.
local function follow(location)
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if not S.chat or vim.api.nvim_win_get_buf(win) ~= S.chat.buf then
      vim.api.nvim_win_call(win, function()
        vim.cmd.edit(vim.fn.fnameescape(location.path))
        pcall(vim.api.nvim_win_set_cursor, win, { math.max(location.line or 1, 1), 0 })
      end)
      return
    end
  end
end

local function add_locations(title, locations)
  if type(locations) ~= "table" or #locations == 0 then
    return
  end
  local items = {}
  for _, location in ipairs(locations) do
    items[#items + 1] = { filename = location.path, lnum = math.max(location.line or 1, 1), text = title or "" }
  end
  vim.fn.setqflist({}, "a", { title = "dsh", items = items })
  if M.config.follow then
    follow(locations[1])
  end
end

local function remember_diff(content)
  for _, block in ipairs(content or {}) do
    if block.type == "diff" then
      S.last_diff = { path = block.path, old = block.oldText or "", new = block.newText or "" }
    end
  end
end

local function on_update(update)
  local chat = ensure_chat()
  local kind = update.sessionUpdate
  if kind == "agent_message_chunk" and update.content and update.content.type == "text" then
    chat:stream("text", update.content.text)
  elseif kind == "agent_thought_chunk" and update.content and update.content.type == "text" then
    chat:stream("thought", update.content.text)
  elseif kind == "user_message_chunk" and update.content and update.content.type == "text" then
    -- A replayed prompt, or a steered one landing in the running turn.
    show_prompt(chat, update.content.text)
    if S.prompts:landed(update.content.text) then
      prompts_changed()
    end
  elseif kind == "tool_call" then
    chat:call(update.toolCallId, update.title, update.status)
    add_locations(update.title, update.locations)
    remember_diff(update.content)
  elseif kind == "tool_call_update" then
    chat:call(update.toolCallId, update.title, update.status)
    local call = chat.calls[update.toolCallId]
    add_locations(call and call.title, update.locations)
    remember_diff(update.content)
  elseif kind == "plan" then
    chat:show_plan(update.entries or {})
  elseif kind == "usage_update" then
    S.usage = { used = update.used or 0, size = update.size or 0, cost = update.cost }
  elseif kind == "config_option_update" then
    S.config_options = update.configOptions or S.config_options
  elseif kind == "session_info_update" and update.title then
    S.title = update.title
  end
  refresh_winbar()
  emit("update", update)
end

local function handlers()
  return {
    ["fs/read_text_file"] = client.read_text_file,
    ["fs/write_text_file"] = function(params, respond)
      client.write_text_file(params, respond, notify)
    end,
    ["session/request_permission"] = function(params, respond)
      client.request_permission(params, respond, function(ask)
        emit("permission", ask)
      end)
    end,
    ["elicitation/create"] = function(params, respond, on_cancel)
      client.create_elicitation(params, respond, on_cancel, {
        notify = notify,
        asked = function(_, questions)
          local lines = {}
          for _, q in ipairs(questions) do
            local text = q.title
            if q.description and q.description ~= q.title then
              text = text .. " — " .. q.description
            end
            lines[#lines + 1] = "? " .. text
          end
          ensure_chat():lines(lines)
          emit("question", params)
        end,
        answered = function(_, questions, action, answers)
          if action == "accept" then
            local lines = {}
            for _, line in ipairs(form.summary(questions, answers)) do
              lines[#lines + 1] = "→ " .. line
            end
            ensure_chat():lines(lines)
          else
            ensure_chat():lines({ "→ (" .. (action == "decline" and "declined" or "cancelled") .. ")" })
          end
        end,
      })
    end,
  }
end

local function start_process()
  if S.rpc and not S.rpc.exited then
    return S.rpc
  end
  local cwd = vim.fn.getcwd()
  S.rpc = rpc_mod.start(M.config.cmd, {
    env = next(M.config.env) and M.config.env or nil,
    cwd = cwd,
    handlers = handlers(),
    on_notify = function(method, params)
      if method == "session/update" and params.sessionId == S.session_id then
        on_update(params.update or {})
      end
    end,
    on_exit = function(code)
      -- Each prompt's callback has fired with "dsh exited".
      S.prompts:clear()
      if S.chat then
        S.chat:set_pending({})
      end
      S.session_id = nil
      refresh_winbar()
    end,
    log = function(data)
      S.log[#S.log + 1] = data
      if #S.log > 200 then
        table.remove(S.log, 1)
      end
    end,
  })
  return S.rpc
end

local function initialize(callback)
  local rpc = start_process()
  rpc:request("initialize", {
    protocolVersion = 1,
    clientInfo = { name = "dsh.nvim", version = "0.1.0" },
    clientCapabilities = {
      fs = { readTextFile = true, writeTextFile = true },
      terminal = false,
      elicitation = { form = vim.empty_dict() },
    },
  }, function(err, result)
    if err then
      notify("dsh did not start: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    callback(result)
  end)
end

local function set_option(id, value, callback)
  S.rpc:request("session/set_config_option", { sessionId = S.session_id, configId = id, value = value }, function(err, result)
    if err then
      notify(("cannot set %s to %s: %s"):format(id, value, err.message or ""), vim.log.levels.ERROR)
    elseif result and result.configOptions then
      S.config_options = result.configOptions
      refresh_winbar()
    end
    if callback then
      callback(err)
    end
  end)
end

local function opened(session_id, result)
  S.session_id = session_id
  S.config_options = (result and result.configOptions) or {}
  S.prompts = queue_mod.new()
  S.usage, S.title, S.last_diff = nil, nil, nil
  vim.fn.setqflist({}, " ", { title = "dsh", items = {} })
  local pending = {}
  if M.config.mode then
    pending[#pending + 1] = { "mode", M.config.mode }
  end
  if M.config.model then
    pending[#pending + 1] = { "model", M.config.model }
  end
  local function next_option()
    local item = table.remove(pending, 1)
    if item then
      set_option(item[1], item[2], next_option)
      return
    end
    S.starting = false
    refresh_winbar()
    local ready = S.on_ready
    S.on_ready = {}
    for _, fn in ipairs(ready) do
      fn()
    end
  end
  next_option()
end

--- Starts a new session (the chat is cleared).
---@param callback fun()|nil when it is ready
function M.new_session(callback)
  if callback then
    S.on_ready[#S.on_ready + 1] = callback
  end
  if S.starting then
    return
  end
  S.starting = true
  S.chat = chat_mod.new()
  initialize(function()
    S.rpc:request("session/new", { cwd = vim.fn.getcwd(), mcpServers = {} }, function(err, result)
      if err then
        S.starting = false
        notify("cannot start a session: " .. (err.message or ""), vim.log.levels.ERROR)
        return
      end
      opened(result.sessionId, result)
    end)
  end)
end

local function with_session(fn)
  if S.session_id and S.rpc and not S.rpc.exited then
    fn()
  else
    M.new_session(fn)
  end
end

--- Sends a prompt (starting dsh and a session if needed). While a turn
--- runs it waits: queued (the default), it gets its own turn after the
--- running one; with `{steer = true}`, dsh puts it into the running turn
--- at its next step boundary. Either way it shows as pending in the chat
--- until then.
---@param text string
---@param opts {steer: boolean|nil}|nil
function M.prompt(text, opts)
  if not text or vim.trim(text) == "" then
    return
  end
  local delivery = opts and opts.steer and "steer" or "queue"
  with_session(function()
    local chat = ensure_chat()
    local prompt, starts = S.prompts:send(text, delivery)
    if starts then
      show_prompt(chat, text)
    end
    if M.config.open and #vim.fn.win_findbuf(chat.buf) == 0 then
      local win = vim.api.nvim_get_current_win()
      M.open()
      vim.api.nvim_set_current_win(win)
    end
    prompts_changed()
    local params = { sessionId = S.session_id, prompt = { { type = "text", text = text } } }
    if prompt.delivery == "steer" then
      params._meta = { dsh = { delivery = "steer" } }
    end
    local session, rpc = S.session_id, S.rpc
    rpc:request("session/prompt", params, function(err, result)
      local was = prompt.state
      if err and rpc.exited then
        S.prompts:clear() -- nothing runs any more
      end
      local next = S.prompts:answered(prompt)
      local here = S.session_id == session and ensure_chat()
      if was == "running" and here then
        if err then
          here:lines({ "", "Error: " .. (err.message or vim.inspect(err)) })
        elseif result.stopReason and result.stopReason ~= "end_turn" then
          here:lines({ "", "(" .. result.stopReason .. ")" })
        end
        if next then
          show_prompt(here, next.text)
        end
      elseif err and was == "waiting" then
        notify("dsh did not take the prompt: " .. (err.message or vim.inspect(err)), vim.log.levels.WARN)
      end
      if here then
        prompts_changed()
      end
      emit("done", {
        text = text,
        delivery = prompt.delivery,
        stopReason = result and result.stopReason,
        error = err and (err.message or "error") or nil,
      })
    end)
  end)
end

--- Sends `text` into the running turn (a prompt with `{steer = true}`);
--- with no turn running it is an ordinary prompt.
---@param text string
function M.steer(text)
  M.prompt(text, { steer = true })
end

--- Cancels the running turn and every prompt waiting behind it.
function M.cancel()
  if S.rpc and S.session_id and S.prompts:busy() then
    local dropped = S.prompts:cancel()
    if #dropped > 0 then
      notify(("%d waiting prompt%s dropped"):format(#dropped, #dropped == 1 and "" or "s"))
    end
    prompts_changed()
    S.rpc:notify("session/cancel", { sessionId = S.session_id })
  end
end

--- Loads a stored session into a fresh chat (its history is replayed).
---@param session_id string
---@param callback fun()|nil
function M.load(session_id, callback)
  S.chat = chat_mod.new()
  S.starting = true
  local function load()
    S.session_id = session_id -- replayed updates carry this id
    S.rpc:request("session/load", { sessionId = session_id, cwd = vim.fn.getcwd(), mcpServers = {} }, function(err, result)
      if err then
        S.starting = false
        S.session_id = nil
        notify("cannot load the session: " .. (err.message or ""), vim.log.levels.ERROR)
        return
      end
      if callback then
        S.on_ready[#S.on_ready + 1] = callback
      end
      opened(session_id, result)
    end)
  end
  if S.rpc and not S.rpc.exited then
    load()
  else
    initialize(load)
  end
end

--- Text from a session log made safe to show: control characters (an
--- escape sequence, a carriage return; C1 controls too) written out as
--- `\xNN`, and the bidirectional controls (U+061C, U+200E–U+200F,
--- U+202A–U+202E, U+2066–U+2069), which could make a hostile title read
--- as another, as `\u{XXXX}`. The text is UTF-8 (decoded JSON).
---@param text string
---@return string
local function shown(text)
  local out = tostring(text or "")
    :gsub("%c", function(c)
      return ("\\x%02x"):format(c:byte())
    end)
    :gsub("\194[\128-\159]", function(c)
      return ("\\x%02x"):format(c:byte(2))
    end)
  -- The code point of a two- or three-byte UTF-8 sequence.
  local function codepoint(c)
    local b1, b2, b3 = c:byte(1, 3)
    local n = b3 and ((b1 - 224) * 4096 + (b2 - 128) * 64 + (b3 - 128)) or ((b1 - 192) * 64 + (b2 - 128))
    return ("\\u{%04x}"):format(n)
  end
  return (out:gsub("\216\156", codepoint):gsub("\226\128[\142\143\170-\174]", codepoint):gsub("\226\129[\166-\169]", codepoint))
end

--- Picks a stored session of this directory and loads it.
function M.sessions()
  local function list()
    S.rpc:request("session/list", { cwd = vim.fn.getcwd() }, function(err, result)
      if err then
        notify("cannot list sessions: " .. (err.message or ""), vim.log.levels.ERROR)
        return
      end
      local sessions = result.sessions or {}
      if #sessions == 0 then
        notify("no dsh sessions in " .. vim.fn.getcwd())
        return
      end
      vim.ui.select(sessions, {
        prompt = "dsh sessions",
        format_item = function(s)
          return string.format("%s  %s", s.updatedAt or "", shown(s.title or s.sessionId))
        end,
        kind = "dsh.session",
      }, function(choice)
        if choice then
          M.load(choice.sessionId, function()
            M.open()
          end)
        end
      end)
    end)
  end
  if S.rpc and not S.rpc.exited then
    list()
  else
    initialize(list)
  end
end

--- `dsh ARGS…`: the configured command without its `acp` (a wrapper
--- such as `{ "env", "X=1", "dsh", "acp" }` keeps its wrapper).
---@param args string[]
---@return string[]
local function dsh_command(args)
  local cmd = vim.deepcopy(M.config.cmd)
  if cmd[#cmd] == "acp" then
    table.remove(cmd)
  end
  return vim.list_extend(cmd, args)
end

--- Searches the stored sessions of this directory for every word of
--- `query` (`dsh sessions search --json`, run as a child: ACP has no
--- search), picks one of the hits — its time, title and matching line —
--- and loads it.
---@param query string
function M.search(query)
  query = vim.trim(query or "")
  if query == "" then
    notify("give the words to search for", vim.log.levels.WARN)
    return
  end
  local cwd = vim.fn.getcwd()
  local cmd = dsh_command({ "sessions", "search", "--json", "--", query })
  local ok, err = pcall(vim.system, cmd, {
    cwd = cwd,
    env = next(M.config.env) and M.config.env or nil,
    text = true,
  }, function(result)
    vim.schedule(function()
      if result.code ~= 0 then
        local why = vim.trim((result.stdout or "") .. (result.stderr or ""))
        notify("cannot search sessions: " .. shown(why), vim.log.levels.ERROR)
        return
      end
      local decoded, hits = pcall(vim.json.decode, result.stdout or "")
      if not decoded or type(hits) ~= "table" then
        notify("cannot search sessions: dsh printed no JSON", vim.log.levels.ERROR)
        return
      end
      if #hits == 0 then
        notify("no dsh session in " .. cwd .. " matches " .. query)
        return
      end
      vim.ui.select(hits, {
        prompt = "dsh sessions matching " .. query,
        format_item = function(hit)
          return string.format(
            "%s  %s — %s",
            os.date("!%Y-%m-%d %H:%M", math.floor((hit.time or 0) / 1000)),
            shown(hit.title or hit.id),
            shown(hit.snippet)
          )
        end,
        kind = "dsh.search",
      }, function(choice)
        if choice then
          M.load(choice.id, function()
            M.open()
          end)
        end
      end)
    end)
  end)
  if not ok then
    notify("cannot run dsh: " .. tostring(err), vim.log.levels.ERROR)
  end
end

--- Sets the permission mode (`read-only`, `plan`, `ask`, `accept-edits`, `full-access`).
function M.set_mode(mode)
  with_session(function()
    set_option("mode", mode)
  end)
end

--- Sets the model.
function M.set_model(model)
  with_session(function()
    set_option("model", model)
  end)
end

--- The values dsh advertised for a setting (for completion).
---@param id string
---@return string[]
function M.choices(id)
  for _, option in ipairs(S.config_options) do
    if option.id == id then
      return vim.tbl_map(function(o)
        return o.value
      end, option.options or {})
    end
  end
  return {}
end

--- Shows the latest proposed or applied edit as a diff.
function M.diff()
  if not S.last_diff then
    notify("no edit yet")
    return
  end
  client.diff_tab(S.last_diff.path, S.last_diff.old, S.last_diff.new)
end

--- Stops dsh (its sessions stay on disk).
function M.stop()
  if S.rpc then
    S.rpc:stop()
  end
end

--- `{session_id, mode, model, busy, pending, usage, title}`; `pending`
--- lists the prompts waiting behind the running turn (`{text, delivery}`).
function M.state()
  local pending = {}
  for _, prompt in ipairs(S.prompts.waiting) do
    pending[#pending + 1] = { text = prompt.text, delivery = prompt.delivery }
  end
  return {
    session_id = S.session_id,
    mode = option_value("mode"),
    model = option_value("model"),
    busy = S.prompts:busy(),
    pending = pending,
    usage = S.usage,
    title = S.title,
    pid = S.rpc and not S.rpc.exited and S.rpc:pid() or nil,
  }
end

--- The chat buffer's number (created if needed).
function M.chat_buf()
  return ensure_chat().buf
end

--- dsh's recent stderr (for :checkhealth and bug reports).
function M.log()
  return table.concat(S.log)
end

--- Subscribes to `update` (each session/update), `permission` (an ask,
--- before the prompt shows), `question` (an `elicitation/create`, before
--- its first picker shows) or `done` (dsh answered a prompt: `{text,
--- delivery, stopReason}` or `{text, delivery, error}`). Returns a
--- function that unsubscribes.
---@param event "update"|"permission"|"question"|"done"
---@param fn fun(payload: table)
function M.on(event, fn)
  assert(S.listeners[event], "unknown dsh event " .. tostring(event))
  table.insert(S.listeners[event], fn)
  return function()
    for i, f in ipairs(S.listeners[event]) do
      if f == fn then
        table.remove(S.listeners[event], i)
        return
      end
    end
  end
end

---@param opts dsh.Config|nil
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
end

-- dsh goes with Neovim: stdin closes, it stops its sessions and exits.
vim.api.nvim_create_autocmd("VimLeavePre", {
  group = vim.api.nvim_create_augroup("dsh_exit", { clear = true }),
  callback = function()
    if S.rpc and not S.rpc.exited then
      S.rpc:stop(0)
      S.rpc:wait(3000)
    end
  end,
})

return M
