"""Plan mode (contract A): phases, guidance, slugs, plan file paths, the template, the checklist.

Phases run Explore -> Design -> Review -> Final -> Exit. Each of the first four owns one
level-2 section of the plan file ``plans/<slug>.md``:

    Explore -> ``## Findings``    Design -> ``## Approach``
    Review  -> ``## Risks``       Final  -> ``## Tasks``

A heading is matched by its first word, case-insensitively, and the phase name works as
well (``## Findings (what I learned)`` and ``## Explore`` both open Findings).

Emptiness rule (what ``PLAN_EMPTY`` reports):
    Template placeholders are HTML comments (``<!-- ... -->``), which render as nothing.
    A section is empty when, with HTML comments removed, it holds only whitespace; a section
    whose heading is missing is empty too. Exiting plan mode is refused when ANY of the
    four sections is empty, and the error names each empty one in phase order, so the agent
    knows exactly what is left to write (write "None." where there really is nothing to
    say). With ``launchSwarm`` the Tasks section must also hold at least one open task.

Task lines:
    Tasks are the top-level checklist items of the ``## Tasks`` section (of the whole file
    when it has no such heading), numbered 1, 2, 3... in the order they appear, done ones
    included. ``- [ ] title`` is an open task; ``- [x] title`` is done: it keeps its number
    but never becomes an issue. ``*`` and ``+`` bullets work too. Tasks are independent
    unless the line ends with ``(after N)`` or ``(after N, M)`` (``#N`` and ``and`` are
    accepted), naming EARLIER task numbers it must wait for; waiting on a done task is
    dropped, since that work is finished. A line may also end with ``(touches GLOB, GLOB)``
    (before or after its ``(after ...)``): the paths the task's issue will touch, reserved
    when it is claimed (see ``domain.globs`` for the forms). Indented items, HTML comments
    and fenced code blocks are never tasks; a task line starts at the very beginning of its
    line.

Only ``plan_path`` touches the file system (to resolve the folder and look at the target).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from workq.domain import fields, globs
from workq.errors import InvalidInput, InvalidTransition, PlanEmpty, Step

__all__ = [
    "MAX_GOAL_CHARS",
    "MAX_PLAN_CHARS",
    "MAX_TASKS",
    "MAX_TEAMMATES",
    "PHASE_SECTIONS",
    "REQUIRED_SECTIONS",
    "SLUG_MAX",
    "TASK_TITLE_MAX",
    "PlanPhase",
    "PlanTask",
    "agent_name",
    "assign_agents",
    "empty_sections",
    "guidance",
    "next_phase",
    "parse_phase",
    "parse_tasks",
    "plan_path",
    "render_template",
    "require_content",
    "validate_goal",
    "validate_slug",
]

SLUG_MAX = 64
MAX_GOAL_CHARS = 4_000
MAX_PLAN_CHARS = 1_000_000
MAX_TASKS = 200
TASK_TITLE_MAX = 256
MAX_TEAMMATES = 32


class PlanPhase(StrEnum):
    EXPLORE = "explore"
    DESIGN = "design"
    REVIEW = "review"
    FINAL = "final"
    EXIT = "exit"

    @property
    def display(self) -> str:
        """The name people read: ``Explore``, ``Design``..."""
        return self.value.capitalize()


_PHASES = tuple(PlanPhase)

PHASE_SECTIONS: dict[PlanPhase, str] = {
    PlanPhase.EXPLORE: "Findings",
    PlanPhase.DESIGN: "Approach",
    PlanPhase.REVIEW: "Risks",
    PlanPhase.FINAL: "Tasks",
}
REQUIRED_SECTIONS: tuple[str, ...] = tuple(PHASE_SECTIONS.values())

# First word of a level-2 heading -> the section it opens.
_HEADING_WORDS: dict[str, str] = {
    "findings": "Findings",
    "explore": "Findings",
    "approach": "Approach",
    "design": "Approach",
    "risks": "Risks",
    "risk": "Risks",
    "review": "Risks",
    "tasks": "Tasks",
    "task": "Tasks",
    "final": "Tasks",
}

_GUIDANCE: dict[PlanPhase, str] = {
    PlanPhase.EXPLORE: (
        "Explore: read before you decide. Find the files, modules and tests that matter for "
        "the goal, how they work today, and the constraints around them. Write what you learn "
        "under '## Findings' in the plan file.\n"
        "Do not: edit code, run migrations or tests, or claim issues; planning is read-only "
        "work outside the plan file.\n"
        "Next: {advance} when the findings are written."
    ),
    PlanPhase.DESIGN: (
        "Design: choose an approach. Under '## Approach', say which modules change, what new "
        "interfaces or data appear, and why this way rather than the alternatives you "
        "considered. Be concrete enough that another agent could build it.\n"
        "Do not: start implementing or edit anything but the plan file.\n"
        "Next: {advance} when the approach is written."
    ),
    PlanPhase.REVIEW: (
        "Review: challenge the design. Under '## Risks', list what could break, edge cases, "
        "compatibility or migration concerns and open questions, each with how the approach "
        "handles it ('None.' only if you truly found none). Fix '## Approach' if the review "
        "changes it.\n"
        "Do not: wave risks away or start implementing.\n"
        "Next: {advance} when the risks are written."
    ),
    PlanPhase.FINAL: (
        "Final: turn the plan into work. Under '## Tasks', write one '- [ ] title' line per "
        "task, each small enough for one agent session. Tasks are numbered 1, 2, 3... in order "
        "and are independent unless the line ends with '(after N)' or '(after N, M)', naming "
        "earlier tasks it must wait for.\n"
        "Do not: start on the tasks yet.\n"
        "Next: {advance} when the task list is written."
    ),
    PlanPhase.EXIT: (
        "Exit: the plan is written. Re-read the plan file once, then {exit}.\n"
        "Do not: claim or complete issues before exiting; they stay refused in plan mode.\n"
        "Next: {exit_short}."
    ),
}


def parse_phase(value: object) -> PlanPhase:
    """The phase named by ``value`` (``"explore"``, ``"EXPLORE"``, ``"Explore"``).

    Raises:
        InvalidInput: ``value`` names no plan phase.
    """
    if isinstance(value, str):
        try:
            return PlanPhase(value.strip().lower())
        except ValueError:
            pass
    raise InvalidInput(
        f"unknown plan phase {_show(value)}; expected one of "
        + ", ".join(p.value for p in PlanPhase),
        field="phase",
    )


def next_phase(phase: PlanPhase) -> PlanPhase:
    """The phase after ``phase``.

    Raises:
        InvalidTransition: ``phase`` is Exit, the last one.
    """
    index = _PHASES.index(phase)
    if index + 1 >= len(_PHASES):
        raise InvalidTransition(
            "Plan mode has no phase after Exit",
            hint=(Step.EXIT_PLAN, " finishes the plan"),
            reason="no_next_phase",
            phase=phase.value,
        )
    return _PHASES[index + 1]


# How the next steps are written, by the face that shows the guidance.
TOOL_STEPS = {
    "advance": "call advance_plan_phase",
    "exit": "call exit_plan_mode (launchSwarm=true turns the open tasks into queue issues, "
    "spread over teammateCount agents)",
    "exit_short": "call exit_plan_mode",
}
COMMAND_STEPS = {
    "advance": "run 'workq plan advance'",
    "exit": "run 'workq plan exit' (--launch-swarm turns the open tasks into queue issues, "
    "spread over --teammates agents)",
    "exit_short": "run 'workq plan exit'",
}


def guidance(phase: PlanPhase, steps: dict[str, str] = TOOL_STEPS) -> str:
    """What an agent should do in ``phase``, and what it should not; the next step as
    ``steps`` words it (a tool call, or a command)."""
    return _GUIDANCE[phase].format_map(steps)


# --- slugs and paths ------------------------------------------------------------------------

_SLUG_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")


def validate_slug(slug: object) -> str:
    """``slug`` itself when it is a safe plan name: 1-64 of ``[a-z0-9-]``, no edge hyphen.

    Raises:
        InvalidInput: anything else (path separators, dots, capitals, unicode, NUL...).
    """
    if isinstance(slug, str) and _SLUG_RE.fullmatch(slug):
        return slug
    raise InvalidInput(
        f"invalid plan slug {_show(slug)}: use 1-{SLUG_MAX} lowercase ASCII letters, digits "
        "and hyphens, not starting or ending with a hyphen (for example 'auth-refactor')",
        field="slug",
    )


def plan_path(plans_dir: Path, slug: str) -> Path:
    """The plan file for ``slug``: ``<resolved plans_dir>/<slug>.md``, checked to stay inside.

    The folder itself is resolved (it may be a symlink the user chose); the file must not be
    a symlink, nor anything but a regular file if it exists. Writers should still open it
    with ``O_NOFOLLOW`` so a symlink planted after this check is not followed.

    Raises:
        InvalidInput: the slug is invalid, or the target is a symlink, a non-file, or
            resolves outside the plans folder.
    """
    name = validate_slug(slug)
    try:
        root = Path(plans_dir).resolve()
        target = root / f"{name}.md"
        if target.is_symlink():
            raise InvalidInput(
                f"plan file {target} is a symlink; refusing to follow it out of the plans folder",
                hint="remove the symlink or choose another slug",
                field="slug",
                path=str(target),
            )
        if target.exists() and not target.is_file():
            raise InvalidInput(
                f"plan file {target} exists but is not a regular file",
                hint="remove it or choose another slug",
                field="slug",
                path=str(target),
            )
        resolved = target.resolve()
    except (OSError, RuntimeError) as exc:  # symlink loops, unreadable parents
        raise InvalidInput(
            f"cannot resolve the plans folder {plans_dir}: {exc}",
            hint="check WORKQ_PLANS_DIR",
            field="plans_dir",
        ) from exc
    if resolved.parent != root or resolved.name != target.name:
        raise InvalidInput(
            f"plan file for {name!r} resolves outside the plans folder {root}",
            field="slug",
            path=str(resolved),
        )
    return target


# --- the template -----------------------------------------------------------------------------


def validate_goal(goal: object) -> str:
    """``goal`` stripped, with line endings made ``\\n``.

    Raises:
        InvalidInput: not text, empty, longer than ``MAX_GOAL_CHARS`` or holding control
            characters.
    """
    if not isinstance(goal, str):
        raise InvalidInput(f"the goal must be text, not {type(goal).__name__}", field="goal")
    fields.characters(goal, "goal", multiline=True, label="the goal")  # as given, then
    text = goal.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise InvalidInput("the goal is empty; say what the plan is for", field="goal")
    return fields.text(text, "goal", limit=MAX_GOAL_CHARS, multiline=True, label="the goal")


_PLACEHOLDERS: dict[str, str] = {
    "Findings": (
        "Explore: what you learned. Relevant files and modules, how they work today,\n"
        "constraints, prior art. Replace this comment with your notes."
    ),
    "Approach": (
        "Design: the approach. What changes where, new interfaces or data, and why this\n"
        "way rather than the alternatives. Replace this comment with the design."
    ),
    "Risks": (
        "Review: what could go wrong. Edge cases, compatibility, open questions, and how\n"
        "the approach handles each. Write 'None.' if there really are none."
    ),
    "Tasks": (
        "Final: the work as a checklist, one line per task, for example:\n"
        "\n"
        "- [ ] Add the parser\n"
        "- [ ] Document the file format\n"
        "- [ ] Wire the parser into the CLI (after 1)\n"
        "- [ ] Add end-to-end tests (after 1, 3)\n"
        "\n"
        "Tasks are numbered 1, 2, 3... in order. They are independent (they can run in\n"
        "parallel) unless the line ends with (after N) or (after N, M), naming earlier\n"
        "tasks it must wait for. '- [x]' marks a task already done: it keeps its number\n"
        "but does not become an issue. Indented items are details, not tasks.\n"
        "Write your tasks below this comment, not inside it."
    ),
}


def render_template(slug: str, goal: str) -> str:
    """A new plan file: title, goal, and one placeholder section per phase.

    The goal is quoted (every line starts with ``>``) and ``<`` is escaped, so nothing in it
    can open a section, a task or a comment.

    Raises:
        InvalidInput: the slug or the goal is invalid.
    """
    name = validate_slug(slug)
    text = validate_goal(goal).replace("<", "&lt;")
    quoted = "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))
    parts = [f"# Plan: {name}", "", "## Goal", "", quoted, ""]
    for section in REQUIRED_SECTIONS:
        parts += [f"## {section}", "", f"<!--\n{_PLACEHOLDERS[section]}\n-->", ""]
    return "\n".join(parts)


# --- reading a plan file --------------------------------------------------------------------

_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t](.*))?")
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_WORD_RE = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based line number in the file
    text: str
    fenced: bool


@dataclass(frozen=True)
class _Layout:
    sections: dict[str, list[_Line]]  # body lines of each recognised section
    lines: list[_Line]  # every line, comments blanked


def _heading_text(raw: str) -> str:
    """A heading's text without its optional closing ``#`` sequence."""
    text = raw.strip(" \t")
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip(" \t")
    return text


