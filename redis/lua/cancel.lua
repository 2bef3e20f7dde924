-- ARGV: nonce. For a Get whose context ended while its get script, sent
-- with nonce, had not answered: whichever of the two runs first wins. If
-- the get script ran and leased a key for nonce, returns that key (the Get
-- is to hand it out); else marks nonce in GRANTS with a value no lease of
-- nonce has, so that the get script grants nothing to it when it runs,
-- and returns 0.
local nonce = ARGV[1]
local key = redis.call('HGET', GRANTS, nonce)
if key then
  if leased_to(key, nonce) then return {key} end
  return 0
end
redis.call('HSET', GRANTS, nonce, '')
return 0
