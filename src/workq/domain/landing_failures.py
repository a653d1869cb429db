"""A refused landing's failure as the holder reads it: every text GitHub gave cut to a bound
and rid of what no stored text may hold, and the comment workq posts on the issue (Markdown
whose structure no text from GitHub can break: one-line texts are escaped or in code spans,
longer ones in code fences longer than any run of backticks they hold).

The bounds keep the whole comment well under the comment limit (schemas.COMMENT_MAX).
"""

from __future__ import annotations

import re

from workq.schemas import COMMENT_MAX, REASON_MAX, FailedCheck, LandingFailure

NAME_MAX = 200  # a check's name, an author, a path
TITLE_MAX = 300  # a check's output title
SUMMARY_MAX = 1_500  # a check's output summary
MESSAGE_MAX = 300  # an annotation's message
BODY_MAX = 1_500  # a review's body
COMMENT_BODY_MAX = 600  # a review comment's body
UNREAD_MAX = 300  # why something could not be read
REASON_LIMIT = 1_000  # why it was refused (the landing's detail)
CHECKS_MAX = 5  # failing checks described (their names beyond, counted)
ANNOTATIONS_MAX = 10  # per check run
REVIEWS_MAX = 5
COMMENTS_MAX = 10

# What no stored text may hold (domain/fields.py refuses it in what callers give): the C0
# controls but tab and newline, DEL, the C1 controls, lone surrogates.
_UNSTORABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"\s*[\n\u2028\u2029]\s*")
# What starts an inline construct in a line of Markdown (GitHub's included): escaped.
_INLINE = re.compile(r"([\\`*_\[\]<>!&~|#])")
_BACKTICKS = re.compile(r"`+")


def cut(value: str | None, limit: int) -> str | None:
    """``value`` storable (CRLF and CR become newlines, other controls go) and at most
    ``limit`` characters, saying how much was cut; None stays None."""
    if value is None:
        return None
    text = _UNSTORABLE.sub("", value.replace("\r\n", "\n").replace("\r", "\n"))
    if len(text) <= limit:
        return text
    note = f" [… {len(text) - limit} more characters cut]"
    if len(note) > limit // 2:  # a short bound: only a sign that something was cut
        note = "…"
    return text[: limit - len(note)] + note


def line(value: str | None, limit: int) -> str | None:
    """``cut``, on one line (line breaks and the space around them become one space)."""
    if value is None:
        return None
    return cut(_LINE_BREAKS.sub(" ", value.replace("\r", "\n")).strip(), limit)


def escaped(value: str) -> str:
    """One line of text as Markdown that shows it as is: no emphasis, link, code or HTML."""
    return _INLINE.sub(r"\\\1", value)


def code_span(value: str) -> str:
    """One line of text as a Markdown code span (its backticks cannot close it)."""
    ticks = "`" * (_longest_run(value) + 1)
    pad = " " if value.startswith(("`", " ")) or value.endswith(("`", " ")) else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def fenced(value: str) -> str:
    """Text of any lines as a Markdown code block: the fence is longer than any run of
    backticks in it, so nothing in it ends the block or starts anything else."""
    fence = "`" * max(3, _longest_run(value) + 1)
    return f"{fence}text\n{value.rstrip()}\n{fence}"


def _longest_run(value: str) -> int:
    return max((len(m.group()) for m in _BACKTICKS.finditer(value)), default=0)


def block_reason(failure: LandingFailure) -> str:
    """Why the issue is blocked once its landing was refused ``max_rounds`` times (at most
    schemas.REASON_MAX characters)."""
    head = (
        f"Landing refused {failure.round} times (max_landing_rounds is {failure.max_rounds}): "
        "a person is needed. Last: "
    )
    return head + (line(failure.reason, REASON_MAX - len(head)) or "")


def comment(failure: LandingFailure) -> str:
    """The comment workq posts on the issue when its landing is refused: why, the round, each
    failing check (conclusion, title, summary, annotations), the requested changes, and what
    follows (repair and land again, or a person, when the refusal blocked the issue)."""
    text = "\n\n".join(_paragraphs(failure))
    if len(text) <= COMMENT_MAX:
        return text
    # Only texts full of backticks (their fences grow) come here: less, until it fits.
    checks = [c.model_copy(update={"annotations": []}) for c in failure.checks]
    less: list[dict[str, object]] = [
        {"checks": checks},
        {"checks": [], "reviews": [], "review_comments": []},
    ]
    for update in less:
        text = "\n\n".join(_paragraphs(failure.model_copy(update=update)))
        if len(text) <= COMMENT_MAX:
            break
    return text


def _paragraphs(failure: LandingFailure) -> list[str]:
    out = [f"Landing refused: {escaped(failure.reason)}"]
    facts = [f"round {failure.round} of {failure.max_rounds}"]
    if failure.pr_number is not None:
        facts.append(f"pull request #{failure.pr_number}")
    if failure.head_sha:
        facts.append(f"head {failure.head_sha[:12]}")
    out.append(" · ".join(facts))
    for check in failure.checks:
        out += _check(check)
    if failure.more_checks:
        out.append(f"{failure.more_checks} more failing checks not shown.")
    for review in failure.reviews:
        who = code_span(review.author) if review.author else "a reviewer"
        out.append(f"**Changes requested** by {who}" + (":" if review.body else "."))
        if review.body:
            out.append(fenced(review.body))
    for note in failure.review_comments:
        where = f"{note.path}:{note.line}" if note.line is not None else note.path
        who = f" ({code_span(note.author)})" if note.author else ""
        out += [f"Review comment on {code_span(where)}{who}:", fenced(note.body)]
    if failure.unread:
        out.append("Not read from GitHub: " + "; ".join(escaped(u) for u in failure.unread))
    out.append(_next_step(failure))
    return out


def _check(check: FailedCheck) -> list[str]:
    out = [f"**Check {code_span(check.name)}**: {escaped(check.conclusion or 'failed')}"]
    if check.title:
        out.append(f"Title: {escaped(check.title)}")
    if check.summary:
        out.append(fenced(check.summary))
    if check.annotations:
        shown = len(check.annotations)
        out.append(f"Annotations ({shown} of {max(shown, check.annotations_total)}):")
    for a in check.annotations:
        where = f"{a.path}:{a.start_line}" if a.start_line is not None else a.path
        level = f" ({escaped(a.annotation_level)})" if a.annotation_level else ""
        out += [f"{code_span(where)}{level}", fenced(a.message)]
    if check.url:
        out.append(f"Details: <{check.url}>" if _plain_url(check.url) else "")
    return [p for p in out if p]


def _plain_url(url: str) -> bool:
    return url.startswith(("https://", "http://")) and not re.search(r"[\s<>`]", url)


def _next_step(failure: LandingFailure) -> str:
    if not failure.blocked:
        return "Repair it in the issue's worktree, commit, and merge again."
    if failure.round >= failure.max_rounds:
        return (
            f"The issue is blocked: its landing was refused {failure.round} times "
            f"(max_landing_rounds is {failure.max_rounds}). A person decides what follows, "
            "then unblocks it."
        )
    return "The issue is blocked, as its repository says of a refused landing (on_refused)."
