-- A fresh Neovim finds the earlier session by a word of its reply with
-- :DshSearch (`dsh sessions search --json` as a child), picks it and gets
-- its transcript back; words no session holds say so; a hostile title and
-- line are shown escaped, in the search's picker and :DshSessions'.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local wanted = assert(os.getenv("DSH_TEST_SESSION"), "DSH_TEST_SESSION")

local notes = {}
vim.notify = function(msg)
  notes[#notes + 1] = msg
end

-- No session holds this word: nothing is offered.
local offered_none = true
H.answer_selects(function()
  offered_none = false
end)
vim.cmd("DshSearch wombat")
H.wait("no match to be said", function()
  return #notes > 0
end)
H.contains(notes[1], "no dsh session in ", "the note")
H.contains(notes[1], "matches wombat", "the note")
H.eq(offered_none, true, "nothing offered")

-- A word of the first reply: that session, with its title and the line.
local offered, line
H.answer_selects(function(items, opts)
  H.eq(opts.kind, "dsh.search", "select kind")
  offered = #items
  for i, item in ipairs(items) do
    if item.id == wanted then
      line = opts.format_item(item)
      return i
    end
  end
end)
vim.cmd("DshSearch refused asked")
H.wait("the session to load and show", function()
  return H.dsh.state().session_id == wanted
    and H.chat():find("Edited a.txt.", 1, true) ~= nil
    and #vim.fn.win_findbuf(H.dsh.chat_buf()) > 0
end)
H.eq(offered, 1, "hits offered")
H.contains(line, "write a note", "the title")
H.contains(line, "Refused, as you asked.", "the matching line")
H.contains(H.chat(), "✓ Edit a.txt", "the transcript")
-- A title and a line holding an escape sequence, a bell and bidirectional
-- controls (an override that would show "gpj.exe" as "exe.jpg"): written
-- out, nothing raw reaches the picker.
local raw = { "\27", "\7", "\226\128\174", "\226\128\172", "\226\129\166", "\226\129\169" }
local hostile
H.answer_selects(function(items, opts)
  hostile = { count = #items, line = opts.format_item(items[1]) }
end)
vim.cmd("DshSearch ocelot")
H.wait("the ocelot's hit", function()
  return hostile ~= nil
end)
H.eq(hostile.count, 1, "hits offered")
H.contains(
  hostile.line,
  [[  Where is the \x1b[31mocelot \u{202e}gpj.exe\u{202c} — The ocelot \x1b]0;pwned\x07 hid in \u{2066}the tree\u{2069}.]],
  "the escaped title and line"
)
for _, c in ipairs(raw) do
  H.eq(hostile.line:find(c, 1, true), nil, ("raw %q in the hit"):format(c))
end

-- :DshSessions shows the title so too.
local listed
H.answer_selects(function(items, opts)
  H.eq(opts.kind, "dsh.session", "select kind")
  listed = {}
  for _, item in ipairs(items) do
    listed[#listed + 1] = opts.format_item(item)
  end
end)
vim.cmd("DshSessions")
H.wait("the session list", function()
  return listed ~= nil
end)
H.eq(#listed, 2, "sessions listed")
local all = table.concat(listed, "\n")
H.contains(all, [[  Where is the \x1b[31mocelot \u{202e}gpj.exe\u{202c}]], "the escaped title")
for _, c in ipairs(raw) do
  H.eq(all:find(c, 1, true), nil, ("raw %q in the list"):format(c))
end
print("search_spec ok")
