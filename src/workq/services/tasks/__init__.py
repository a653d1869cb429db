"""Tool calls answered later (the MCP Tasks extension): the tasks table (store), the kinds
of call that may become tasks and how each advances (kinds; claim_next), polling and
cancelling (lifecycle), and one loop per serving process that moves them on (waker).

Above the queue and the workspaces: a task's claim is made by ``claiming.claim_next`` with
a hook that completes the task inside the claim's transaction; the queue knows nothing of
tasks."""
