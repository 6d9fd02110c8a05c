-- Prompts sent while a turn runs, through the real dsh: `:DshSteer` puts
-- one into the running turn (it shows where it lands: after the tool
-- call, before the reply it changed), `:Dsh` queues one (its turn follows);
-- both show as pending until then. `:DshCancel` ends the turn and every
-- prompt waiting (each answered cancelled; none shown as sent).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")

local dones = {}
H.dsh.on("done", function(payload)
  dones[#dones + 1] = payload
end)
local function pending_lines()
  local ns = vim.api.nvim_get_namespaces()["dsh_chat_pending"]
  local out = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(H.dsh.chat_buf(), ns, 0, -1, { details = true })) do
    for _, line in ipairs(mark[4].virt_lines or {}) do
      out[#out + 1] = line[1][1]
    end
  end
  return out
end
local function wait_text(text)
  H.wait(("%q in the chat"):format(text), function()
    return H.chat():find(text, 1, true) ~= nil
  end)
end

vim.cmd("Dsh read a.txt")
wait_text("Looking")
vim.cmd("DshSteer also check b.txt")
vim.cmd("Dsh and then summarize")
H.eq(H.dsh.state().pending, {
  { text = "also check b.txt", delivery = "steer" },
  { text = "and then summarize", delivery = "queue" },
}, "both wait")
H.eq(pending_lines(), { "↪ steering: also check b.txt", "⏳ queued: and then summarize" }, "shown as pending")
H.eq(H.chat():find("also check b.txt", 1, true), nil, "not in the chat's text yet")

H.wait("three answers", function()
  return #dones == 3
end)
for _, done in ipairs(dones) do
  H.eq(done.stopReason, "end_turn", "answer to " .. done.text)
end
H.eq(dones[3].text, "and then summarize", "the queued prompt is answered last")
H.eq(H.dsh.state().pending, {}, "nothing waits")
H.eq(pending_lines(), {}, "nothing shown as pending")
local chat = H.chat()
local function at(text)
  return assert(chat:find(text, 1, true), text .. " not in the chat:\n" .. chat)
end
assert(at("## You\nread a.txt") < at("Looking at a.txt."), "the first prompt")
assert(at("Looking at a.txt.") < at("Read a.txt"), "the tool call")
assert(at("Read a.txt") < at("## You\nalso check b.txt"), "the steer lands after the tool call")
assert(at("## You\nalso check b.txt") < at("Checked both."), "before the reply it steered")
assert(at("Checked both.") < at("## You\nand then summarize"), "the queued prompt's turn follows")
assert(at("## You\nand then summarize") < at("Summary done."), "with its reply")

-- Cancel with prompts waiting.
dones = {}
vim.cmd("Dsh think for a long time")
wait_text("still thinking")
vim.cmd("Dsh queued a")
vim.cmd("DshSteer steered b")
H.eq(#H.dsh.state().pending, 2, "two wait")
vim.cmd("DshCancel")
H.eq(H.dsh.state().pending, {}, "dropped at once")
H.wait("every prompt answered", function()
  return #dones == 3
end, 5000)
for _, done in ipairs(dones) do
  H.eq(done.stopReason, "cancelled", "cancelled: " .. done.text)
end
H.eq(H.chat():find("## You\nqueued a", 1, true), nil, "a dropped prompt is never shown as sent")
H.eq(H.dsh.state().busy, false, "idle")
print("steer_spec ok")
