-- Questions without dsh: dsh.form (an elicitation form's schema → the
-- questions, the pickers' items, the answer's content) and the asking
-- itself (dsh.client.create_elicitation) with vim.ui.select/input stubbed:
-- accept, decline, cancel, a request dsh withdraws, and forms that cannot
-- be shown.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local form = require("dsh.form")
local client = require("dsh.client")

-- What dsh sends for ask_user_question: the message is the questions, one
-- per line; no field is required (an empty one is a skipped question).
-- `required` (a list) makes some required.
local function request(required)
  local params = vim.json.decode(
    [[{
    "sessionId": "s1", "toolCallId": "q1", "mode": "form",
    "message": "Which database?\nWhat should the service be called?\nWhich extras?",
    "requestedSchema": {
      "type": "object",
      "properties": {
        "db": {"type": "string", "title": "Database", "description": "Which database?",
               "oneOf": [{"const": "Postgres (Recommended)", "title": "Postgres (Recommended)", "description": "Scales."},
                         {"const": "SQLite", "title": "SQLite"}]},
        "db_other": {"type": "string", "title": "Database: other", "description": "Your own answer, instead of a choice above (optional)."},
        "extras": {"type": "array", "title": "Which extras?",
                   "items": {"type": "string", "enum": ["metrics", "tracing", "auth"]}},
        "extras_other": {"type": "string"},
        "name": {"type": "string", "title": "What should the service be called?"}
      }
    }
  }]],
    { luanil = { object = true, array = true } }
  )
  params.requestedSchema.required = required
  return params
end

-- parse: in the message's order (not the fields' names: db, extras, name);
-- `_other` folded into its question.
local function ids(qs)
  return vim.tbl_map(function(q)
    return { q.id, q.kind, q.required, q.other }
  end, qs)
end
H.eq(
  ids(assert(form.parse(request()))),
  { { "db", "single", false, "db_other" }, { "name", "text", false, nil }, { "extras", "multi", false, "extras_other" } },
  "questions in the message's order"
)
-- Without the questions in the message: required ones first, then by name.
local other = request({ "name" })
other.message = "Please answer."
H.eq(vim.tbl_map(function(q)
  return q.id
end, assert(form.parse(other))), { "name", "db", "extras" }, "required first, then by name")
local questions = assert(form.parse(request({ "db", "name" })))
H.eq(
  ids(questions),
  { { "db", "single", true, "db_other" }, { "name", "text", true, nil }, { "extras", "multi", false, "extras_other" } },
  "required"
)
local db, name, extras = questions[1], questions[2], questions[3]
H.eq(db.title, "Database", "title")
H.eq(db.options[1], { value = "Postgres (Recommended)", label = "Postgres (Recommended)", description = "Scales." }, "titled option")
H.eq(extras.options[3], { value = "auth", label = "auth" }, "plain option")
H.eq(form.prompt(db, 1, 3), "dsh [1/3] Database — Which database?", "prompt")
H.eq(form.prompt(extras, 3, 3), "dsh [3/3] Which extras? (several)", "multi prompt")

-- The pickers' items.
local function labels(items)
  return vim.tbl_map(function(item)
    return item.label
  end, items)
end
H.eq(labels(form.choices(db)), { "Postgres (Recommended) — Scales.", "SQLite", "Other…", "Decline to answer" }, "required choice")
H.eq(labels(form.choices(assert(form.parse(request()))[1])), { "Postgres (Recommended) — Scales.", "SQLite", "Other…", "Skip", "Decline to answer" }, "optional choice")
H.eq(labels(form.checklist(extras, { tracing = true }, "gRPC")), {
  "Done (2 chosen)",
  "[ ] metrics",
  "[x] tracing",
  "[ ] auth",
  "[x] Other: gRPC",
  "Decline to answer",
}, "checklist")
local optional = assert(form.parse({
  mode = "form",
  requestedSchema = { properties = { ok = { type = "boolean", title = "Go on?" }, n = { type = "integer", minimum = 1, maximum = 9 } } },
}))
H.eq(vim.tbl_map(function(q)
  return q.id
end, optional), { "n", "ok" }, "no required: by name")
H.eq(labels(form.choices(optional[2])), { "Yes", "No", "Skip", "Decline to answer" }, "optional yes/no")

-- Typed answers and bounds.
H.eq({ form.typed_answer(name, "  ") }, { nil, "an answer is required" }, "required text left empty")
H.eq({ form.typed_answer(name, " billing ") }, { { text = "billing" } }, "text trimmed")
H.eq({ form.typed_answer(optional[1], "") }, {}, "optional number left empty: skipped")
H.eq({ form.typed_answer(optional[1], "2.5") }, { nil, '"2.5" is not a whole number' }, "integer")
H.eq({ form.typed_answer(optional[1], "12") }, { { value = 12 }, "n: at most 9" }, "maximum")
H.eq(form.multi_answer(extras, {}, nil), nil, "nothing checked: skipped")
H.eq(form.multi_answer(extras, { auth = true, metrics = true }, nil), { values = { "metrics", "auth" } }, "options' order")
local bounded = assert(form.parse({
  mode = "form",
  requestedSchema = { properties = { x = { type = "array", minItems = 2, items = { enum = { "a", "b" } } } }, required = { "x" } },
}))[1]
H.eq(form.problem(bounded, nil), "x: an answer is required", "required multi")
H.eq(form.problem(bounded, { values = { "a" } }), "x: choose at least 2", "minItems")

