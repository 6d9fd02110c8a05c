-- The line of prompts without dsh (dsh.queue): queued and steered prompts
-- wait behind the running turn, a steer lands, the next queued one starts
-- when the turn ends (a steer that never landed in its place), a refused
-- one leaves the line, cancel drops them all; then the chat shows the
-- waiting ones as virtual lines, never as buffer text.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local queue = require("dsh.queue")

local function line(q)
  return vim.tbl_map(function(p)
    return p.delivery .. ":" .. p.text
  end, q.waiting)
end

local q = queue.new()
H.eq(q:busy(), false, "idle")
local first, starts = q:send("first", "steer")
H.eq({ starts, first.delivery, first.state }, { true, "queue", "running" }, "a steer with nothing running is a prompt")
local second = q:send("second")
local steer = q:send("look at b.rs", "steer")
local third = q:send("third")
local late = q:send("also c.rs", "steer")
H.eq(line(q), { "queue:second", "steer:look at b.rs", "queue:third", "steer:also c.rs" }, "waiting in order")

-- dsh puts a steer into the turn: the one with that text.
H.eq(q:landed("look at b.rs"), steer, "landed by its text")
H.eq(steer.state, "landed", "landed")
H.eq(q:landed("a user message nobody sent") ~= nil, true, "else the first steer")
H.eq(line(q), { "queue:second", "queue:third" }, "steers left the line")
H.eq(q:landed("again"), nil, "no steer waits")

-- The steer's answer comes with the turn's end; the running prompt's end
-- starts the next.
H.eq(q:answered(steer), nil, "a landed steer's answer starts nothing")
H.eq(q:answered(first), second, "the next starts")
H.eq({ q.running, second.state }, { second, "running" }, "second runs")

-- A steer the turn ends before reaching runs in its place in line.
local unreached = q:send("too late", "steer")
H.eq(q:answered(second), third, "third")
H.eq(q:answered(third), unreached, "the unreached steer runs")
H.eq(unreached.delivery, "queue", "as an ordinary prompt")

-- A prompt refused while waiting (dsh's line is full) leaves the line.
local refused = q:send("seventeenth")
H.eq(q:answered(refused), nil, "refused")
H.eq(line(q), {}, "not waiting")

-- Cancel: every waiting prompt is dropped; their answers start nothing.
local a, b = q:send("a"), q:send("b", "steer")
H.eq(#q:cancel(), 2, "dropped")
H.eq(q:answered(b), nil, "dropped steer")
H.eq(q:answered(unreached), nil, "the cancelled turn ends")
H.eq(q:answered(a), nil, "dropped prompt")
H.eq(q:busy(), false, "idle after cancel")
H.eq(late.state, "landed", "the second steer had landed")

-- The chat shows waiting prompts under its last line, as virtual lines.
local chat = require("dsh.chat").new()
chat:lines({ "## You", "first" })
local r = queue.new()
r:send("first")
r:send("second\nwith more")
r:send("steer me", "steer")
chat:set_pending(r.waiting)
H.eq(chat:pending_lines(), { "⏳ queued: second …", "↪ steering: steer me" }, "pending lines")
chat:stream("text", "streamed")
H.eq(chat:text(), "## You\nfirst\nstreamed", "not text of the buffer")
local marks = vim.api.nvim_buf_get_extmarks(chat.buf, -1, 0, -1, { details = true, type = "virt_lines" })
H.eq(marks[#marks][2], 2, "under the last line, after an edit")
chat:set_pending({})
H.eq(chat:pending_lines(), {}, "cleared")
print("prompts_spec ok")
