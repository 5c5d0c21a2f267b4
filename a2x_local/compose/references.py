"""Data flow between steps: which step takes an earlier step's output, and what to search for such a step.

A step that points back ("email it to my team", "translate them", "把结果发给我") takes the output of the step before
it (of the last step it depends on, when it depends on any): ``inputs_from`` says so, and the step depends on that
step. Whoever decomposed the request (the rules, a model, a steps file) gets the same treatment.

Such a step's words about the data it receives say nothing about the service it needs: "it", "them" and "the result"
are the earlier step's output, and "to my team" names whom the output goes to. Searched as written, "email it to my
team" ranks a team-information service first ("team" is the one rare word). So the text searched for it keeps the
action: the back references go, an addressee after "to" goes, and a noun used as a verb is said as the action it
stands for ("email" -> "send an email"). The step's task is shown as decomposed; only ``query`` changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from a2x_local.compose.lexicon import is_cjk, refers_back
from a2x_local.compose.rules import search_text
from a2x_local.compose.types import Step

# A noun written as a verb, and the action it stands for: what services that do it say about themselves.
_ACTIONS = {"email": "send an email", "e-mail": "send an email", "mail": "send mail", "text": "send a text message",
            "sms": "send an sms message", "message": "send a message", "fax": "send a fax", "tweet": "post a tweet",
            "phone": "make a phone call", "slack": "send a slack message", "ping": "send a message"}
_BACK_REFERENCE = re.compile(r"\b(?:it|them|these|those|this|that|the\s+(?:results?|output|summary|answer|data|"
                             r"same|list|file|forecast|report))\b(?=\s|$|[,.;!?])", re.IGNORECASE)
# "to my team", "to the whole team", "over to our lawyers": whom the output goes to, at the end of the step.
_ADDRESSEE = re.compile(r"\s+(?:over\s+)?(?:to|with|for)\s+(?:me|us|him|her|them|(?:my|our|his|her|their|the)"
                        r"(?:\s+\w+){1,3})\s*[.!?]*$", re.IGNORECASE)


def link_inputs(steps: Sequence[Step]) -> list[Step]:
    """The steps with ``inputs_from`` set where a step refers back to an earlier one's output (kept where the
    decomposer already said), and that step added to its ``depends_on``."""
    linked: list[Step] = []
    for index, step in enumerate(steps):
        inputs = list(step.inputs_from)
        if not inputs and index and refers_back(search_text(step.task)):
            inputs = [step.depends_on[-1] if step.depends_on else steps[index - 1].id]
        depends = [*step.depends_on, *(source for source in inputs if source not in step.depends_on)]
        linked.append(step.model_copy(update={"inputs_from": inputs, "depends_on": depends}))
    return linked


def retrieval_text(step: Step) -> str:
    """What to search for a step: its task without list markers and sequence words (`search_text`) and, when it
    takes an earlier step's output, without the back references and the addressee, its noun-verb said as an
    action. The task as written when nothing would be left."""
    text = search_text(step.task)
    if not step.inputs_from or is_cjk(text):
        return text
    first, _, rest = text.partition(" ")
    action = _ACTIONS.get(first.lower())
    core = f"{action} {rest}" if action else text
    core = _ADDRESSEE.sub("", core)
    core = " ".join(_BACK_REFERENCE.sub(" ", core).split()).strip(" ,;:")
    return core if len(core.split()) >= 2 else text
