"""filing: where a finished job's files go. The filing plan and its execution (plan), placing a
file without ever replacing one it did not write (placing), the share's availability and marker
(shares), waiting for a share that went away (sharewait), and share paths per host (sharepaths).

May import: config, spec, store, fs, errors."""
