-- Argo CD health check for PtahSchema and PtahMigration (operator.ptah.run), one script for both kinds: install it
-- under resource.customizations.health.operator.ptah.run_PtahSchema and ..._PtahMigration (see README.md).
-- It reads only what the controller publishes: spec.suspend, metadata.generation, status.observedGeneration,
-- status.phase, status.unresolvedRun and the Ready condition (see docs/readiness.md for the contract).
local hs = { status = "Progressing", message = "" }

local function condition(status, kind)
  if status == nil or status.conditions == nil then return nil end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then return c end
  end
  return nil
end

local spec = obj.spec or {}
local status = obj.status
local generation = obj.metadata and obj.metadata.generation or nil
local ready = condition(status, "Ready")
if ready ~= nil and ready.message ~= nil then hs.message = ready.message end

-- A status is current only when the controller has seen this generation of the spec (status.observedGeneration)
-- and the Ready condition was written for it too; otherwise the verdicts below describe an older spec.
local current = status ~= nil and generation ~= nil and status.observedGeneration == generation
  and (ready == nil or ready.observedGeneration == nil or ready.observedGeneration == generation)

if spec.suspend == true then
  -- Suspended first: a person paused it, and a proof it still owes waits holding its realm (see the message).
  hs.status = "Suspended"
  if hs.message == "" then hs.message = "spec.suspend is true" end
  return hs
end

if status == nil then
  hs.message = "waiting for the controller's first pass"
  return hs
end

if status.unresolvedRun ~= nil then
  -- An Apply nobody could account for waits for a person, whatever generation the spec is at.
  hs.status = "Degraded"
  local u = status.unresolvedRun
  hs.message = "unresolved " .. tostring(u.outcome) .. " run " .. tostring(u.operationID) ..
    " waits for a History reading that finds nothing pending or a PtahMigrationRunAcknowledgment" ..
    (hs.message ~= "" and (": " .. hs.message) or "")
  return hs
end

if current and (status.phase == "Blocked" or status.phase == "Failed") then
  hs.status = "Degraded"
  return hs
end

if current and ready ~= nil and ready.status == "True" and status.activeOperation == nil
  and status.pendingObservation == nil then
  hs.status = "Healthy"
  return hs
end

-- Everything else is work under way or awaited: a claim in flight, a pending observation, a plan awaiting
-- approval, or a spec generation the controller has not observed yet.
if not current then
  hs.message = "the controller has not observed generation " .. tostring(generation) .. " yet" ..
    (hs.message ~= "" and ("; last: " .. hs.message) or "")
end
return hs
