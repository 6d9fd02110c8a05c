-- Buffers are found by their exact path, never by a pattern (issue 23,
-- item 11): a symlink's buffer serves its target (both sides resolved), a
-- buffer whose name merely contains the asked one does not, and the chat
-- never takes over a buffer whose name merely starts like `dsh://chat`.
-- No dsh is started here.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local client = require("dsh.client")
local cwd = vim.fn.getcwd()

-- link.txt -> real.txt, opened through the link, with unsaved text.
vim.cmd.edit("link.txt")
local link = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(link, 0, -1, false, { "unsaved through the link" })
H.eq(client.current_text(cwd .. "/real.txt"), "unsaved through the link\n", "the target's path finds the link's buffer")
H.eq(client.current_text(cwd .. "/link.txt"), "unsaved through the link\n", "and so does the link's")
H.eq(client.current_text(cwd .. "/./real.txt"), "unsaved through the link\n", "a path with . in it too")
H.eq(client.current_text(cwd .. "/real"), nil, "a prefix of the name finds nothing")
H.eq(client.current_text(cwd .. "/link"), nil, "nor of the link's")

-- Names with pattern characters are plain names.
vim.cmd.edit(vim.fn.fnameescape("star*[1].txt"))
local star = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(star, 0, -1, false, { "star buffer" })
H.eq(client.current_text(cwd .. "/star*[1].txt"), "star buffer\n", "the exact name")
H.eq(client.current_text(cwd .. "/star"), nil, "not a prefix")
H.eq(client.current_text(cwd .. "/starx1.txt"), nil, "not a pattern match")

-- A write to a name that only prefixes an open buffer's goes to disk.
local answer
client.write_text_file({ path = cwd .. "/star", content = "new\n" }, function(result, err)
  answer = { result = result, err = err }
end, function() end)
H.eq(answer, { result = vim.NIL }, "the write is answered")
H.eq(H.read(cwd .. "/star"), "new\n", "the new file")
H.eq(vim.api.nvim_buf_get_lines(star, 0, -1, false), { "star buffer" }, "the open buffer is untouched")

-- The chat is the buffer named exactly dsh://chat.
local notes = vim.api.nvim_create_buf(true, true)
vim.api.nvim_buf_set_name(notes, "dsh://chat-notes")
vim.api.nvim_buf_set_lines(notes, 0, -1, false, { "my notes" })
local chat = H.dsh.chat_buf()
H.eq(chat ~= notes, true, "the chat is its own buffer")
H.eq(vim.api.nvim_buf_get_name(chat), "dsh://chat", "named dsh://chat")
H.eq(vim.api.nvim_buf_get_lines(notes, 0, -1, false), { "my notes" }, "the other buffer keeps its text")
print("buffers_spec ok")
