"""daemon: the supervisor process. Its loop and verbs, the worker processes' among them
(supervisor), one slot per worker process (workerslots), a loop that stops going round said with
where it waits (stalls), recovery after a crash (recovery), periodic housekeeping (housekeeping),
sd_notify (systemd), what a reload cannot change (reloading), its calls on the job table off the
main loop (tablechores).

May import every stage below it: work, ops, batches, watch, filing, faces, media, config, spec,
store, fs, errors, logs. Only cli imports daemon."""
