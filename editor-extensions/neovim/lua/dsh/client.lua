---@mod dsh.client What dsh asks of the editor: files (from loaded
--- buffers, so unsaved changes are what dsh reads), permission prompts
--- (`vim.ui.select`, with the proposed edit in a diff tab while open) and
--- questions (`elicitation/create` forms: `vim.ui.select` and
--- `vim.ui.input`, one question after the other).

local form = require("dsh.form")

local M = {}

--- `path` as one name per file: absolute, symlinks resolved. A file that
--- does not exist yet: its nearest existing directory resolved, the rest
--- normalized (`.`/`..` removed, `$VAR` and `~` kept literally).
---@param path string
---@return string
function M.canonical(path)
  local abs = vim.fn.fnamemodify(path, ":p")
  if abs:sub(1, 1) ~= "/" then
    return abs -- not a file path (a URL-like name)
  end
  local real = vim.uv.fs_realpath(abs)
  if real then
    return real
  end
  abs = vim.fs.normalize(abs, { expand_env = false })
  local rest, dir = {}, abs
  while true do
    local parent = vim.fs.dirname(dir)
    table.insert(rest, 1, vim.fs.basename(dir))
    if not parent or parent == dir then
      return abs
    end
    local found = vim.uv.fs_realpath(parent)
    if found then
      return vim.fs.joinpath(found, unpack(rest))
    end
    dir = parent
  end
end

--- The loaded buffer of exactly the file `path`: file buffers (`buftype`
--- empty) whose names resolve to the same path. Never `bufnr(name)`,
--- which also matches a buffer whose name merely contains `name`.
---@param path string
---@return integer|nil buf
function M.buffer_of(path)
  local want = M.canonical(path)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == "" then
      local name = vim.api.nvim_buf_get_name(b)
      if name ~= "" and not name:find("^%a[%w+.-]*://") and M.canonical(name) == want then
        return b
      end
    end
  end
end

---@param path string
---@return string|nil text, string|nil err
local function disk_text(path)
  local file, err = io.open(path, "rb")
  if not file then
    return nil, err
  end
  local text = file:read("*a")
  file:close()
  return text
end

--- The current text of `path`: its buffer if loaded, else the disk.
---@param path string
---@return string|nil, string|nil
function M.current_text(path)
  local buf = M.buffer_of(path)
  if buf then
    local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    local text = table.concat(lines, "\n")
    if vim.bo[buf].eol and #lines > 0 then
      text = text .. "\n"
    end
    return text
  end
  return disk_text(path)
end

--- `fs/read_text_file`.
function M.read_text_file(params, respond)
  local text, err = M.current_text(params.path)
  if not text then
    respond(nil, { code = -32002, message = "cannot read " .. params.path .. ": " .. tostring(err) })
    return
  end
  if params.line or params.limit then
    local lines = vim.split(text, "\n", { plain = true })
    local first = math.max(params.line or 1, 1)
    local last = params.limit and (first + params.limit - 1) or #lines
    text = table.concat(vim.list_slice(lines, first, last), "\n")
  end
  respond({ content = text })
end

--- `fs/write_text_file`: a loaded buffer gets the new text (and is saved
--- unless it had unsaved changes, which stay the user's to save); else the
--- file is written.
---@param notify fun(msg: string, level: integer)
function M.write_text_file(params, respond, notify)
  local path, content = params.path, params.content or ""
  local buf = M.buffer_of(path)
  if buf then
    local modified = vim.bo[buf].modified
    local lines = vim.split(content, "\n", { plain = true })
    local eol = lines[#lines] == ""
    if eol then
      table.remove(lines)
    end
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].eol = eol
    if modified then
      notify(("dsh changed %s, which has unsaved changes: review and save it"):format(vim.fn.fnamemodify(path, ":~:.")), vim.log.levels.WARN)
    else
      local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
        vim.cmd("silent keepalt noautocmd write!")
      end)
      if not ok then
        respond(nil, { code = -32603, message = "cannot save " .. path .. ": " .. tostring(err) })
        return
      end
    end
    respond(vim.NIL)
    return
  end
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local file, err = io.open(path, "wb")
  if not file then
    respond(nil, { code = -32603, message = "cannot write " .. path .. ": " .. tostring(err) })
    return
  end
  file:write(content)
  file:close()
  respond(vim.NIL)
