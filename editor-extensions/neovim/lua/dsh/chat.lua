---@mod dsh.chat The chat buffer `dsh://chat`: prompts, streamed replies,
--- thoughts (folded), one line per tool call updated in place, plans as
--- checklists, and the prompts waiting behind the running turn (virtual
--- lines under the last line, never text of the buffer).

local M = {}

local ns = vim.api.nvim_create_namespace("dsh_chat")
local pending_ns = vim.api.nvim_create_namespace("dsh_chat_pending")

---@class dsh.Chat
---@field buf integer
---@field last string|nil  what the last line belongs to: "text", "thought", "block"
---@field calls table<string, {mark: integer, title: string, status: string}>
---@field plan {mark: integer, lines: integer}|nil
---@field pending dsh.Prompt[]  prompts waiting behind the running turn
local Chat = {}
Chat.__index = Chat

local STATUS = { pending = "…", in_progress = "▶", completed = "✓", failed = "✗" }

--- The buffer named exactly `dsh://chat` (never `bufnr()`, which also
--- matches a buffer whose name merely contains it).
---@return integer|nil
local function existing_chat()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == "dsh://chat" then
      return b
    end
  end
end

---@return dsh.Chat
function M.new()
  local buf = existing_chat()
  if not buf then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, "dsh://chat")
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "dsh"
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, pending_ns, 0, -1)
  return setmetatable({ buf = buf, last = nil, calls = {}, plan = nil, pending = {} }, Chat)
end

---@private
function Chat:edit(fn)
  if not vim.api.nvim_buf_is_valid(self.buf) then
    return
  end
  vim.bo[self.buf].modifiable = true
  fn()
  vim.bo[self.buf].modifiable = false
  self:show_pending()
  -- Windows showing the chat follow its end.
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(self.buf), 0 })
  end
end

---@private
function Chat:is_empty()
  local lines = vim.api.nvim_buf_get_lines(self.buf, 0, -1, false)
  return #lines == 1 and lines[1] == ""
end

--- Appends whole lines.
---@param lines string[]
function Chat:lines(lines)
  self:edit(function()
    if self:is_empty() then
      vim.api.nvim_buf_set_lines(self.buf, 0, -1, false, lines)
    else
      vim.api.nvim_buf_set_lines(self.buf, -1, -1, false, lines)
    end
  end)
  self.last = "block"
end

--- A heading for a new exchange.
---@param who string
function Chat:heading(who)
  local blank = self:is_empty() and {} or { "" }
  self:lines(vim.list_extend(blank, { "## " .. who }))
end

--- Streamed text (`text`) or reasoning (`thought`: each line `│ `, folded).
---@param kind "text"|"thought"
---@param text string
function Chat:stream(kind, text)
  local prefix = kind == "thought" and "│ " or ""
  self:edit(function()
    local parts = vim.split(text, "\n", { plain = true })
    if self.last ~= kind then
      local first = prefix .. parts[1]
      if self:is_empty() then
        vim.api.nvim_buf_set_lines(self.buf, 0, -1, false, { first })
      else
        vim.api.nvim_buf_set_lines(self.buf, -1, -1, false, { first })
      end
    else
      local count = vim.api.nvim_buf_line_count(self.buf)
      local last = vim.api.nvim_buf_get_lines(self.buf, count - 1, count, false)[1]
      vim.api.nvim_buf_set_lines(self.buf, count - 1, count, false, { last .. parts[1] })
    end
    local rest = {}
    for i = 2, #parts do
      rest[#rest + 1] = prefix .. parts[i]
    end
    if #rest > 0 then
      vim.api.nvim_buf_set_lines(self.buf, -1, -1, false, rest)
    end
  end)
  self.last = kind
end

---@private
function Chat:call_line(call)
  return string.format("%s %s", STATUS[call.status] or "•", call.title)
end

--- A tool call: one line, updated in place as it progresses.
---@param id string
---@param title string|nil
---@param status string|nil
function Chat:call(id, title, status)
  local call = self.calls[id]
  if not call then
    call = { title = title or id, status = status or "pending" }
    self:lines({ self:call_line(call) })
    local row = vim.api.nvim_buf_line_count(self.buf) - 1
    call.mark = vim.api.nvim_buf_set_extmark(self.buf, ns, row, 0, {})
    self.calls[id] = call
    return
  end
  if title and title ~= "" then
    call.title = title
  end
  call.status = status or call.status
  local row = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, call.mark, {})[1]
  if row then
    self:edit(function()
      vim.api.nvim_buf_set_lines(self.buf, row, row + 1, false, { self:call_line(call) })
    end)
  end
end

--- The plan, as a checklist (replaced in place on every update).
---@param entries {content: string, status: string}[]
function Chat:show_plan(entries)
  local marks = { completed = "[x]", in_progress = "[~]", pending = "[ ]" }
  local lines = { "Plan:" }
  for _, entry in ipairs(entries) do
    lines[#lines + 1] = string.format("- %s %s", marks[entry.status] or "[ ]", entry.content)
  end
  local row = self.plan and vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, self.plan.mark, {})[1]
  if row then
    self:edit(function()
      vim.api.nvim_buf_set_lines(self.buf, row, row + self.plan.lines, false, lines)
    end)
    self.plan.lines = #lines
    return
  end
  self:lines(lines)
  local start = vim.api.nvim_buf_line_count(self.buf) - #lines
  self.plan = { mark = vim.api.nvim_buf_set_extmark(self.buf, ns, start, 0, {}), lines = #lines }
end

--- The prompts waiting behind the running turn, shown under the last line
--- until their turn starts (queued) or dsh puts them into the turn
--- (steered).
---@param prompts dsh.Prompt[]
function Chat:set_pending(prompts)
  self.pending = prompts
  self:show_pending()
end

---@private
function Chat:show_pending()
  if not vim.api.nvim_buf_is_valid(self.buf) then
    return
  end
  vim.api.nvim_buf_clear_namespace(self.buf, pending_ns, 0, -1)
  if #self.pending == 0 then
    return
  end
  local lines = {}
  for _, prompt in ipairs(self.pending) do
    local head = prompt.delivery == "steer" and "↪ steering: " or "⏳ queued: "
    local text = vim.split(prompt.text, "\n", { plain = true })
    lines[#lines + 1] = { { head .. text[1] .. (#text > 1 and " …" or ""), "Comment" } }
  end
  local row = vim.api.nvim_buf_line_count(self.buf) - 1
  vim.api.nvim_buf_set_extmark(self.buf, pending_ns, row, 0, { virt_lines = lines })
end

--- The pending lines as shown (for tests and `:checkhealth`).
---@return string[]
function Chat:pending_lines()
  local out = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(self.buf, pending_ns, 0, -1, { details = true })) do
    for _, line in ipairs(mark[4].virt_lines or {}) do
      out[#out + 1] = line[1][1]
    end
  end
  return out
end

--- The buffer's text.
---@return string
function Chat:text()
  return table.concat(vim.api.nvim_buf_get_lines(self.buf, 0, -1, false), "\n")
end

return M
