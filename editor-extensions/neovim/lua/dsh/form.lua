---@mod dsh.form Questions in an `elicitation/create` form, and the answer.
---
--- Pure: no `vim.ui`, no buffers. `parse` turns the request's
--- `requestedSchema` into questions to ask one after the other; `choices`
--- and `checklist` are the items a picker shows; `content` builds the
--- `accept` answer. dsh's `ask_user_question` sends one property per
--- question (a string with `enum`/`oneOf` for a single choice, an array for
--- several, a plain string for free text) and, for a question with options,
--- a free-text `<id>_other` property, which is asked as that question's
--- "Other…" entry rather than as a question of its own.

local M = {}

---@class dsh.FormOption
---@field value string   what is sent
---@field label string   what is shown
---@field description string|nil

---@class dsh.Question
---@field id string
---@field title string
---@field description string|nil
---@field kind "single"|"multi"|"text"|"boolean"|"number"|"integer"
---@field options dsh.FormOption[]
---@field other string|nil   the free-text property answered by "Other…"
---@field required boolean
---@field schema table       the property's schema (bounds, default)

--- An answer: `{value = …}` (single, boolean, number), `{values = {…},
--- other = …}` (multi), `{other = …}` (single, answered with "Other…") or
--- `{text = …}` (text); nil: skipped.
---@alias dsh.Answer table|nil

local function str(value)
  return type(value) == "string" and value or nil
end

