"""Pure rules of workq: phases, transitions, plan files. No database, no transport."""
