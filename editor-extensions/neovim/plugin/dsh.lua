-- dsh.nvim: commands only; the plugin loads on first use.
if vim.g.loaded_dsh or vim.fn.has("nvim-0.10") == 0 then
  return
end
vim.g.loaded_dsh = true

local function dsh()
  return require("dsh")
end

local command = vim.api.nvim_create_user_command

command("Dsh", function(args)
  if args.args ~= "" then
    dsh().prompt(args.args)
  else
    dsh().open()
  end
end, { nargs = "*", desc = "dsh: open the chat, or send TEXT (queued while a turn runs)" })
command("DshSteer", function(args)
  if args.args ~= "" then
    dsh().steer(args.args)
    return
  end
  vim.ui.input({ prompt = "dsh, steer: " }, function(text)
    if text and vim.trim(text) ~= "" then
      dsh().steer(text)
    end
  end)
end, { nargs = "*", desc = "dsh: send TEXT into the running turn" })
command("DshNew", function()
  dsh().new_session(function()
    dsh().open()
  end)
end, { desc = "dsh: start a new session" })
command("DshSessions", function()
  dsh().sessions()
end, { desc = "dsh: load a stored session" })
command("DshSearch", function(args)
  dsh().search(args.args)
end, { nargs = "+", desc = "dsh: load a stored session of this directory that contains the words" })
command("DshCancel", function()
  dsh().cancel()
end, { desc = "dsh: cancel the running turn and the prompts waiting" })
command("DshMode", function(args)
  dsh().set_mode(args.args)
end, {
  nargs = 1,
  desc = "dsh: set the permission mode",
  complete = function()
    local choices = dsh().choices("mode")
    return #choices > 0 and choices or { "read-only", "plan", "ask", "accept-edits", "full-access" }
  end,
})
command("DshModel", function(args)
  dsh().set_model(args.args)
end, {
  nargs = 1,
  desc = "dsh: set the model",
  complete = function()
    return dsh().choices("model")
  end,
})
command("DshDiff", function()
  dsh().diff()
end, { desc = "dsh: show the latest edit as a diff" })
command("DshStop", function()
  dsh().stop()
end, { desc = "dsh: stop the agent" })
