"""filing: where a finished job's files go, and a refused or re-dropped file. What it offers, each
name from the module it lives in:

- plan: the filing plan (`Plan`; `plan_done`, `plan_failed`, `plan_duplicate`) and the one way to
  carry it out, `execute_plan`; the filings ledger it writes (`Ledger`), finding and restoring a
  failed original;
- reports: the error reports beside a file in failed/ (`error_report`, `duplicate_report`), their
  retry advice, whose report one is, one a crash left unwritten;
- placing: placing one file without replacing one it did not write (`place_file`), and the names
  filing gives (`candidate_names`, `with_job_id`, `report_name`, `TEMP_PREFIX`);
- staging: taking an original out of its inbox name so that a stale worker cannot move it;
- complete: finishing a done plan whose worker died; leftovers: copies a dead writer left;
- shares, sharewait, sharepaths: the share's availability and marker, waiting for it, its paths per host.

May import: config, spec, store, fs, errors."""
