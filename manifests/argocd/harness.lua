-- Runs health.lua outside Argo CD on one object read as JSON from stdin, and prints "<status>\t<message>":
--   kubectl get ptahschema catalog -o json | lua5.4 manifests/argocd/harness.lua manifests/argocd/health.lua
-- The tests use it to check the script against status objects the suite produced. The JSON decoder is minimal but
-- complete for what the API server writes (objects, arrays, strings with escapes, numbers, true, false, null).
local script = arg[1] or "health.lua"
local text = io.read("a")
local pos = 1

local function fail(what) error(("JSON: %s at byte %d"):format(what, pos), 0) end
local function skip() pos = text:find("[^ \t\r\n]", pos) or (#text + 1) end

local decode

local function utf8char(code) return utf8.char(code) end

local function decodeString()
  pos = pos + 1
  local parts = {}
  while true do
    local c = text:sub(pos, pos)
    if c == "" then fail("unterminated string") end
    if c == '"' then pos = pos + 1; break end
    if c == "\\" then
      local e = text:sub(pos + 1, pos + 1)
      local simple = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
      if simple[e] then
        parts[#parts + 1] = simple[e]; pos = pos + 2
      elseif e == "u" then
        local code = tonumber(text:sub(pos + 2, pos + 5), 16) or fail("bad \\u escape")
        pos = pos + 6
        if code >= 0xD800 and code <= 0xDBFF and text:sub(pos, pos + 1) == "\\u" then
          local low = tonumber(text:sub(pos + 2, pos + 5), 16) or fail("bad surrogate")
          code = 0x10000 + (code - 0xD800) * 0x400 + (low - 0xDC00)
          pos = pos + 6
        end
        parts[#parts + 1] = utf8char(code)
      else
        fail("bad escape")
      end
    else
      local stop = text:find('["\\]', pos) or (#text + 1)
      parts[#parts + 1] = text:sub(pos, stop - 1)
      pos = stop
    end
  end
  return table.concat(parts)
end

function decode()
  skip()
  local c = text:sub(pos, pos)
  if c == "{" then
    local t = {}
    pos = pos + 1; skip()
    if text:sub(pos, pos) == "}" then pos = pos + 1; return t end
    while true do
      skip()
      if text:sub(pos, pos) ~= '"' then fail("expected a key") end
      local k = decodeString(); skip()
      if text:sub(pos, pos) ~= ":" then fail("expected :") end
      pos = pos + 1
      t[k] = decode(); skip()
      local d = text:sub(pos, pos); pos = pos + 1
      if d == "}" then return t end
      if d ~= "," then fail("expected , or }") end
    end
  elseif c == "[" then
    local t = {}
    pos = pos + 1; skip()
    if text:sub(pos, pos) == "]" then pos = pos + 1; return t end
    while true do
      t[#t + 1] = decode(); skip()
      local d = text:sub(pos, pos); pos = pos + 1
      if d == "]" then return t end
      if d ~= "," then fail("expected , or ]") end
    end
  elseif c == '"' then
    return decodeString()
  elseif text:sub(pos, pos + 3) == "true" then pos = pos + 4; return true
  elseif text:sub(pos, pos + 4) == "false" then pos = pos + 5; return false
  elseif text:sub(pos, pos + 3) == "null" then pos = pos + 4; return nil
  else
    local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos) or fail("unexpected character")
    pos = pos + #num
    return math.tointeger(tonumber(num)) or tonumber(num)
  end
end

obj = decode()
local hs = assert(loadfile(script))()
io.write(tostring(hs.status), "\t", tostring(hs.message), "\n")
