-- dsh reads the file it names, never a buffer whose name merely contains
-- that name (issue 23, item 11): with `config.local.txt` open (unsaved
-- text in it), dsh's read of `config` gets config's text on disk; a read
-- of a file that does not exist is an error, not a neighbour's buffer.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local client = require("dsh.client")
local cwd = vim.fn.getcwd()
assert(H.read(cwd .. "/config"), "the workspace has config")

vim.cmd.edit("config.local.txt")
local buf = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "local secret, unsaved" })

-- Every fs/read_text_file answer the plugin gives dsh.
local answers = {}
local read = client.read_text_file
client.read_text_file = function(params, respond)
  read(params, function(result, err)
    answers[#answers + 1] = { path = params.path, result = result, err = err }
    respond(result, err)
  end)
end

local done = H.prompt("read config")
H.eq(done.stopReason, "end_turn", "the turn")
H.contains(H.chat(), "✓ Read config", "the read succeeded")
H.eq(#answers, 1, "dsh asked the editor once")
H.eq(answers[1].path, cwd .. "/config", "for config")
H.eq(answers[1].result, { content = "disk config\n" }, "config's text on disk, not the buffer's")

-- A file that does not exist (dsh checks the disk first, so this asks the
-- plugin directly): an error, never config.local.txt's buffer.
local missing
read({ path = cwd .. "/config.local" }, function(result, err)
  missing = { result = result, err = err }
end)
H.eq(missing.result, nil, "no text for a missing file")
H.contains(missing.err and missing.err.message, "cannot read " .. cwd .. "/config.local", "a not-found error")
H.eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false), { "local secret, unsaved" }, "the buffer is untouched")
print("read_exact_spec ok")
