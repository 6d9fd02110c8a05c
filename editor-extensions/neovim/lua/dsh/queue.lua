---@mod dsh.queue The prompts of one session: the one whose turn runs, and
--- those sent while it runs.
---
--- Pure bookkeeping, mirroring what dsh does with them. A prompt sent while
--- a turn runs waits in dsh's line (FIFO): queued, it starts its own turn
--- when the turns ahead of it end; steered (`_meta.dsh.delivery =
--- "steer"`), dsh puts it into the running turn at its next step boundary
--- and sends it back as a `user_message_chunk` — it has *landed* — and
--- answers it when that turn ends. A steer the turn ended before reaching
--- runs as an ordinary prompt in its place in line. `session/cancel` ends
--- the running turn and every waiting prompt.

local M = {}

---@class dsh.Prompt
---@field id integer
---@field text string
---@field delivery "queue"|"steer"
---@field state "running"|"waiting"|"landed"|"done"

---@class dsh.Queue
---@field running dsh.Prompt|nil   the prompt whose turn runs
---@field waiting dsh.Prompt[]      sent while it runs, in order
---@field private next_id integer
local Queue = {}
Queue.__index = Queue

---@return dsh.Queue
function M.new()
  return setmetatable({ running = nil, waiting = {}, next_id = 0 }, Queue)
end

--- Whether a turn runs.
function Queue:busy()
  return self.running ~= nil
end

--- A prompt the user sends. With no turn running it starts one (a steer
--- too: there is nothing to steer); else it waits.
---@param text string
---@param delivery "queue"|"steer"|nil
---@return dsh.Prompt prompt, boolean starts whether its turn starts now
function Queue:send(text, delivery)
  self.next_id = self.next_id + 1
  local prompt = { id = self.next_id, text = text, delivery = delivery or "queue" }
  if not self.running then
    prompt.delivery, prompt.state = "queue", "running"
    self.running = prompt
    return prompt, true
  end
  prompt.state = "waiting"
  self.waiting[#self.waiting + 1] = prompt
  return prompt, false
end

--- dsh sent a user message into the running turn: the waiting steer it
--- is (the first with that text, else the first steer), now landed; nil
--- when none waits (a replayed or foreign message).
---@param text string
---@return dsh.Prompt|nil
function Queue:landed(text)
  if not self.running then
    return nil
  end
  local first
  for i, prompt in ipairs(self.waiting) do
    if prompt.delivery == "steer" then
      if prompt.text == text then
        table.remove(self.waiting, i)
        prompt.state = "landed"
        return prompt
      end
      first = first or i
    end
  end
  if first then
    local prompt = table.remove(self.waiting, first)
    prompt.state = "landed"
    return prompt
  end
end

--- dsh answered `prompt`. If its turn was the running one, the next
--- waiting prompt's turn starts (a steer that did not land runs as an
--- ordinary prompt): returned. A waiting prompt answered before its turn
--- (an error, or a cancel) leaves the line.
---@param prompt dsh.Prompt
---@return dsh.Prompt|nil next the prompt whose turn starts now
function Queue:answered(prompt)
  local was = prompt.state
  prompt.state = "done"
  if was == "waiting" then
    for i, p in ipairs(self.waiting) do
      if p == prompt then
        table.remove(self.waiting, i)
        break
      end
    end
    return nil
  end
  if was ~= "running" or self.running ~= prompt then
    return nil
  end
  self.running = table.remove(self.waiting, 1)
  if self.running then
    self.running.state, self.running.delivery = "running", "queue"
  end
  return self.running
end

--- `session/cancel`: the running turn ends, and every waiting prompt with
--- it. Returns the waiting ones, now dropped.
---@return dsh.Prompt[]
function Queue:cancel()
  local dropped = self.waiting
  self.waiting = {}
  for _, prompt in ipairs(dropped) do
    prompt.state = "done"
  end
  return dropped
end

--- dsh is gone: nothing runs, nothing waits.
function Queue:clear()
  if self.running then
    self.running.state = "done"
  end
  self.running = nil
  self:cancel()
end

return M
