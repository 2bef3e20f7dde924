-- Puts back a wakeup token that a process took while none of its workers
-- was waiting any more, so that another process's worker gets it.
signal()
return 1
