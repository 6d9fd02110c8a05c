-- :DshMode changes the session's mode; :DshCancel stops a slow turn.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local ready = false
H.dsh.new_session(function()
  ready = true
end)
H.wait("a session", function()
  return ready
end)
vim.cmd("DshMode full-access")
H.wait("the mode", function()
  return H.dsh.state().mode == "full-access"
end)
H.eq(vim.fn.getcompletion("DshMode ", "cmdline"), { "read-only", "plan", "ask", "accept-edits", "full-access" }, "mode completion")

-- A plan is a checklist, replaced in place; usage is in the winbar.
H.eq(H.prompt("plan it").stopReason, "end_turn", "the plan turn")
local chat = H.chat()
H.contains(chat, "Plan:\n- [x] read the code\n- [~] fix the bug\n- [ ] run the tests", "the plan")
local wins = vim.fn.win_findbuf(H.dsh.chat_buf())
assert(#wins > 0, "the chat is shown")
H.contains(vim.wo[wins[1]].winbar, "full-access", "the mode in the winbar")
H.contains(vim.wo[wins[1]].winbar, "12k/1000k tokens", "usage in the winbar")
-- The model has a price (1 EUR per million in, 2 out): 23,900 tokens in
-- and 43 out cost 0.023986 EUR.
H.contains(vim.wo[wins[1]].winbar, "12k/1000k tokens · 0.0240 EUR", "the cost in the winbar")
H.eq(H.dsh.state().usage.cost.currency, "EUR", "the cost's currency")
H.eq(vim.wo[wins[1]].foldexpr ~= "", true, "thoughts fold")

local done
H.dsh.on("done", function(payload)
  done = payload
end)
vim.cmd("Dsh think for a long time")
H.wait("some text", function()
  return H.chat():find("still thinking", 1, true) ~= nil
end)
H.eq(H.dsh.state().busy, true, "busy while it streams")
local started = vim.uv.hrtime()
vim.cmd("DshCancel")
H.wait("the cancel", function()
  return done ~= nil
end, 5000)
H.eq(done.stopReason, "cancelled", "stop reason")
local ms = (vim.uv.hrtime() - started) / 1e6
assert(ms < 2000, ("cancel took %d ms"):format(ms))
H.contains(H.chat(), "(cancelled)", "the chat says so")
H.out(tostring(H.dsh.state().pid))
print(("cancel_spec ok (%.0f ms)"):format(ms))
