-- Helpers for the dsh.nvim tests: plain `nvim --clean --headless -l` scripts
-- with assertions, run by tests/e2e/neovim.rs against the real `dsh acp`
-- (DSH_BIN) and the scripted model (DSH_PROVIDER=replay, DSH_REPLAY_FILE).
local H = {}

local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.runtimepath:prepend(root)
vim.cmd("runtime plugin/dsh.lua")
vim.o.swapfile = false

H.dsh = require("dsh")
H.dsh.setup({ cmd = { assert(os.getenv("DSH_BIN"), "DSH_BIN"), "acp" } })

function H.eq(actual, expected, what)
  if not vim.deep_equal(actual, expected) then
    error(("%s: expected %s, got %s"):format(what or "value", vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

function H.contains(haystack, needle, what)
  if not tostring(haystack):find(needle, 1, true) then
    error(("%s: %q not found in:\n%s"):format(what or "text", needle, tostring(haystack)), 2)
  end
end

function H.wait(what, cond, ms)
  if not vim.wait(ms or 15000, cond, 10) then
    error("timed out waiting for " .. what .. "\nchat:\n" .. H.chat() .. "\ndsh stderr:\n" .. H.dsh.log(), 2)
  end
end

function H.chat()
  return table.concat(vim.api.nvim_buf_get_lines(H.dsh.chat_buf(), 0, -1, false), "\n")
end

--- Answers vim.ui.select prompts with `pick(items, opts)` → index or nil.
function H.answer_selects(pick)
  vim.ui.select = function(items, opts, on_choice)
    local index = pick(items, opts)
    vim.schedule(function()
      on_choice(index and items[index] or nil, index)
    end)
  end
end

--- Prompts and waits for the turn to end; the `done` payload.
function H.prompt(text)
  local done
  local off = H.dsh.on("done", function(payload)
    done = payload
  end)
  H.dsh.prompt(text)
  H.wait("the turn to end", function()
    return done ~= nil
  end)
  off()
  return done
end

function H.read(path)
  local file = io.open(path, "rb")
  if not file then
    return nil
  end
  local text = file:read("*a")
  file:close()
  return text
end

function H.out(text)
  local path = os.getenv("DSH_TEST_OUT")
  if path then
    local file = assert(io.open(path, "w"))
    file:write(text)
    file:close()
  end
end

return H