end

--- The text a `write` or `edit` call would leave, from its arguments.
---@param tool table the permission's toolCall
---@return string|nil path, string|nil old, string|nil new
function M.proposed(tool)
  local input = tool.rawInput
  local path = tool.locations and tool.locations[1] and tool.locations[1].path
  if type(input) ~= "table" or not path then
    return nil
  end
  local old = M.current_text(path) or ""
  if input.content then
    return path, old, input.content
  end
  if input.old_string and input.new_string then
    local start, finish = old:find(input.old_string, 1, true)
    if not start then
      return nil
    end
    if input.replace_all then
      local pieces, from = {}, 1
      while true do
        local s, e = old:find(input.old_string, from, true)
        if not s then
          break
        end
        pieces[#pieces + 1] = old:sub(from, s - 1) .. input.new_string
        from = e + 1
      end
      return path, old, table.concat(pieces) .. old:sub(from)
    end
    return path, old, old:sub(1, start - 1) .. input.new_string .. old:sub(finish + 1)
  end
end

--- Shows `old` against `new` in a new tab (two scratch buffers, `diffthis`);
--- returns a function that closes it.
---@param path string
---@param old string
---@param new string
---@return fun()
function M.diff_tab(path, old, new)
  vim.cmd("tabnew")
  local tab = vim.api.nvim_get_current_tabpage()
  local function scratch(text, name)
    local buf = vim.api.nvim_get_current_buf()
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "wipe"
    vim.bo[buf].swapfile = false
    local lines = vim.split(text, "\n", { plain = true })
    if lines[#lines] == "" then
      table.remove(lines)
    end
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    pcall(vim.api.nvim_buf_set_name, buf, name)
    vim.bo[buf].filetype = vim.filetype.match({ filename = path }) or ""
    vim.bo[buf].modifiable = false
    vim.cmd("diffthis")
  end
  local short = vim.fn.fnamemodify(path, ":~:.")
  scratch(old, "dsh://current/" .. short)
  vim.cmd("vnew")
  scratch(new, "dsh://proposed/" .. short)
  return function()
    if vim.api.nvim_tabpage_is_valid(tab) and #vim.api.nvim_list_tabpages() > 1 then
      vim.api.nvim_set_current_tabpage(tab)
      vim.cmd("tabclose")
    end
  end
end

--- `session/request_permission`: the options through `vim.ui.select`,
--- the proposed edit beside it. No choice is a cancel (denied).
---@param on_ask fun(params: table)
function M.request_permission(params, respond, on_ask)
  local tool = params.toolCall or {}
  local close = function() end
  if tool.kind == "edit" then
    local path, old, new = M.proposed(tool)
    if path then
      close = M.diff_tab(path, old, new)
    end
  end
  on_ask(params)
  vim.ui.select(params.options or {}, {
    prompt = "dsh: " .. (tool.title or "permission"),
    format_item = function(option)
      return option.name
    end,
    kind = "dsh.permission",
  }, function(choice)
    close()
    if choice then
      respond({ outcome = { outcome = "selected", optionId = choice.optionId } })
    else
      respond({ outcome = { outcome = "cancelled" } })
    end
  end)
end

-- Questions ---------------------------------------------------------------

local function select(items, prompt, on_choice)
  vim.ui.select(items, {
    prompt = prompt,
    format_item = function(item)
      return item.label
    end,
    kind = "dsh.question",
  }, on_choice)
end

--- Asks one question; `done(kind, answer)` with kind "answer", "skip",
--- "decline" or "cancel". Dismissing a picker or an input cancels.
---@param q dsh.Question
---@param notify fun(msg: string, level: integer)
local function ask_one(q, i, n, notify, done)
  local prompt = form.prompt(q, i, n)
  local warn = function(msg)
    notify(msg, vim.log.levels.WARN)
  end

  -- "Other…": its text, or back to the list (an empty or dismissed input).
  local function other_text(default, back, take)
    vim.ui.input({ prompt = prompt .. " — other: ", default = default }, function(text)
      text = text and vim.trim(text) or ""
      if text == "" then
        back()
      else
        take(text)
      end
    end)
  end

  if q.kind == "single" or q.kind == "boolean" then
    local function again()
      select(form.choices(q), prompt, function(choice)
        if not choice then
          done("cancel")
        elseif choice.special == "decline" or choice.special == "skip" then
          done(choice.special)
        elseif choice.special == "other" then
          other_text(nil, again, function(text)
            done("answer", { other = text })
          end)
        else
          done("answer", { value = choice.value })
        end
      end)
    end
    again()
  elseif q.kind == "multi" then
    local picked, other = {}, nil
    for _, value in ipairs(type(q.schema.default) == "table" and q.schema.default or {}) do
      picked[value] = true
    end
    local function again()
      select(form.checklist(q, picked, other), prompt, function(choice)
        if not choice then
          done("cancel")
        elseif choice.special == "decline" then
          done("decline")
        elseif choice.special == "done" then
          local answer = form.multi_answer(q, picked, other)
          local problem = form.problem(q, answer)
          if problem then
            warn(problem)
            again()
          else
            done(answer and "answer" or "skip", answer)
          end
        elseif choice.special == "other" then
          other_text(other, function()
            other = nil
            again()
          end, function(text)
            other = text
            again()
          end)
        else
          picked[choice.value] = not picked[choice.value] or nil
          again()
        end
      end)
    end
    again()
  else
    local function again(default)
      vim.ui.input({ prompt = prompt .. ": ", default = default }, function(text)
        if text == nil then
          done("cancel")
          return
        end
        local answer, problem = form.typed_answer(q, text)
        if problem then
          warn(problem)
          again(text)
        else
          done(answer and "answer" or "skip", answer)
        end
      end)
    end
    again(q.schema.default ~= nil and tostring(q.schema.default) or nil)
  end
end

--- `elicitation/create`: each question of the form in turn, then the
--- answers (`accept`). "Decline to answer" in any picker declines the
--- whole form; dismissing one (or dsh withdrawing the request) cancels
--- it: nothing is ever answered for the user. A form dsh.nvim cannot show
--- (another mode, a required field of an unknown type) is declined.
---@param hooks {asked: fun(params: table, questions: dsh.Question[]), answered: fun(params: table, questions: dsh.Question[]|nil, action: string, answers: table|nil), notify: fun(msg: string, level: integer)}
function M.create_elicitation(params, respond, on_cancel, hooks)
  local questions, why = form.parse(params)
  if not questions then
    hooks.notify("dsh asked something dsh.nvim cannot show (" .. why .. "); declined", vim.log.levels.WARN)
    respond({ action = "decline" })
    hooks.answered(params, nil, "decline", nil)
    return
  end
  local finished = false
  local function finish(action, answers)
    if finished then
      return
    end
    finished = true
    if action == "accept" then
      respond({ action = "accept", content = form.content(questions, answers) })
    else
      respond({ action = action })
    end
    hooks.answered(params, questions, action, answers)
  end
  on_cancel(function()
    finish("cancel")
  end)
  hooks.asked(params, questions)
  local answers = {}
  local function step(i)
    if finished then
      return
    end
    local q = questions[i]
    if not q then
      finish("accept", answers)
      return
    end
    -- A picker that fails answers nothing: cancelled, never made up.
    local ok, err = pcall(ask_one, q, i, #questions, hooks.notify, function(kind, answer)
      if finished then
        return
      end
      if kind == "answer" then
        answers[q.id] = answer
        step(i + 1)
      elseif kind == "skip" then
        step(i + 1)
      else
        finish(kind)
      end
    end)
    if not ok then
      hooks.notify("dsh.nvim could not ask dsh's question: " .. tostring(err), vim.log.levels.ERROR)
      finish("cancel")
    end
  end
  step(1)
end

return M