def _strip_comments(text: str) -> str:
    # Keep the newlines a comment spanned, so line numbers still match the file.
    return _COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _layout(text: str) -> _Layout:
    if len(text) > MAX_PLAN_CHARS:
        raise InvalidInput(
            f"the plan file is {len(text)} characters; the limit is {MAX_PLAN_CHARS}",
            field="plan",
        )
    sections: dict[str, list[_Line]] = {}
    lines: list[_Line] = []
    current: str | None = None
    fence: str | None = None  # the opening fence while inside a fenced block
    body = _strip_comments(text.replace("\r\n", "\n").replace("\r", "\n"))
    for number, raw in enumerate(body.split("\n"), start=1):
        if fence is not None:
            closing = _FENCE_RE.fullmatch(raw)
            line = _Line(number, raw, fenced=True)
            if (
                closing
                and closing.group(1)[0] == fence[0]
                and len(closing.group(1)) >= len(fence)
                and not closing.group(2).strip()
            ):
                fence = None
        elif (opening := _FENCE_RE.fullmatch(raw)) is not None:
            fence = opening.group(1)
            line = _Line(number, raw, fenced=True)
        elif (heading := _HEADING_RE.fullmatch(raw)) is not None:
            level = len(heading.group(1))
            if level <= 2:
                current = None
                if level == 2:
                    word = _WORD_RE.match(_heading_text(heading.group(2) or "").lower())
                    current = _HEADING_WORDS.get(word.group(0)) if word else None
                    if current is not None:
                        sections.setdefault(current, [])
                lines.append(_Line(number, raw, fenced=False))
                continue
            line = _Line(number, raw, fenced=False)
        else:
            line = _Line(number, raw, fenced=False)
        lines.append(line)
        if current is not None:
            sections[current].append(line)
    return _Layout(sections, lines)


