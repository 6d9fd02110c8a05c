-- A fresh Neovim finds the earlier session by a word of its reply with
-- :DshSearch (`dsh sessions search --json` as a child), picks it and gets
-- its transcript back; words no session holds say so.
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
print("search_spec ok")
