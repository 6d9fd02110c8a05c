-- :checkhealth dsh
local M = {}

function M.check()
  local health = vim.health
  health.start("dsh.nvim")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is needed")
  end
  local dsh = require("dsh")
  local cmd = dsh.config.cmd[1]
  if vim.fn.executable(cmd) == 1 then
    local version = vim.system({ cmd, "--version" }, { text = true }):wait()
    health.ok(("%s: %s"):format(vim.fn.exepath(cmd), vim.trim(version.stdout or "")))
  else
    health.error(cmd .. " is not executable", { "Install dsh, or set require('dsh').setup({cmd = {'/path/to/dsh', 'acp'}})" })
  end
  local state = dsh.state()
  if state.session_id then
    health.info(("session %s (mode %s, model %s)"):format(state.session_id, state.mode or "?", state.model or "?"))
  end
  local log = dsh.log()
  if log ~= "" then
    health.info("dsh stderr (last lines):\n" .. log:sub(-2000))
  end
end

return M