def empty_sections(text: str) -> list[str]:
    """The required sections (in phase order) that are missing or hold only placeholders.

    Raises:
        InvalidInput: the text is longer than ``MAX_PLAN_CHARS``.
    """
    sections = _layout(text).sections
    return [
        name
        for name in REQUIRED_SECTIONS
        if not any(line.text.strip() for line in sections.get(name, []))
    ]


def require_content(text: str, template: str, *, need_tasks: bool = False) -> list[str]:
    """Check a plan before it leaves plan mode: it must hold something beyond ``template``
    (the file as plan mode wrote it), in any shape the agent chose. Returns the template's
    sections that are present but still empty: a warning, not a refusal.

    Raises:
        PlanEmpty: nothing but the template (``facts["empty_sections"]`` lists the required
            sections), or ``need_tasks`` and there is no open task to launch.
        InvalidInput: ``need_tasks`` and the task list is malformed.
    """
    layout = _layout(text)
    given = {line.strip() for line in _strip_comments(template).split("\n")}
    written = any(
        line.text.strip()
        and line.text.strip() not in given
        and _HEADING_RE.fullmatch(line.text) is None
        for line in layout.lines
    )
    if not written:
        raise PlanEmpty(
            "The plan file holds nothing beyond its template",
            empty_sections=list(REQUIRED_SECTIONS),
        )
    if need_tasks and not parse_tasks(text):
        raise PlanEmpty(
            "The plan has no open '- [ ] title' task lines to launch",
            hint=("write the tasks as '- [ ] title' lines, then ", Step.EXIT_PLAN, " again"),
            empty_sections=["Tasks"],
        )
    return [
        name
        for name in REQUIRED_SECTIONS
        if name in layout.sections and not any(line.text.strip() for line in layout.sections[name])
    ]


