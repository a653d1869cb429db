"""How the CLI spells the steps that error hints point to: as the command to run."""

from __future__ import annotations

from workq.domain.commands import COMMANDS, command

__all__ = ["COMMANDS", "command", "for_person"]

# Hints written once for every face, in an agent's words; on the command line they say
# what a person runs instead. (Hints that point to a Step are spelled by ``command``.)
_AGENT_WORDS = (
    ("fix the argument and call again", "fix it and run the command again; see '{help}'"),
    ("then call again", "then run the command again"),
    ("call again", "run the command again"),
)


def for_person(text: str, command: str | None) -> str:
    """An error line as ``workq COMMAND`` shows it: agent wording replaced by commands."""
    where = f"workq {command} --help" if command else "workq --help"
    for agent, person in _AGENT_WORDS:
        text = text.replace(agent, person.format(help=where))
    return text
