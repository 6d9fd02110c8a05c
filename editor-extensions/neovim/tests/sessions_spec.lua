-- A fresh Neovim picks the earlier session with :DshSessions and gets its
-- transcript back.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local wanted = assert(os.getenv("DSH_TEST_SESSION"), "DSH_TEST_SESSION")
local offered
H.answer_selects(function(items, opts)
  H.eq(opts.kind, "dsh.session", "select kind")
  offered = #items
  for i, item in ipairs(items) do
    if item.sessionId == wanted then
      return i
    end
  end
end)
vim.cmd("DshSessions")
H.wait("the session to load and show", function()
  return H.dsh.state().session_id == wanted
    and H.chat():find("Edited a.txt.", 1, true) ~= nil
    and #vim.fn.win_findbuf(H.dsh.chat_buf()) > 0
end)
H.eq(offered, 1, "sessions offered")
local chat = H.chat()
H.contains(chat, "write a note", "the first prompt, replayed")
H.contains(chat, "Refused, as you asked.", "the first reply")
H.contains(chat, "✓ Edit a.txt", "the edit call")
print("sessions_spec ok")