local function options_of(schema)
  local out = {}
  local titled = schema.oneOf or (type(schema.items) == "table" and schema.items.anyOf)
  local plain = schema.enum or (type(schema.items) == "table" and schema.items.enum)
  if type(titled) == "table" then
    for _, option in ipairs(titled) do
      if str(option.const) then
        out[#out + 1] = { value = option.const, label = str(option.title) or option.const, description = str(option.description) }
      end
    end
  elseif type(plain) == "table" then
    for _, value in ipairs(plain) do
      if str(value) then
        out[#out + 1] = { value = value, label = value }
      end
    end
  end
  return out
end

--- The question a property asks, or nil and why it cannot be asked.
local function question_of(id, schema, required)
  if type(schema) ~= "table" then
    return nil, ("field %q has no schema"):format(id)
  end
  local q = {
    id = id,
    title = str(schema.title) or id,
    description = str(schema.description),
    options = options_of(schema),
    required = required,
    schema = schema,
  }
  if schema.type == "string" then
    q.kind = #q.options > 0 and "single" or "text"
  elseif schema.type == "array" then
    if #q.options == 0 then
      return nil, ("field %q is a list without choices"):format(id)
    end
    q.kind = "multi"
  elseif schema.type == "boolean" or schema.type == "number" or schema.type == "integer" then
    q.kind = schema.type
  else
    return nil, ("field %q has type %s"):format(id, tostring(schema.type))
  end
  return q
end

--- The fields in the order to ask them. A JSON object's order does not
--- survive decoding, so: fields whose question (description, else title)
--- appears in the message, in the message's order (dsh's message is the
--- questions, one per line); then the required ones in `required`'s
--- order; then the rest by name.
---@return string[]
local function field_order(properties, required_list, message)
  local rank, n = {}, 0
  for _, id in ipairs(required_list) do
    if properties[id] ~= nil and not rank[id] then
      n = n + 1
      rank[id] = n
    end
  end
  local rest = {}
  for id in pairs(properties) do
    if not rank[id] then
      rest[#rest + 1] = id
    end
  end
  table.sort(rest)
  for _, id in ipairs(rest) do
    n = n + 1
    rank[id] = n
  end
  local at = {}
  for id, schema in pairs(properties) do
    local text = type(schema) == "table" and (str(schema.description) or str(schema.title))
    at[id] = text and text ~= "" and type(message) == "string" and message:find(text, 1, true) or math.huge
  end
  local order = vim.tbl_keys(rank)
  table.sort(order, function(a, b)
    if at[a] ~= at[b] then
      return at[a] < at[b]
    end
    return rank[a] < rank[b]
  end)
  return order
end

--- The questions of an `elicitation/create` request, in order (see
--- `field_order`). A required field of a type that cannot be asked makes
--- the whole form unaskable; an optional one is left out.
---@param params table
---@return dsh.Question[]|nil questions, string|nil why not
function M.parse(params)
  if params.mode ~= "form" then
    return nil, "not a form (mode " .. tostring(params.mode) .. ")"
  end
  local schema = params.requestedSchema
  if type(schema) ~= "table" or type(schema.properties) ~= "table" then
    return nil, "the form has no fields"
  end
  local properties = schema.properties
  local required_list = type(schema.required) == "table" and schema.required or {}
  local required = {}
  for _, id in ipairs(required_list) do
    required[id] = true
  end
  local order = field_order(properties, required_list, params.message)

  -- `<id>_other` beside a question with options is that question's "Other…".
  local folded = {}
  for _, id in ipairs(order) do
    local base = id:match("^(.+)_other$")
    local other, owner = properties[id], base and properties[base]
    if owner and type(other) == "table" and other.type == "string" and #options_of(other) == 0 and #options_of(owner) > 0 then
      folded[id] = base
    end
  end

  local questions = {}
  for _, id in ipairs(order) do
    if not folded[id] then
      local q, err = question_of(id, properties[id], required[id] == true)
      if q then
        questions[#questions + 1] = q
      elseif required[id] then
        return nil, err
      end
    end
  end
  for other, base in pairs(folded) do
    for _, q in ipairs(questions) do
      if q.id == base then
        q.other = other
      end
    end
  end
  if #questions == 0 then
    return nil, "the form has no field to ask"
  end
  return questions
end

--- The picker's prompt for question `i` of `n`.
---@param q dsh.Question
function M.prompt(q, i, n)
  local head = n > 1 and ("dsh [%d/%d] "):format(i, n) or "dsh: "
  local text = q.title
  if q.description and q.description ~= q.title then
    text = text .. " — " .. q.description
  end
  if q.kind == "multi" then
    text = text .. " (several)"
  end
  return head .. text
end

local function label_of(option)
  if option.description then
    return option.label .. " — " .. option.description
  end
  return option.label
end

--- Items for a single choice (a single-select or a yes/no): the options,
--- then "Other…" (when the question has one), "Skip" (when optional) and
--- "Decline to answer". Each item is `{label, value}` or `{label,
--- special = "other"|"skip"|"decline"}`.
---@param q dsh.Question
---@return table[]
function M.choices(q)
  local items = {}
  if q.kind == "boolean" then
    items = { { label = "Yes", value = true }, { label = "No", value = false } }
  else
    for _, option in ipairs(q.options) do
      items[#items + 1] = { label = label_of(option), value = option.value }
    end
  end
  if q.other then
    items[#items + 1] = { label = "Other…", special = "other" }
  end
  if not q.required then
    items[#items + 1] = { label = "Skip", special = "skip" }
  end
  items[#items + 1] = { label = "Decline to answer", special = "decline" }
  return items
end

--- Items for a multi-select as a checklist, asked again after every
--- toggle: "Done" first (so Enter right away accepts what is checked),
--- then each option with its box, "Other…" with its text, and "Decline to
--- answer".
---@param q dsh.Question
---@param picked table<string, boolean>
---@param other string|nil
---@return table[]
function M.checklist(q, picked, other)
  local count = 0
  for _, option in ipairs(q.options) do
    if picked[option.value] then
      count = count + 1
    end
  end
  if other then
    count = count + 1
  end
  local items = { { label = ("Done (%d chosen)"):format(count), special = "done" } }
  for _, option in ipairs(q.options) do
    items[#items + 1] = { label = (picked[option.value] and "[x] " or "[ ] ") .. label_of(option), value = option.value }
  end
  if q.other then
    items[#items + 1] = { label = other and ("[x] Other: " .. other) or "[ ] Other…", special = "other" }
  end
  items[#items + 1] = { label = "Decline to answer", special = "decline" }
  return items
end

--- A multi-select's answer from its checklist: the checked options in the
--- options' order, and the "Other…" text; nil when nothing is checked.
---@return dsh.Answer
function M.multi_answer(q, picked, other)
  local values = {}
  for _, option in ipairs(q.options) do
    if picked[option.value] then
      values[#values + 1] = option.value
    end
  end
  if #values == 0 and not other then
    return nil
  end
  return { values = values, other = other }
end

--- What typing `text` answers (a free-text, number or integer question):
--- the answer, or nil (empty: skipped), and a problem to show before
--- asking again.
---@return dsh.Answer, string|nil problem
function M.typed_answer(q, text)
  text = vim.trim(text or "")
  if text == "" then
    return nil, q.required and "an answer is required" or nil
  end
  if q.kind == "number" or q.kind == "integer" then
    local n = tonumber(text)
    if not n or (q.kind == "integer" and n ~= math.floor(n)) then
      return nil, ("%q is not %s"):format(text, q.kind == "integer" and "a whole number" or "a number")
    end
    local answer = { value = n }
    return answer, M.problem(q, answer)
  end
  local answer = { text = text }
  return answer, M.problem(q, answer)
end

--- What is wrong with `answer` for `q` (its schema's bounds), or nil.
---@param q dsh.Question
---@param answer dsh.Answer
---@return string|nil
function M.problem(q, answer)
  local s = q.schema
  if answer == nil then
    return q.required and (q.title .. ": an answer is required") or nil
  end
  if q.kind == "multi" then
    local n = #answer.values + (answer.other and 1 or 0)
    if type(s.minItems) == "number" and n < s.minItems then
      return ("%s: choose at least %d"):format(q.title, s.minItems)
    end
    if type(s.maxItems) == "number" and n > s.maxItems then
      return ("%s: choose at most %d"):format(q.title, s.maxItems)
    end
  elseif q.kind == "text" then
    local n = vim.fn.strchars(answer.text)
    if type(s.minLength) == "number" and n < s.minLength then
      return ("%s: at least %d characters"):format(q.title, s.minLength)
    end
    if type(s.maxLength) == "number" and n > s.maxLength then
      return ("%s: at most %d characters"):format(q.title, s.maxLength)
    end
  elseif q.kind == "number" or q.kind == "integer" then
    if type(s.minimum) == "number" and answer.value < s.minimum then
      return ("%s: at least %s"):format(q.title, s.minimum)
    end
    if type(s.maximum) == "number" and answer.value > s.maximum then
      return ("%s: at most %s"):format(q.title, s.maximum)
    end
  end
end

--- The `content` of an `accept`: one entry per answered question (a
--- skipped one is left out), "Other…" text under the question's
--- `<id>_other`. A single choice answered with "Other…" sends only the
--- text: it replaces the choice.
---@param questions dsh.Question[]
---@param answers table<string, dsh.Answer>
---@return table
function M.content(questions, answers)
  local content = vim.empty_dict()
  for _, q in ipairs(questions) do
    local a = answers[q.id]
    if a then
      if q.kind == "multi" then
        content[q.id] = a.values
      elseif a.text then
        content[q.id] = a.text
      elseif a.value ~= nil then
        content[q.id] = a.value
      end
      if a.other and q.other then
        content[q.other] = a.other
      end
    end
  end
  return content
end

--- One answer in words, for the chat.
---@param q dsh.Question
---@param a dsh.Answer
---@return string
function M.describe(q, a)
  if a == nil then
    return "(skipped)"
  end
  local labels = {}
  local function label(value)
    for _, option in ipairs(q.options) do
      if option.value == value then
        return option.label
      end
    end
    return tostring(value)
  end
  if q.kind == "multi" then
    for _, value in ipairs(a.values) do
      labels[#labels + 1] = label(value)
    end
  elseif a.text then
    labels[1] = a.text
  elseif q.kind == "boolean" then
    labels[1] = a.value and "Yes" or "No"
  elseif a.value ~= nil then
    labels[1] = label(a.value)
  end
  if a.other then
    labels[#labels + 1] = "Other: " .. a.other
  end
  return table.concat(labels, ", ")
end

--- The answers in words, one line per question.
---@return string[]
function M.summary(questions, answers)
  local lines = {}
  for _, q in ipairs(questions) do
    lines[#lines + 1] = ("%s: %s"):format(q.title, M.describe(q, answers[q.id]))
  end
  return lines
end

return M
