-- dsh writes the file it names, never a buffer whose name merely contains
-- that name (issue 23, item 11): with `.pre-commit-config.yaml` open, an
-- accept-edits write of `.pre-commit-config` creates that new file and leaves
-- the yaml buffer and file alone.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local cwd = vim.fn.getcwd()
local yaml_text = H.read(cwd .. "/.pre-commit-config.yaml")
assert(yaml_text, "the workspace has .pre-commit-config.yaml")

vim.cmd.edit(".pre-commit-config.yaml")
local yaml = vim.api.nvim_get_current_buf()
local yaml_lines = vim.api.nvim_buf_get_lines(yaml, 0, -1, false)

local asks = 0
H.dsh.on("permission", function()
  asks = asks + 1
end)
H.answer_selects(function()
  return nil -- accept-edits should not ask; a prompt here is refused
end)
H.dsh.config.mode = "accept-edits"

local done = H.prompt("write .pre-commit-config")
H.eq(done.stopReason, "end_turn", "the turn")
H.eq(H.dsh.state().mode, "accept-edits", "mode")
H.eq(asks, 0, "no permission asked in accept-edits")
H.contains(H.chat(), "✓ Write .pre-commit-config", "the write succeeded")
H.eq(vim.api.nvim_buf_get_lines(yaml, 0, -1, false), yaml_lines, "the yaml buffer is unchanged")
H.eq(vim.bo[yaml].modified, false, "and unmodified")
H.eq(H.read(cwd .. "/.pre-commit-config.yaml"), yaml_text, "the yaml file is unchanged")
H.eq(H.read(cwd .. "/.pre-commit-config"), "written: by dsh\n", "the new file is written")
print("write_exact_spec ok")
