-- dsh's questions (ask_user_question) through the real dsh: dsh.nvim
-- advertises forms, so each call arrives as one `elicitation/create`,
-- asked with vim.ui.select / vim.ui.input. Answered (a choice, free text,
-- a checklist with Other…), declined, then dismissed (the turn is
-- cancelled).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")

local asked, calls = {}, {}
H.dsh.on("question", function(params)
  asked[#asked + 1] = params
end)
H.dsh.on("permission", function(ask)
  error("a question came as a permission prompt: " .. vim.inspect(ask))
end)
H.dsh.on("update", function(update)
  if update.sessionUpdate == "tool_call" or update.sessionUpdate == "tool_call_update" then
    local call = calls[update.toolCallId] or {}
    call.status = update.status or call.status
    for _, block in ipairs(update.content or {}) do
      if block.type == "content" and block.content.type == "text" then
        call.text = block.content.text
      end
    end
    calls[update.toolCallId] = call
  end
end)

-- The pickers answer through `respond(kind, prompt, labels)`: a label to
-- pick, text to type, or "esc" to dismiss. It goes by the prompt, not by
-- the questions' order.
local respond, shown = nil, {}
vim.ui.select = function(items, opts, on_choice)
  local labels = vim.tbl_map(opts.format_item, items)
  local step = respond("select", opts.prompt, labels)
  shown[#shown + 1] = opts.prompt
  vim.schedule(function()
    if step == "esc" then
      return on_choice(nil)
    end
    for i, label in ipairs(labels) do
      if label == step then
        return on_choice(items[i], i)
      end
    end
    error(("no %q among %s"):format(step, vim.inspect(labels)))
  end)
end
vim.ui.input = function(opts, on_confirm)
  local step = respond("input", opts.prompt)
  shown[#shown + 1] = opts.prompt
  vim.schedule(function()
    on_confirm(step ~= "esc" and step or nil)
  end)
end

-- 1. Three questions, answered.
respond = function(kind, prompt, labels)
  if prompt:find("atabase") then
    return "SQLite"
  elseif prompt:find("called") then
    return "billing"
  elseif prompt:find("extras") and kind == "input" then
    return "gRPC"
  elseif prompt:find("extras") then
    for _, want in ipairs({ "[ ] metrics", "[ ] tracing", "[ ] Other…" }) do
      if vim.tbl_contains(labels, want) then
        return want
      end
    end
    return "Done (3 chosen)"
  end
  error("an unexpected " .. kind .. ": " .. prompt)
end
local done = H.prompt("set up the service")
H.eq(done.stopReason, "end_turn", "answered turn")
H.eq(#shown, 7, "every picker shown: " .. vim.inspect(shown))
H.eq(#asked, 1, "one elicitation for the call")
local request = asked[1]
H.eq({ request.mode, request.toolCallId }, { "form", "q1" }, "a form for the tool call")
local properties = request.requestedSchema.properties
H.eq(properties.db.type, "string", "single choice")
H.eq(properties.extras.type, "array", "several")
H.eq(properties.name.type, "string", "free text")
H.eq(properties.db_other ~= nil and properties.extras_other ~= nil, true, "Other fields")
H.eq(properties.name_other, nil, "no Other for free text")
H.eq(calls.q1.status, "completed", "the call completed")
for _, said in ipairs({ "SQLite", "billing", "metrics", "tracing", "gRPC" }) do
  H.contains(calls.q1.text, said, "the answers in the call")
end
local chat = H.chat()
H.contains(chat, "? Database", "the question in the chat")
H.contains(chat, "→ Database: SQLite", "the answer in the chat")
H.contains(chat, "gRPC", "the checklist's Other in the chat")
H.contains(chat, "Using SQLite for billing.", "the model's reply after the answers")

-- 2. Declined: the model is told, and goes on.
respond = function()
  return "Decline to answer"
end
done = H.prompt("deploy it")
H.eq(done.stopReason, "end_turn", "declined turn")
H.contains(calls.q2.text or "", "declined", "the call says so")
H.contains(H.chat(), "→ (declined)", "the chat says so")
H.contains(H.chat(), "Not deploying.", "the reply")

-- 3. Dismissed: the turn is cancelled.
respond = function()
  return "esc"
end
done = H.prompt("deploy it now")
H.eq(done.stopReason, "cancelled", "a dismissed question cancels the turn")
H.contains(H.chat(), "→ (cancelled)", "the chat says so")
H.eq(H.dsh.state().busy, false, "idle")
print("questions_spec ok")