# --- tasks ----------------------------------------------------------------------------------

_TASK_LINE_MAX = TASK_TITLE_MAX + 2_000  # room for a long (after ...) marker
_TASK_RE = re.compile(r"[-*+][ \t]+\[([ xX])\](?:[ \t]+(.*))?")
_AFTER_RE = re.compile(
    r"\(\s*after\s+(#?\d{1,9}(?:\s*(?:,|\band\b)\s*#?\d{1,9})*)\s*\)\s*$", re.IGNORECASE
)
_TOUCHES_RE = re.compile(r"\(\s*touches\s+([^()]*)\)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class PlanTask:
    """One open checklist line: its number in the list, its title, the tasks it waits for."""

    index: int
    title: str
    depends_on: tuple[int, ...] = ()
    touches: tuple[str, ...] = ()


def parse_tasks(text: str) -> list[PlanTask]:
    """The open tasks of a plan, in order (see the module docstring for the syntax).

    Raises:
        InvalidInput: more than ``MAX_TASKS`` checklist lines, a task with no title, a title
            longer than ``TASK_TITLE_MAX`` or holding control characters, or an ``(after N)``
            that names the task itself, a later task or no task.
    """
    layout = _layout(text)
    source = layout.sections.get("Tasks", layout.lines)
    # (line, done, title, after, touches)
    items: list[tuple[int, bool, str, list[int], list[str]]] = []
    for line in source:
        match = None if line.fenced else _TASK_RE.fullmatch(line.text)
        if match is None:
            continue
        index = len(items) + 1
        if index > MAX_TASKS:
            raise InvalidInput(
                f"the plan has more than {MAX_TASKS} tasks (line {line.number})",
                hint="merge small tasks or split the plan in two",
                field="tasks",
            )
        title = match.group(2) or ""
        where = f"task {index} (line {line.number})"
        if len(title) > _TASK_LINE_MAX:
            raise InvalidInput(
                f"{where} is {len(title)} characters long; a title may have {TASK_TITLE_MAX}",
                field="tasks",
            )
        after: list[int] = []
        paths: list[str] = []
        for _ in range(2):  # the two end markers, in either order
            if not after and (marker := _AFTER_RE.search(title)) is not None:
                after = [int(n) for n in re.findall(r"\d+", marker.group(1))]
            elif not paths and (marker := _TOUCHES_RE.search(title)) is not None:
                paths = globs.globs(
                    (p.strip() for p in marker.group(1).split(",") if p.strip()), "tasks"
                )
            else:
                break
            title = title[: marker.start()].rstrip()
        # Checked as written (a title becomes an issue title: one line, no controls),
        # then with its runs of white space made one space, then measured.
        fields.characters(title, "tasks", multiline=False, label=f"the title of {where}")
        title = " ".join(title.split())
        if not title:
            raise InvalidInput(f"{where} has no title", field="tasks")
        title = fields.text(
            title, "tasks", limit=TASK_TITLE_MAX, multiline=False, label=f"the title of {where}"
        )
        for dep in after:
            if not 1 <= dep < index:
                earlier = f"tasks 1..{index - 1}" if index > 1 else "none: it is the first"
                raise InvalidInput(
                    f"{where} waits for task {dep}, but a task can only wait for earlier "
                    f"tasks ({earlier})",
                    hint="reorder the tasks so each comes after those it waits for",
                    field="tasks",
                )
        items.append((line.number, match.group(1) != " ", title, after, paths))
    done = {i for i, (_, is_done, *_) in enumerate(items, start=1) if is_done}
    return [
        PlanTask(i, title, tuple(sorted(set(after) - done)), tuple(paths))
        for i, (_, is_done, title, after, paths) in enumerate(items, start=1)
        if not is_done
    ]


def agent_name(number: int) -> str:
    """The name of swarm teammate ``number`` (1-based): ``teammate-1``..."""
    return f"teammate-{number}"


def assign_agents(tasks: Sequence[PlanTask], teammate_count: int) -> list[str]:
    """One agent per task, dealt round-robin: ``teammate-1``, ``teammate-2``... and around.

    Raises:
        InvalidInput: ``teammate_count`` is not an integer from 1 to ``MAX_TEAMMATES``.
    """
    if (
        isinstance(teammate_count, bool)
        or not isinstance(teammate_count, int)
        or not 1 <= teammate_count <= MAX_TEAMMATES
    ):
        raise InvalidInput(
            f"teammateCount must be an integer from 1 to {MAX_TEAMMATES}, not "
            f"{_show(teammate_count)}",
            field="teammateCount",
        )
    return [agent_name(position % teammate_count + 1) for position in range(len(tasks))]


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