-- The answer's content: Other replaces a single choice; skipped questions
-- are left out; nothing answered is still an object.
local answers = { db = { other = "CockroachDB" }, name = { text = "billing" }, extras = { values = { "metrics" }, other = "gRPC" } }
H.eq(form.content(questions, answers), { db_other = "CockroachDB", name = "billing", extras = { "metrics" }, extras_other = "gRPC" }, "content")
H.eq(vim.json.encode(form.content(questions, {})), "{}", "empty content is an object")
H.eq(form.summary(questions, { db = { value = "SQLite" }, name = { text = "billing" } }), {
  "Database: SQLite",
  "What should the service be called?: billing",
  "Which extras?: (skipped)",
}, "summary")
H.eq(form.describe(extras, answers.extras), "metrics, Other: gRPC", "describe")

-- Forms that cannot be shown.
H.eq({ form.parse({ mode = "url", url = "https://x" }) }, { nil, "not a form (mode url)" }, "url mode")
H.eq({ form.parse({ mode = "form", requestedSchema = { properties = { f = { type = "file" } }, required = { "f" } } }) }, { nil, 'field "f" has type file' }, "unknown required")
H.eq(#assert(form.parse({ mode = "form", requestedSchema = { properties = { f = { type = "file" }, t = { type = "string" } } } })), 1, "unknown optional left out")

-- The asking, with the pickers scripted: each step answers one picker.
local function run(steps, params)
  local shown, responses, asked, answered, cancel = {}, {}, nil, nil, nil
  local function next_step(kind, prompt, items)
    local step = table.remove(steps, 1)
    assert(step, "an unexpected " .. kind .. ": " .. prompt)
    shown[#shown + 1] = { kind = kind, prompt = prompt, items = items and labels(items) }
    return step
  end
  vim.ui.select = function(items, opts, on_choice)
    H.eq(opts.kind, "dsh.question", "select kind")
    local step = next_step("select", opts.prompt, items)
    if step == "esc" then
      return on_choice(nil)
    end
    for i, item in ipairs(items) do
      if opts.format_item(item) == step then
        return on_choice(item, i)
      end
    end
    error("no item " .. step .. " in " .. vim.inspect(labels(items)))
  end
  vim.ui.input = function(opts, on_confirm)
    local step = next_step("input", opts.prompt)
    on_confirm(step ~= "esc" and step or nil)
  end
  client.create_elicitation(params or request({ "db", "name" }), function(result)
    responses[#responses + 1] = result
  end, function(fn)
    cancel = fn
  end, {
    notify = function() end,
    asked = function(_, qs)
      asked = #qs
    end,
    answered = function(_, _, action, a)
      answered = { action = action, answers = a }
    end,
  })
  return { shown = shown, responses = responses, asked = asked, answered = answered, cancel = cancel, left = steps }
end

-- Accept: Other… for the choice (an empty Other goes back to the list
-- first), the name (asked again when left empty), two extras toggled and
-- one untoggled, then Done.
local r = run({
  "Other…", "", "Other…", "CockroachDB", -- db
  "", "billing", -- name
  "[ ] metrics", "[ ] auth", "[ ] tracing", "[x] auth", "Done (2 chosen)", -- extras
})
H.eq(r.left, {}, "every step used")
H.eq(r.responses, { { action = "accept", content = { db_other = "CockroachDB", name = "billing", extras = { "metrics", "tracing" } } } }, "accepted")
H.eq(r.asked, 3, "asked hook")
H.eq(r.answered.action, "accept", "answered hook")
H.eq(r.shown[1].prompt, "dsh [1/3] Database — Which database?", "first prompt")
H.eq(r.shown[6].prompt, "dsh [2/3] What should the service be called?: ", "asked again after an empty answer")

-- Decline from any picker; Esc (dismissed) cancels; an input dismissed
-- cancels too.
r = run({ "SQLite", "billing", "Decline to answer" })
H.eq(r.responses, { { action = "decline" } }, "declined")
-- dsh's form (nothing required): Skip, and an empty answer skips.
r = run({ "Skip", "", "Done (0 chosen)" }, request())
H.eq(r.responses, { { action = "accept", content = vim.empty_dict() } }, "all skipped")
r = run({ "esc" })
H.eq(r.responses, { { action = "cancel" } }, "dismissed")
H.eq(r.answered.action, "cancel", "answered: cancel")
r = run({ "SQLite", "esc" })
H.eq(r.responses, { { action = "cancel" } }, "input dismissed")

-- dsh withdraws the request ($/cancel_request) while a picker is open:
-- cancel is answered once; the picker's late answer is ignored.
local late
vim.ui.select = function(items, _, on_choice)
  late = function()
    on_choice(items[2])
  end
end
local responses, cancel = {}, nil
client.create_elicitation(request({ "db", "name" }), function(result)
  responses[#responses + 1] = result
end, function(fn)
  cancel = fn
end, { notify = function() end, asked = function() end, answered = function() end })
cancel()
late()
H.eq(responses, { { action = "cancel" } }, "withdrawn")

-- A picker that fails: cancelled, never answered.
vim.ui.select = function()
  error("a broken picker")
end
responses = {}
local notes = {}
client.create_elicitation(request(), function(result)
  responses[#responses + 1] = result
end, function() end, {
  notify = function(msg)
    notes[#notes + 1] = msg
  end,
  asked = function() end,
  answered = function() end,
})
H.eq(responses, { { action = "cancel" } }, "a broken picker cancels")
H.contains(notes[1], "a broken picker", "and says why")

-- A form that cannot be shown is declined, never answered.
r = run({}, { sessionId = "s1", mode = "form", message = "?", requestedSchema = { properties = { f = { type = "file" } }, required = { "f" } } })
H.eq(r.responses, { { action = "decline" } }, "unshowable form declined")

print("form_spec ok")
