"""Prompts: the autopilot loop (contract A's, written for an agent), triage, and the checklist
to run before completing an issue."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from workq.domain.checklists import checkbox_items
from workq.errors import WorkqError
from workq.server.state import ServerState

AUTOPILOT = """\
You are working through a shared issue queue (workq). Other agents may be working on it
at the same time; the queue makes sure each issue goes to one agent only.

Repeat, without stopping to summarise:
1. Call issue_ready(agent="{agent}") to see the next issue, then
   issue_claim(number=N{run_arg}). If the claim is refused ("Could not claim issue #N"),
   another agent got there first: go back to step 1.
   (issue_claim_next({claim_next_args}) does both in one step.)
2. Read the issue (issue_get(number=N) for blockers and labels). Do the work: change the
   code, run the tests, commit{push}.
3. When the work is done and the tests pass, call issue_complete(number=N{run_arg}).
   If you cannot finish it, call issue_block(number=N, reason="what is missing and why")
   so that nobody picks it again until someone unblocks it; or issue_release(number=N)
   to hand it back untouched.
4. Go to step 1 immediately.

When issue_ready answers "No ready issues available", the queue is empty: look at the
codebase for the most valuable missing work, create it with issue_create (a clear title,
the context, acceptance criteria), then continue the loop.

Your claims stay yours while this MCP server runs (it renews their leases); if you stop,
they expire and return to the queue. Never complete an issue you did not finish.
"""

TRIAGE = """\
Triage the workq backlog:
1. Call issue_backlog(limit=50) (or issue_list(status="open")) to see the open issues.
2. For each issue: is the title clear and the description actionable, with acceptance
   criteria? If not, fix it with issue_update. Set priority (urgent, high, medium, low)
   and issue_type (task, bug, feature, chore, docs) to what they really are.
3. Find duplicates (issue_search helps) and delete or block them with a reason that
   names the issue they duplicate.
4. Where one issue cannot start before another is done, record it with
   issue_depend(blocker=<first>, blocked=<second>).
5. Look at stale or blocked work (queue_stats, issue_get): unblock what is unblocked
   with issue_unblock.
Report what you changed, issue by issue, in one short list.
"""

CHECKLIST = """\
Before you call issue_complete(number={number}):
{criteria}- [ ] The change does what issue #{number} asks (re-read it with issue_get).
- [ ] The tests pass, including new tests for the new behaviour.
- [ ] Linters and type checks are clean.
- [ ] The work is committed (and pushed, if the project pushes) with a message naming #{number}.
- [ ] Nothing unrelated slipped into the change.
- [ ] Follow-up work you found is filed with issue_create, not left in your head.
If any box stays unchecked and you cannot check it, call issue_block(number={number},
reason=...) instead of completing.
"""


def register(server: MCPServer[Any], state: ServerState) -> None:
    @server.prompt(name="autopilot", description="The autopilot loop: ready, claim, work, complete")
    def autopilot(agent: str = "claude", run_id: str = "") -> str:
        run_arg = f', run_id="{run_id}"' if run_id else ""
        next_args = f'agent="{agent}"' + run_arg
        return AUTOPILOT.format(
            agent=agent, run_arg=run_arg, claim_next_args=next_args, push=" and push"
        )

    @server.prompt(name="triage", description="Clean up the backlog: priorities, types, links")
    def triage() -> str:
        return TRIAGE

    @server.prompt(
        name="completion_checklist",
        description="What to check before issue_complete, with the issue's acceptance criteria",
    )
    def completion_checklist(number: str) -> str:
        criteria = ""
        if number.isdecimal() and len(number) <= 10:
            from workq.services.queue import issues

            try:
                issue = issues.get(state.queue(), int(number))
            except WorkqError:
                issue = None
            if issue is not None:
                found = checkbox_items(issue.description)
                criteria = "".join(f"- [ ] {c}\n" for c in found)
        return CHECKLIST.format(number=number, criteria=criteria)
