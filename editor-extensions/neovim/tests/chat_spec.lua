-- Streamed text, thoughts, tool calls updated in place, permission prompts
-- answered "reject" (nothing written) and "allow once" (the edit lands in
-- the open buffer and on disk), locations in quickfix.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local cwd = vim.fn.getcwd()

-- a.txt is open (loaded, unmodified): dsh reads and writes it through us.
vim.cmd.edit("a.txt")
local a_buf = vim.api.nvim_get_current_buf()

local asks, tabs_during_edit, proposed = {}, nil, nil
H.dsh.on("permission", function(ask)
  asks[#asks + 1] = ask
end)
H.answer_selects(function(items, opts)
  H.eq(opts.kind, "dsh.permission", "select kind")
  local wanted = #asks == 1 and "reject_once" or "allow_once"
  if #asks == 2 then
    -- The proposed edit is beside the prompt.
    tabs_during_edit = #vim.api.nvim_list_tabpages()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_get_name(buf):find("dsh://proposed/", 1, true) then
        proposed = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
      end
    end
  end
  for i, item in ipairs(items) do
    if item.optionId == wanted then
      return i
    end
  end
end)

-- Follow the agent: each tool call's first location opens in the window
-- beside the chat.
H.dsh.config.follow = true
local editor_win = vim.api.nvim_get_current_win()
local done = H.prompt("write a note")
H.eq(done.stopReason, "end_turn", "first turn")
H.eq(#asks, 1, "asks after the first turn")
H.eq(asks[1].toolCall.title, "Write note.txt", "ask title")
H.eq(vim.fn.filereadable(cwd .. "/note.txt"), 0, "a rejected write leaves no file")
local chat = H.chat()
H.contains(chat, "## You\nwrite a note", "the prompt")
H.contains(chat, "│ I will write the note.", "the thought, folded")
H.contains(chat, "✗ Write note.txt", "the rejected call, updated in place")
H.contains(chat, "Refused, as you asked.", "the streamed reply")
H.eq(vim.fn.fnamemodify(vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(editor_win)), ":t"), "note.txt", "followed to the call's location")
H.eq(vim.api.nvim_buf_is_loaded(a_buf), true, "a.txt stays loaded")

done = H.prompt("change a.txt")
H.eq(done.stopReason, "end_turn", "second turn")
H.eq(tabs_during_edit, 2, "a diff tab while the edit is asked about")
H.eq(proposed, "bye", "the proposed content")
H.eq(#vim.api.nvim_list_tabpages(), 1, "the diff tab closes after the answer")
H.eq(vim.api.nvim_buf_get_lines(a_buf, 0, -1, false), { "bye" }, "the edit is in the buffer")
H.eq(vim.bo[a_buf].modified, false, "and saved")
H.eq(H.read(cwd .. "/a.txt"), "bye\n", "on disk")
chat = H.chat()
H.contains(chat, "✓ Edit a.txt", "the edit call")
H.contains(chat, "Edited a.txt.", "the second reply")

local qf = vim.fn.getqflist({ title = 1, items = 1 })
H.eq(qf.title, "dsh", "quickfix title")
local files = {}
for _, item in ipairs(qf.items) do
  files[#files + 1] = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(item.bufnr), ":t") .. ":" .. item.lnum
end
H.contains(table.concat(files, " "), "a.txt:1", "a location in quickfix")

local state = H.dsh.state()
H.eq(state.busy, false, "idle")
H.eq(state.mode, "ask", "mode")
assert(state.session_id, "a session id")
H.out(state.session_id)
print("chat_spec ok " .. state.session_id)
